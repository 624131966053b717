// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinning keeps the proxies under test on CPUs of their own and the rest
// (this process's load, the simulators) on the others, so that a proxy's
// throughput is its own: nothing else competes for its cores, as when it
// is measured from another machine.
type pinning struct {
	proxies, rest unix.CPUSet
}

// newPinning parses spec, a CPU list such as 1, 8-15 or 2,4-5, for the
// proxies; the other CPUs this process may use go to everything else. It
// moves this process there at once, so that what it starts inherits them.
func newPinning(spec string) (*pinning, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, err
	}
	p := &pinning{rest: all}
	for part := range strings.SplitSeq(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("-pin %q: not a CPU list such as 1, 8-15 or 2,4-5", spec)
		}
		for c := a; c <= b; c++ {
			if !all.IsSet(c) {
				return nil, fmt.Errorf("-pin %q: CPU %d is not available to this process", spec, c)
			}
			p.proxies.Set(c)
			p.rest.Clear(c)
		}
	}
	if p.rest.Count() == 0 {
		return nil, fmt.Errorf("-pin %q leaves no CPU for the load and the simulators", spec)
	}
	if err := setAffinity(os.Getpid(), &p.rest); err != nil {
		return nil, err
	}
	runtime.GOMAXPROCS(p.rest.Count())
	return p, nil
}

// proxyEnv is the environment a proxy starts with: as many Go processors
// as it gets CPUs, not as many as it starts on.
func (p *pinning) proxyEnv() []string {
	return []string{"GOMAXPROCS=" + strconv.Itoa(p.proxies.Count())}
}

// pin moves a proxy, every thread of it, to the proxies' CPUs.
func (p *pinning) pin(pid int) error { return setAffinity(pid, &p.proxies) }

func (p *pinning) String() string {
	return fmt.Sprintf("proxies on %d CPU(s), the load and the simulators on %d", p.proxies.Count(), p.rest.Count())
}

// setAffinity sets the CPUs of every thread of a process. A thread started
// later inherits its parent's, so passes repeat until one finds no thread
// it has not set.
func setAffinity(pid int, set *unix.CPUSet) error {
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			done[tid] = true
			// a thread that ended meanwhile is no matter
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pinning thread %d of process %d: %w", tid, pid, err)
			}
		}
		if !fresh {
			return nil
		}
	}
	return fmt.Errorf("process %d kept starting threads while it was pinned", pid)
}
