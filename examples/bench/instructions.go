// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The instruction count: each Caddy runs under valgrind's callgrind,
// which counts the instructions its process executes in user space (the
// kernel's share, the same system calls on both sides, is not counted).
// Unlike a timing it does not depend on what else the machine is doing:
// two runs of the same binaries agree to within a few percent (the
// garbage collector's cycles fall a little differently), which makes it
// the measure to compare two builds by on a shared machine.

// callgrind wraps a Caddy command line to run under callgrind, counting
// into out. Go's asynchronous preemption signals are turned off: callgrind
// does not survive them.
func callgrind(caddy, out string, args []string) (name string, argv, env []string) {
	return "valgrind", append([]string{"--tool=callgrind", "--callgrind-out-file=" + out, caddy}, args...),
		[]string{"GODEBUG=asyncpreemptoff=1"}
}

// instructionsPerRequest warms the proxy up and returns the instructions
// its process executed per request over n requests sent eight at a time
// (out: the file callgrind counts into). What the process does on its
// own meanwhile (its probes, its timers), at the rate counted over an
// idle while before, is taken out: under callgrind a request takes some
// fifty times as long, and that work would weigh fifty times as much.
func instructionsPerRequest(p *proxyUnderTest, out string, body []byte, n int) (float64, error) {
	if err := sendN(p, body, 200); err != nil {
		return 0, err
	}
	const idle = 10 * time.Second
	if err := callgrindControl("-z", p); err != nil {
		return 0, err
	}
	began := time.Now()
	time.Sleep(idle)
	background, err := callgrindDump(p, out)
	if err != nil {
		return 0, err
	}
	perSecond := background / time.Since(began).Seconds()
	if err := callgrindControl("-z", p); err != nil {
		return 0, err
	}
	began = time.Now()
	if err := sendN(p, body, n); err != nil {
		return 0, err
	}
	total, err := callgrindDump(p, out)
	if err != nil {
		return 0, err
	}
	return (total - perSecond*time.Since(began).Seconds()) / float64(n), nil
}

// callgrindControl sends callgrind in p's process a command (-z: zero the
// counts, -d: dump them).
func callgrindControl(command string, p *proxyUnderTest) error {
	if b, err := exec.Command("callgrind_control", command, strconv.Itoa(p.cmd.Process.Pid)).CombinedOutput(); err != nil {
		return fmt.Errorf("callgrind_control %s: %v: %s", command, err, b)
	}
	return nil
}

// callgrindDump dumps p's counts and returns the instructions counted
// since they were last zeroed.
func callgrindDump(p *proxyUnderTest, out string) (float64, error) {
	before, _ := filepath.Glob(out + ".*")
	if err := callgrindControl("-d", p); err != nil {
		return 0, err
	}
	// the dump is the next numbered file
	dump := fmt.Sprintf("%s.%d", out, len(before)+1)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(dump); err == nil {
			for line := range strings.Lines(string(b)) {
				if v, ok := strings.CutPrefix(line, "summary: "); ok {
					return strconv.ParseFloat(strings.TrimSpace(v), 64)
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no summary in %s", dump)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sendN sends n requests to the proxy, eight at a time; every answer must
// be a 200.
func sendN(p *proxyUnderTest, body []byte, n int) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}}
	defer client.CloseIdleConnections()
	next := make(chan struct{})
	var mu sync.Mutex
	var failure error
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range next {
				req, _ := http.NewRequest(http.MethodPost, p.url("/v1/chat/completions"), bytes.NewReader(body))
				req.Header = p.header()
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s: status %d", p.name, resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					failure = err
					mu.Unlock()
				}
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return failure
}
