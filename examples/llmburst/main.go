// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command llmburst plays a scripted traffic profile against a
// caddy-hybrid-llm gateway on loopback (a baseline, a peak, and the
// baseline again) and prints, every second, how many requests were in
// flight and where the answered ones landed, so that one sees the
// self-hosted group carry the baseline, the cloud take the peak, and the
// traffic come back. A client whose request is refused with 429 and
// Retry-After (no room on self-hosted or the cloud) waits that long, as
// the OpenAI SDKs do, and the refusals are listed apart from failures:
// only failures make llmburst exit 1.
//
// With -rate it sends instead a fixed number of requests per second (open
// loop: a slow answer does not slow the sending) for -duration or until it
// gets SIGINT or SIGTERM, and prints each second as soon as it is over, so
// that one watches an incident as it happens. There a second's line also
// says which answers were degraded and why (X-Hybrid-Degraded,
// X-Hybrid-Degrade-Reason) and which requests failed how (the status, the
// error code of the answer and its Retry-After).
//
//	llmburst [-url http://127.0.0.1:8080] [-model chat-main] [-key sk-...] [-profile 4x4s,24x6s,3x6s]
//	llmburst -rate 20 -duration 60s [-url ...] [-model ...] [-key ...]
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
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	refused   map[string]int // 429 with Retry-After, by kind
	failures  map[string]int // anything else that is no answer, by kind
	failed    int
	maxFlight int64
}

func main() {
	target := flag.String("url", "http://127.0.0.1:8080", "the gateway's base URL (loopback only)")
	model := flag.String("model", "chat-main", "the alias to send")
	profile := flag.String("profile", "4x4s,24x6s,3x6s", "phases of <clients>x<duration>")
	maxTokens := flag.Int("max-tokens", 8, "max_tokens of each request")
	key := flag.String("key", os.Getenv("HYBRID_CLIENT_KEY"), "the client key sent as a bearer token (default $HYBRID_CLIENT_KEY)")
	rate := flag.Int("rate", 0, "send this many requests per second instead of the -profile (1..200), printing each second live")
	duration := flag.Duration("duration", 30*time.Second, "with -rate: how long to send (at most 10m); SIGINT or SIGTERM stops earlier")
	flag.Parse()

	u, err := url.Parse(*target)
	if err != nil || !isLoopback(u.Hostname()) {
		fmt.Fprintln(os.Stderr, "llmburst: -url must be an http URL on loopback")
		os.Exit(2)
	}
	body, _ := json.Marshal(map[string]any{
		"model":      *model,
		"messages":   []map[string]string{{"role": "user", "content": "Say hello"}},
		"max_tokens": *maxTokens,
	})
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	if *rate != 0 {
		if *rate < 1 || *rate > 200 || *duration <= 0 || *duration > 10*time.Minute {
			fmt.Fprintln(os.Stderr, "llmburst: -rate must be 1..200 and -duration positive and at most 10m")
			os.Exit(2)
		}
		if runRate(client, *target+"/v1/chat/completions", *key, body, *rate, *duration) > 0 {
			os.Exit(1)
		}
		return
	}
	phases, err := parseProfile(*profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmburst:", err)
		os.Exit(2)
	}

	var inflight atomic.Int64
	var total time.Duration
	for _, p := range phases {
		total += p.dur
	}
	seconds := make([]*second, int(total/time.Second)+2)
	for i := range seconds {
		seconds[i] = &second{landed: map[string]int{}, reasons: map[string]int{}, refused: map[string]int{}, failures: map[string]int{}}
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
					res := send(client, *target+"/v1/chat/completions", *key, body)
					inflight.Add(-1)
					s = slot()
					s.mu.Lock()
					switch {
					case res.ok:
						s.landed[res.group]++
						if res.reason != "" {
							s.reasons[res.reason]++
						}
					case res.retryAfter > 0 && res.status == http.StatusTooManyRequests:
						s.refused[res.failure]++
					default:
						s.failed++
						s.failures[res.failure]++
					}
					s.mu.Unlock()
					if res.retryAfter > 0 {
						// as the OpenAI SDKs do: wait as long as the
						// answer asks, within the phase
						select {
						case <-ctx.Done():
						case <-time.After(res.retryAfter):
						}
					}
				}
			}()
		}
		time.Sleep(time.Until(phaseStart.Add(p.dur)))
		cancel()
		phaseStart = phaseStart.Add(p.dur)
	}
	wg.Wait()

	fmt.Printf("%4s  %8s  %-28s  %s\n", "sec", "inflight", "answered by", "why not self-hosted")
	sum, refused, failures := map[string]int{}, map[string]int{}, map[string]int{}
	failed := 0
	for i, s := range seconds {
		if len(s.landed) == 0 && s.failed == 0 && len(s.refused) == 0 && s.maxFlight == 0 {
			continue
		}
		extra := ""
		if len(s.refused) > 0 {
			extra += "  refused: " + failureCounts(s.refused)
		}
		if len(s.failures) > 0 {
			extra += "  failed: " + failureCounts(s.failures)
		}
		fmt.Printf("%4d  %8d  %-28s  %s%s\n", i+1, s.maxFlight, counts(s.landed), counts(s.reasons), extra)
		for k, v := range s.landed {
			sum[k] += v
		}
		for k, v := range s.refused {
			refused[k] += v
		}
		for k, v := range s.failures {
			failures[k] += v
		}
		failed += s.failed
	}
	extra := ""
	if len(refused) > 0 {
		// no room anywhere, said with Retry-After: the clients waited
		// and came back, as SDKs do; not a failure
		extra += "; refused, to retry after: " + failureCounts(refused)
	}
	if len(failures) > 0 {
		extra += "; failed: " + failureCounts(failures)
	}
	fmt.Printf("total: %s, failed %d%s\n", counts(sum), failed, extra)
	if failed > 0 {
		os.Exit(1)
	}
}

// maxRateInflight bounds the requests -rate keeps in flight; a tick that
// finds that many is not sent and is counted as skipped.
const maxRateInflight = 400

// runRate sends rate requests per second, evenly spaced, for dur or until
// SIGINT/SIGTERM, and prints every second once it is over: the requests
// sent in it, the most in flight, where the answers that arrived in it
// landed (X-Hybrid-Target), why earlier targets were passed over, and the
// requests that failed (a status other than 200 or no answer). It waits
// for the requests in flight, prints the totals and returns the failures
// (skipped ticks count as failures).
func runRate(client *http.Client, url, key string, body []byte, rate int, dur time.Duration) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)

	type sec struct {
		sent, failed, skipped int
		maxFlight             int64
		landed, reasons       map[string]int
		degraded, failures    map[string]int
	}
	var (
		mu       sync.Mutex // guards secs and printed; the slot is read under it
		secs     []*sec
		printed  int
		inflight atomic.Int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	// at returns the current second's counts; mu is held.
	at := func() *sec {
		i := int(time.Since(start) / time.Second)
		for len(secs) <= i {
			secs = append(secs, &sec{landed: map[string]int{}, reasons: map[string]int{},
				degraded: map[string]int{}, failures: map[string]int{}})
		}
		return secs[i]
	}
	// flush prints the seconds before upTo not printed yet; mu is held.
	flush := func(upTo int) {
		for ; printed < upTo && printed < len(secs); printed++ {
			s := secs[printed]
			extra := ""
			if s.skipped > 0 {
				extra = fmt.Sprintf("  skipped %d (over %d in flight)", s.skipped, maxRateInflight)
			}
			if len(s.degraded) > 0 {
				extra += "  degraded: " + counts(s.degraded)
			}
			if len(s.failures) > 0 {
				extra += "  failed: " + failureCounts(s.failures)
			}
			fmt.Printf("%4d  %4d  %8d  %-26s  %6d  %s%s\n", printed+1, s.sent, s.maxFlight, counts(s.landed), s.failed, counts(s.reasons), extra)
		}
	}
	fmt.Printf("%4s  %4s  %8s  %-26s  %6s  %s\n", "sec", "sent", "inflight", "answered by (X-Hybrid-Target)", "errors", "passed over, why")

	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	printTick := time.NewTicker(100 * time.Millisecond)
	defer printTick.Stop()
	end := time.NewTimer(dur)
	defer end.Stop()
loop:
	for {
		select {
		case <-sig:
			break loop
		case <-end.C:
			break loop
		case <-printTick.C:
			mu.Lock()
			at()
			flush(len(secs) - 1)
			mu.Unlock()
		case <-tick.C:
			mu.Lock()
			s := at()
			s.sent++
			if inflight.Load() >= maxRateInflight {
				s.skipped++
				mu.Unlock()
				continue
			}
			s.maxFlight = max(s.maxFlight, inflight.Add(1))
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := send(client, url, key, body)
				inflight.Add(-1)
				mu.Lock()
				s := at()
				if res.ok {
					s.landed[res.group]++
					if res.reason != "" {
						s.reasons[res.reason]++
					}
					if res.degraded != "" {
						s.degraded[res.degraded]++
					}
				} else {
					s.failed++
					s.failures[res.failure]++
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	flush(len(secs))
	sum, degraded, failures, failed, sent := map[string]int{}, map[string]int{}, map[string]int{}, 0, 0
	for _, s := range secs {
		for k, v := range s.landed {
			sum[k] += v
		}
		for k, v := range s.degraded {
			degraded[k] += v
		}
		for k, v := range s.failures {
			failures[k] += v
		}
		failed += s.failed + s.skipped
		sent += s.sent
	}
	extra := ""
	if len(degraded) > 0 {
		extra += "; degraded: " + counts(degraded)
	}
	if len(failures) > 0 {
		extra += "; failed: " + failureCounts(failures)
	}
	fmt.Printf("total: sent %d, answered by %s, failed %d%s\n", sent, counts(sum), failed, extra)
	return failed
}

// result is how one request ended.
type result struct {
	ok         bool
	status     int           // not answered: the status, if any
	retryAfter time.Duration // not answered: the Retry-After asked for, if any
	group      string        // answered: the group that answered (X-Hybrid-Target)
	reason     string        // answered: why the earlier targets were passed over
	degraded   string        // answered by a degraded tier: why (X-Hybrid-Degrade-Reason)
	failure    string        // not answered: "503 code", with ", Retry-After N" if the answer had one, or "no answer"
}

// send posts one request and returns how it ended: the group that
// answered, why the earlier targets were passed over and, for a degraded
// answer, why it was degraded (a request answered by a target it had
// passed over came back to it: came_back); or how it failed.
func send(client *http.Client, url, key string, body []byte) result {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return result{failure: "no request"}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return result{failure: "no answer"}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code any `json:"code"`
			} `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		failure := strconv.Itoa(resp.StatusCode)
		if json.Unmarshal(b, &e) == nil && e.Error.Code != nil {
			failure += " " + fmt.Sprint(e.Error.Code)
		}
		res := result{status: resp.StatusCode}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			failure += ", Retry-After " + ra
			if n, err := strconv.Atoi(ra); err == nil && n > 0 {
				res.retryAfter = min(time.Duration(n)*time.Second, time.Minute)
			}
		}
		res.failure = failure
		return res
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	group, tried := resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason")
	reason := tried
	if i := strings.LastIndexByte(reason, ':'); i >= 0 {
		reason = reason[i+1:]
	}
	if group != "" && (strings.HasPrefix(tried, group+":overflow") || strings.Contains(tried, ", "+group+":overflow")) {
		// passed over for overflow, then the later targets refused it
		// too, and it came back
		reason = "came_back"
	}
	res := result{ok: true, group: group, reason: reason}
	if resp.Header.Get("X-Hybrid-Degraded") == "true" {
		res.degraded = resp.Header.Get("X-Hybrid-Degrade-Reason")
		if res.degraded == "" {
			res.degraded = "unknown"
		}
	}
	return res
}

func counts(m map[string]int) string {
	return join(m, " ", func(k string, n int) string { return fmt.Sprintf("%s=%d", k, n) })
}

// failureCounts renders failures by kind: "3×503 degrade_cap_reached, Retry-After 5; 1×no answer".
func failureCounts(m map[string]int) string {
	return join(m, "; ", func(k string, n int) string { return fmt.Sprintf("%d×%s", n, k) })
}

// join renders a map's entries in key order, each with item.
func join(m map[string]int, sep string, item func(k string, n int) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, item(k, m[k]))
	}
	return strings.Join(parts, sep)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
