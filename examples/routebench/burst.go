// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The burst's keys: the clients' (given to the gateway through its
// environment, as a config may hold no key) and the cloud's.
const (
	uiKey    = "sk-routebench-ui-0123456789"
	batchKey = "sk-routebench-nightly-0123456789"
	shedKey  = "sk-routebench-shed-0123456789"
	cloudKey = "sk-routebench-cloud-0123456789"
)

var burstEnv = []string{
	"ROUTEBENCH_UI_KEY=" + uiKey, "ROUTEBENCH_BATCH_KEY=" + batchKey,
	"ROUTEBENCH_SHED_KEY=" + shedKey, "ROUTEBENCH_CLOUD_KEY=" + cloudKey,
}

// burstConfig is the gateway with classes: interactive, batch and
// sheddable batch clients, the replicas' priority field, and a cloud
// group as the alias's second target. Without classes, the same clients
// and groups as before priority classes: every client standard, the red
// line shared by none.
func burstConfig(p *params, addrs []string, classes bool) string {
	cfg := siteHead(0) + fmt.Sprintf(`		hybrid_llm {
			clients {
				client ui {env.ROUTEBENCH_UI_KEY} {
					class interactive
				}
				client nightly {env.ROUTEBENCH_BATCH_KEY} {
					class batch
				}
				client nightly-shed {env.ROUTEBENCH_SHED_KEY} {
					class batch
					sheddable
				}
			}
			group self {
				kind vllm
				proxy %s
				max_num_seqs %d
				max_queue 0
				affinity {
					max_load %s
				}
				probe {
					metrics_interval 100ms
				}
				classes {
					standard 0.75
					batch 0.5
					priority
					queue 64 5s
				}
			}
			group cloud {
				kind openai
				api_key {env.ROUTEBENCH_CLOUD_KEY}
				proxy http://%s
			}
			alias %s {
				target self %s
				target cloud %s
			}
		}
	}
}
`, strings.Join(addrs, " "), p.maxNumSeqs, p.maxLoad, cloudAddr, alias, vllmModel, cloudModel)
	if !classes {
		for _, cut := range []string{"\t\t\t\t\tclass interactive\n", "\t\t\t\t\tclass batch\n", "\t\t\t\t\tsheddable\n",
			"\t\t\t\tclasses {\n\t\t\t\t\tstandard 0.75\n\t\t\t\t\tbatch 0.5\n\t\t\t\t\tpriority\n\t\t\t\t\tqueue 64 5s\n\t\t\t\t}\n"} {
			cfg = strings.Replace(cfg, cut, "", 1)
		}
	}
	return cfg
}

// burstPhase is one measure of the burst: interactive conversations,
// alone or with a batch client's load.
type burstPhase struct {
	title    string
	batchKey string // "" for none
	before   bool   // the gateway without classes
	// measured
	interactive         []result
	batch               []result
	self, cloud         int
	r429, r503, other   int
	firstErr, batchErr  string
	p50, p95, batchP50  float64
	interactiveErrs     int
	interactiveRequests int
	interactiveSelf     int            // answered by the replicas
	priorities          map[string]int // the replicas' requests by their priority field
}

// batchConcurrency is the batch client's concurrency: twice the fleet's
// 16 slots.
const batchConcurrency = 32

func runBurst(ctx context.Context, r *runner, p *params, w *workload) error {
	addrs := replicaAddrs(p.replicas)
	cfg := burstConfig(p, addrs, true)
	if err := r.adapt("burst", cfg); err != nil {
		fmt.Printf("\npriority burst: skipped, bin/caddy does not adapt its config (the classes grammar): %v\n",
			strings.ReplaceAll(err.Error(), "\n", " "))
		return nil
	}
	ip := *p
	ip.concurrency = 4
	iw := w.subset(max(p.convs/2, ip.concurrency))
	phases := []*burstPhase{
		{title: "interactive alone"},
		{title: "+ batch, no classes (before)", batchKey: batchKey, before: true},
		{title: "+ batch", batchKey: batchKey},
		{title: "+ batch, sheddable", batchKey: shedKey},
	}
	for _, ph := range phases {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c := cfg
		if ph.before {
			c = burstConfig(p, addrs, false)
		}
		err := runPhase(ctx, r, &ip, iw, c, ph)
		r.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", ph.title, err)
		}
		fmt.Fprintf(os.Stderr, "burst %-20s interactive TTFT p95 %.1f ms, batch %d (self %d, cloud %d, 429 %d, 503 %d, other %d)\n",
			ph.title, ph.p95, len(ph.batch), ph.self, ph.cloud, ph.r429, ph.r503, ph.other)
	}

	fmt.Printf("\npriority burst: %d interactive conversations × %d turns at concurrency 4, then with a batch client at concurrency %d; "+
		"replicas scheduling by priority; a cloud second target\n\n", len(iw.convs), iw.turns, batchConcurrency)
	fmt.Println("| phase | interactive requests | errors | on self | TTFT p50 (ms) | TTFT p95 (ms) | batch requests | self | cloud | 429 | 503 | other errors | batch TTFT p50 (ms) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, ph := range phases {
		fmt.Printf("| %s | %d | %d | %d | %.1f | %.1f | %d | %d | %d | %d | %d | %d | %.1f |\n", ph.title, ph.interactiveRequests,
			ph.interactiveErrs, ph.interactiveSelf, ph.p50, ph.p95, len(ph.batch), ph.self, ph.cloud, ph.r429, ph.r503, ph.other, ph.batchP50)
	}
	fmt.Println()
	for _, ph := range phases {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(ph.priorities)) {
			parts = append(parts, fmt.Sprintf("%s: %d", k, ph.priorities[k]))
		}
		fmt.Printf("%s: the replicas' requests by their priority field: %s\n", ph.title, strings.Join(parts, ", "))
	}
	fmt.Println()
	fmt.Println("goals:")
	base := phases[0]
	for _, ph := range phases[1:] {
		if ph.before {
			continue // the figures before classes, not a goal
		}
		mark(ph.p95 <= 1.5*base.p95, "%s: interactive TTFT p95 %.1f ms ≤ 1.5 × alone %.1f ms (%.1f)", ph.title, ph.p95, base.p95, 1.5*base.p95)
		mark(ph.r503 == 0, "%s: no 503 (%d)", ph.title, ph.r503)
		// the cloud answers faster than the replicas here: a p95 kept
		// by spilling interactive requests would not count
		mark(ph.interactiveSelf == ph.interactiveRequests, "%s: every interactive request on self-hosted (%d of %d)", ph.title, ph.interactiveSelf, ph.interactiveRequests)
	}
	errs := 0
	for _, ph := range phases {
		errs += ph.interactiveErrs
		if ph.firstErr != "" {
			fmt.Printf("  %s: first interactive error: %s\n", ph.title, ph.firstErr)
		}
		if ph.batchErr != "" {
			fmt.Printf("  %s: first batch error other than 429/503: %s\n", ph.title, ph.batchErr)
		}
	}
	mark(errs == 0, "no interactive errors (%d)", errs)
	return nil
}

func mark(ok bool, format string, args ...any) {
	m := "ok    "
	if !ok {
		m = "MISSED"
	}
	fmt.Printf("- %s %s\n", m, fmt.Sprintf(format, args...))
}

// runPhase runs one phase on fresh replicas (scheduling by priority), a
// fresh cloud and a fresh gateway.
func runPhase(ctx context.Context, r *runner, p *params, w *workload, cfg string, ph *burstPhase) error {
	f, err := startFleet(replicaAddrs(p.replicas), p.vllmConfig("priority"))
	if err != nil {
		return err
	}
	defer f.close()
	if err := f.startCloud(simulator.CloudConfig{Models: []string{cloudModel}, APIKey: cloudKey,
		TTFT: 10 * time.Millisecond, ITL: time.Millisecond, DisableRecording: true}); err != nil {
		return err
	}
	gw, err := r.start("burst", proxyPort, adminPort, cfg, burstEnv...)
	if err != nil {
		return err
	}
	if err := waitUp(gw, alias, uiKey, 30*time.Second); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	f.mark()
	w.reset()

	var done atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	if ph.batchKey != "" {
		client := newHTTPClient(batchConcurrency)
		defer client.CloseIdleConnections()
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		for i := range batchConcurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(p.seed, 0x6261746368+uint64(i)))
				for !done.Load() && bctx.Err() == nil {
					doc := []message{{Role: "system", Content: "Summarise the document for the nightly report."},
						{Role: "user", Content: words(rng, 250+rng.IntN(250))}}
					x := chat(bctx, client, gw.url(), ph.batchKey, requestBody(alias, doc, p.maxTokens))
					mu.Lock()
					ph.batch = append(ph.batch, x)
					mu.Unlock()
					if x.status == http.StatusTooManyRequests {
						// as a client told to come back would, within the phase
						time.Sleep(min(x.retryIn, 500*time.Millisecond))
					}
				}
			}()
		}
		// the batch fills the fleet before the interactive turns start
		time.Sleep(500 * time.Millisecond)
	}
	res := runWorkload(ctx, w, []string{gw.url()}, uiKey, alias, p)
	done.Store(true)
	wg.Wait()

	var ttfts, bttfts []time.Duration
	for _, x := range res {
		ph.interactiveRequests++
		if x.err != nil {
			ph.interactiveErrs++
			if ph.firstErr == "" {
				ph.firstErr = x.err.Error()
			}
			continue
		}
		ttfts = append(ttfts, x.ttft)
		if x.target == "self" {
			ph.interactiveSelf++
		}
	}
	ph.p50, ph.p95 = percentile(ttfts, 50), percentile(ttfts, 95)
	for _, x := range ph.batch {
		switch {
		case x.status == http.StatusTooManyRequests:
			ph.r429++
		case x.status == http.StatusServiceUnavailable:
			ph.r503++
		case x.err != nil:
			ph.other++
			if ph.batchErr == "" {
				ph.batchErr = x.err.Error()
			}
		case x.target == "cloud":
			ph.cloud++
			bttfts = append(bttfts, x.ttft)
		case x.target == "self":
			ph.self++
			bttfts = append(bttfts, x.ttft)
		default:
			ph.other++
			if ph.batchErr == "" {
				ph.batchErr = fmt.Sprintf("answered by %q", x.target)
			}
		}
	}
	ph.batchP50 = percentile(bttfts, 50)
	// the priority field the replicas got, by value
	ph.priorities = map[string]int{}
	for _, v := range f.vllms {
		for _, rq := range v.Requests() {
			if rq.Path == "/v1/chat/completions" {
				pr := gjson.GetBytes(rq.Body, "priority")
				if pr.Exists() {
					ph.priorities[pr.Raw]++
				} else {
					ph.priorities["none"]++
				}
			}
		}
	}
	return nil
}
