// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command replay drives the real gateway with a day of traffic and checks
// its ledger against the figures the trace alone implies.
//
// It starts a simulated vLLM (one GPU of sequence slots), a simulated
// cloud and the gateway (a real Caddy with the module, in this process,
// from examples/replay/Caddyfile), plays the trace with its time
// compressed, and prints the ledger's three-way comparison next to the
// ideal one with the difference per figure, the spill's and the overflow
// controller's transitions, and writes a chart of the day:
//
//	go run ./examples/replay                          # the seed's day, 4 minutes
//	go run ./examples/replay -trace day.csv -compress 720
//	go run ./examples/replay -config examples/Caddyfile   # the quickstart's overflow, on the same day
//
// A trace is a CSV with the columns second, requests_per_second,
// prompt_tokens and completion_tokens (see package trace). With -gateway
// and -admin it replays against a gateway already running on loopback,
// whose upstreams the flags must describe.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/examples/replay/trace"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

// options are the replay's flags.
type options struct {
	profile, tracePath string
	compress           float64
	config             string
	model              trace.Model
	prompt, completion int
	gpus, gpuCost      float64
	cloudPerGPUSec     float64
	out                string
	gateway, admin     string
	key                string
}

func main() {
	o := defaults()
	flag.StringVar(&o.profile, "profile", o.profile, "the built-in trace: seed-day (0.4 GPUs of demand 70% of the day, 2.5 GPUs from 14:24 to 21:36)")
	flag.StringVar(&o.tracePath, "trace", "", "a CSV trace (second,requests_per_second,prompt_tokens,completion_tokens) instead of the profile")
	flag.Float64Var(&o.compress, "compress", o.compress, "trace seconds per real second (360: a day in 4 minutes)")
	flag.StringVar(&o.config, "config", o.config, "the gateway's Caddyfile (it reads the quickstart's variables, which the replay sets)")
	flag.Float64Var(&o.model.SlotsPerGPU, "slots", o.model.SlotsPerGPU, "sequence slots per GPU: the simulated vLLM's max_num_seqs for one GPU")
	flag.DurationVar(&o.model.TTFT, "ttft", o.model.TTFT, "the simulators' time to first token")
	flag.DurationVar(&o.model.ITL, "itl", o.model.ITL, "the simulators' time between tokens")
	flag.IntVar(&o.prompt, "prompt-tokens", o.prompt, "the profile's prompt tokens per request")
	flag.IntVar(&o.completion, "completion-tokens", o.completion, "the profile's completion tokens per request")
	flag.Float64Var(&o.gpus, "gpus", o.gpus, "self-hosted GPUs")
	flag.Float64Var(&o.gpuCost, "gpu-cost", o.gpuCost, "USD per GPU-month, all in")
	flag.Float64Var(&o.cloudPerGPUSec, "cloud-per-gpu-second", o.cloudPerGPUSec, "the cloud's USD per GPU-second (the seed's sample price); per request-second it is this over -slots")
	flag.StringVar(&o.out, "out", o.out, "where the chart (chart.svg), Caddy's log and storage go")
	flag.StringVar(&o.gateway, "gateway", "", "replay against this gateway (loopback only) instead of starting one; with -admin and -key")
	flag.StringVar(&o.admin, "admin", "", "the running gateway's admin listener, e.g. http://127.0.0.1:2019")
	flag.StringVar(&o.key, "key", "", "the running gateway's client key for the replay")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := replay(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

// defaults are the flags' defaults: the seed's day in four minutes on
// one GPU of eight slots, requests of 25 tokens (0.29 s each).
func defaults() options {
	return options{
		profile: "seed-day", compress: 360, config: "examples/replay/Caddyfile",
		model:  trace.Model{SlotsPerGPU: 8, TTFT: 50 * time.Millisecond, ITL: 10 * time.Millisecond},
		prompt: 200, completion: 25, gpus: 1, gpuCost: 1000, cloudPerGPUSec: 0.000975, out: ".replay",
	}
}

// replay plays the trace and writes the report to w; it returns the
// report for a caller that reads its figures.
func replay(ctx context.Context, o options, w io.Writer) (*report, error) {
	tr, name, err := o.load()
	if err != nil {
		return nil, err
	}
	if err := o.check(tr); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	var s *setup
	if o.gateway != "" {
		for _, u := range []string{o.gateway, o.admin} {
			if err := checkTarget(u); err != nil {
				return nil, err
			}
		}
		s = &setup{gateway: o.gateway, admin: o.admin, key: o.key, stop: func() {}}
		st, err := readState(o.admin)
		if err != nil {
			return nil, fmt.Errorf("reading the gateway's state at %s: %v", o.admin, err)
		}
		if err := st.loopbackEndpoints(); err != nil {
			return nil, err
		}
		// the ledger's window starts at a minute: one that began before
		// the replay would count that minute's traffic too
		wait := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute))
		fmt.Fprintf(w, "waiting %s for the ledger's next minute; the gateway's other traffic during the replay is counted too\n", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	} else {
		out, err := filepath.Abs(o.out)
		if err != nil {
			return nil, err
		}
		_ = os.RemoveAll(filepath.Join(out, "storage"))
		if s, err = startAll(o.config, o.model, tr.Rows[0].Completion, o.gpus, o.gpuCost, o.cloudPerGPUSec, out); err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "gateway %s (admin %s) from %s, its log in %s\n", s.gateway, s.admin, o.config, filepath.Join(o.out, "caddy.log"))
	}
	defer s.stop()
	peak := peakConcurrency(tr, o.model)
	p := &player{
		s: s, tr: tr, compress: o.compress,
		maxInFlight: int(4*peak) + 64,
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: int(2*peak) + 16, IdleConnTimeout: 30 * time.Second,
		}, Timeout: longestService(tr, o.model) + 2*time.Minute},
		tick:     sampleStep(tr.Duration() / o.compress),
		progress: w,
	}
	fmt.Fprintf(w, "playing %s: %s of trace in %s, up to %.0f requests in flight\n", name, hours(tr.Duration()),
		seconds(tr.Duration()/o.compress).Round(time.Second), math.Ceil(peak))
	r, err := p.play(ctx)
	p.client.CloseIdleConnections()
	if err != nil {
		return nil, err
	}
	rep := newReport(name, tr, o.model, o.prices(), o.compress, r, p.tick.Seconds())
	rep.print(w)
	chart := filepath.Join(o.out, "chart.svg")
	if err := os.WriteFile(chart, rep.chart(), 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\nchart: %s\n", chart)
	return rep, nil
}

// load reads the trace or builds the profile.
func (o *options) load() (*trace.Trace, string, error) {
	if o.tracePath != "" {
		f, err := os.Open(o.tracePath)
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		tr, err := trace.Parse(f)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", o.tracePath, err)
		}
		return tr, filepath.Base(o.tracePath), nil
	}
	if o.profile != "seed-day" {
		return nil, "", fmt.Errorf("unknown profile %q (there is seed-day; or give -trace)", o.profile)
	}
	if o.prompt < 0 || o.completion < 1 {
		return nil, "", errors.New("-prompt-tokens must not be negative and -completion-tokens at least 1")
	}
	return trace.SeedDay(o.model, o.prompt, o.completion), "seed-day", nil
}

// check refuses what this machine cannot replay honestly.
func (o *options) check(tr *trace.Trace) error {
	m := o.model
	switch {
	case o.compress < 1:
		return fmt.Errorf("-compress %g: at least 1 (real time)", o.compress)
	case m.SlotsPerGPU < 1 || m.SlotsPerGPU != math.Trunc(m.SlotsPerGPU):
		return fmt.Errorf("-slots %g: a whole number of sequence slots, at least 1", m.SlotsPerGPU)
	case m.TTFT <= 0 || m.ITL < 0:
		return errors.New("-ttft must be positive and -itl not negative")
	case o.gpus <= 0 || o.gpuCost < 0 || o.cloudPerGPUSec < 0:
		return errors.New("-gpus must be positive, the prices not negative")
	case m.SlotsPerGPU*o.gpus != math.Round(m.SlotsPerGPU*o.gpus):
		return fmt.Errorf("-gpus %g × -slots %g: the simulated vLLM needs a whole number of slots", o.gpus, m.SlotsPerGPU)
	case (o.gateway == "") != (o.admin == ""):
		return errors.New("-gateway and -admin go together")
	}
	if d := tr.Duration() / o.compress; d > 6*3600 {
		return fmt.Errorf("the trace would take %s to play: compress it more", seconds(d).Round(time.Minute))
	}
	if peak := peakConcurrency(tr, m); peak > 4000 {
		return fmt.Errorf("the trace needs %.0f requests in flight at its peak; this replay plays up to 4000", peak)
	}
	if longest := longestService(tr, m); longest > 10*time.Minute {
		return fmt.Errorf("a request of the trace would take %s: the gateway's attempts give up at 10 minutes", longest)
	}
	return nil
}

func (o *options) prices() cost.Prices {
	return cost.Prices{SelfGPUs: o.gpus, GPUCostPerMonth: o.gpuCost, CloudPerGPUSec: o.cloudPerGPUSec}
}

// longestService is the longest a request of the trace takes.
func longestService(tr *trace.Trace, m trace.Model) time.Duration {
	var d time.Duration
	for _, r := range tr.Rows {
		d = max(d, m.Service(r.Completion))
	}
	return d
}

// peakConcurrency is the most requests the trace keeps in flight.
func peakConcurrency(tr *trace.Trace, m trace.Model) float64 {
	peak := 0.0
	for _, r := range tr.Rows {
		peak = max(peak, r.Rate*m.Service(r.Completion).Seconds())
	}
	return peak
}

// sampleStep is how often the controller is sampled and the chart's
// resolution: about 600 points, at most 10 samples a second.
func sampleStep(real float64) time.Duration {
	return max(seconds(real/600), 100*time.Millisecond)
}
