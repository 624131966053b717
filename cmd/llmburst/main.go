// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command llmburst plays a scripted traffic profile against a
// caddy-hybrid-llm gateway on loopback (a baseline, a peak, and the
// baseline again) and prints, every second, how many requests were in
// flight and where the answered ones landed, so that one sees the
// self-hosted group carry the baseline, the cloud take the peak, and the
// traffic come back.
//
//	llmburst [-url http://127.0.0.1:8080] [-model chat-main] [-profile 4x4s,24x6s,3x6s]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// phase is a number of concurrent clients for a while.
type phase struct {
	clients int
	dur     time.Duration
}

func parseProfile(s string) ([]phase, error) {
	var out []phase
	for _, part := range strings.Split(s, ",") {
		n, d, ok := strings.Cut(strings.TrimSpace(part), "x")
		if !ok {
			return nil, fmt.Errorf("phase %q: want <clients>x<duration>, e.g. 24x6s", part)
		}
		clients, err := strconv.Atoi(n)
		if err != nil || clients < 0 || clients > 512 {
			return nil, fmt.Errorf("phase %q: clients must be 0..512", part)
		}
		dur, err := time.ParseDuration(d)
		if err != nil || dur <= 0 || dur > 10*time.Minute {
			return nil, fmt.Errorf("phase %q: duration must be positive and at most 10m", part)
		}
		out = append(out, phase{clients, dur})
	}
	return out, nil
}

type second struct {
	mu        sync.Mutex
	landed    map[string]int
	reasons   map[string]int
	failed    int
	maxFlight int64
}

func main() {
	target := flag.String("url", "http://127.0.0.1:8080", "the gateway's base URL (loopback only)")
	model := flag.String("model", "chat-main", "the alias to send")
	profile := flag.String("profile", "4x4s,24x6s,3x6s", "phases of <clients>x<duration>")
	maxTokens := flag.Int("max-tokens", 8, "max_tokens of each request")
	key := flag.String("key", os.Getenv("HYBRID_CLIENT_KEY"), "the client key sent as a bearer token (default $HYBRID_CLIENT_KEY)")
	flag.Parse()

	u, err := url.Parse(*target)
	if err != nil || !isLoopback(u.Hostname()) {
		fmt.Fprintln(os.Stderr, "llmburst: -url must be an http URL on loopback")
		os.Exit(2)
	}
	phases, err := parseProfile(*profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmburst:", err)
		os.Exit(2)
	}
	body, _ := json.Marshal(map[string]any{
		"model":      *model,
		"messages":   []map[string]string{{"role": "user", "content": "Say hello"}},
		"max_tokens": *maxTokens,
	})
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}

	var inflight atomic.Int64
	var total time.Duration
	for _, p := range phases {
		total += p.dur
	}
	seconds := make([]*second, int(total/time.Second)+2)
	for i := range seconds {
		seconds[i] = &second{landed: map[string]int{}, reasons: map[string]int{}}
	}
	start := time.Now()
	slot := func() *second {
		i := int(time.Since(start) / time.Second)
		if i >= len(seconds) {
			i = len(seconds) - 1
		}
		return seconds[i]
	}

	// the clients: each phase starts its own, bounded by its duration
	var wg sync.WaitGroup
	phaseStart := start
	for _, p := range phases {
		ctx, cancel := context.WithDeadline(context.Background(), phaseStart.Add(p.dur))
		for range p.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					n := inflight.Add(1)
					s := slot()
					s.mu.Lock()
					s.maxFlight = max(s.maxFlight, n)
					s.mu.Unlock()
					group, reason, ok := send(client, *target+"/v1/chat/completions", *key, body)
					inflight.Add(-1)
					s = slot()
					s.mu.Lock()
					if ok {
						s.landed[group]++
						if reason != "" {
							s.reasons[reason]++
						}
					} else {
						s.failed++
					}
					s.mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Until(phaseStart.Add(p.dur)))
		cancel()
		phaseStart = phaseStart.Add(p.dur)
	}
	wg.Wait()

	fmt.Printf("%4s  %8s  %-28s  %s\n", "sec", "inflight", "answered by", "why not self-hosted")
	var sum = map[string]int{}
	failed := 0
	for i, s := range seconds {
		if len(s.landed) == 0 && s.failed == 0 && s.maxFlight == 0 {
			continue
		}
		fmt.Printf("%4d  %8d  %-28s  %s\n", i+1, s.maxFlight, counts(s.landed), counts(s.reasons))
		for k, v := range s.landed {
			sum[k] += v
		}
		failed += s.failed
	}
	fmt.Printf("total: %s, failed %d\n", counts(sum), failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// send posts one request and returns the group that answered and why the
// earlier targets were passed over.
func send(client *http.Client, url, key string, body []byte) (string, string, bool) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", "", false
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", "", false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", false
	}
	reason := resp.Header.Get("X-Hybrid-Fallback-Reason")
	if i := strings.LastIndexByte(reason, ':'); i >= 0 {
		reason = reason[i+1:]
	}
	return resp.Header.Get("X-Hybrid-Target"), reason, true
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
