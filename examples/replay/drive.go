// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/examples/replay/trace"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

// side is where a request was answered.
type side uint8

const (
	sideFailed side = iota
	sideSelf
	sideCloud
)

// record is one request as the replay saw it, in real seconds since the
// trace began.
type record struct {
	start, end float64
	side       side
	// it went to the cloud because the self-hosted slots were full
	// (X-Hybrid-Fallback-Reason red_line), or because the overflow
	// controller was on (overflow)
	spill, overflowed bool
	status            int
}

// controllerSample is the overflow controller's state at a moment.
type controllerSample struct {
	at     float64 // real seconds since the trace began
	active bool
}

// run is one replay: what it sent and saw.
type run struct {
	began    time.Time
	duration float64 // real seconds the trace was played
	records  []record
	notSent  int // arrivals dropped because too many were in flight
	samples  []controllerSample
	// the overflow controller's transitions, from the gateway's count
	transitions int64
	ledger      cost.Comparison
}

// player plays a trace against a gateway.
type player struct {
	s        *setup
	tr       *trace.Trace
	compress float64
	// most requests in flight at once; arrivals beyond are not sent and
	// counted (the machine is not keeping up)
	maxInFlight int
	client      *http.Client
	tick        time.Duration   // how often the controller is sampled
	progress    io.Writer       // a line per tenth of the trace, or nil
	selfGroups  map[string]bool // the gateway's vllm groups, from its state
}

// play sends the trace's requests at their rates, each row lasting its
// trace seconds divided by the compression, samples the overflow
// controller meanwhile, waits for the last answers and reads the ledger.
func (p *player) play(ctx context.Context) (*run, error) {
	st0, err := readState(p.s.admin)
	if err != nil {
		return nil, fmt.Errorf("reading the gateway's state: %v", err)
	}
	r := &run{duration: p.tr.Duration() / p.compress}
	p.selfGroups = st0.vllmGroups()
	if len(p.selfGroups) == 0 {
		return nil, fmt.Errorf("the gateway at %s has no vllm group: nothing self-hosted to replay against", p.s.admin)
	}
	trans0 := st0.transitions()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var inflight atomic.Int64

	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	r.began = time.Now()
	go func() {
		defer close(sampled)
		t := time.NewTicker(p.tick)
		defer t.Stop()
		for {
			if st, err := readState(p.s.admin); err == nil {
				r.samples = append(r.samples, controllerSample{at: time.Since(r.began).Seconds(), active: st.overflowActive()})
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	bodies := make(map[[2]int][]byte) // by prompt and completion tokens
	first := p.tr.Rows[0].Second
	lastTenth := -1
	schedule(p.tr, p.compress, func(t float64, row trace.Row) bool {
		if ctx.Err() != nil {
			return false
		}
		if wait := time.Until(r.began.Add(seconds(t))); wait > 0 {
			time.Sleep(wait)
		}
		if tenth := int(10 * t / r.duration); p.progress != nil && tenth != lastTenth {
			lastTenth = tenth
			fmt.Fprintf(p.progress, "  %3d%%  trace %s  %5.1f requests/s  %d in flight\n",
				tenth*10, clock(first+t*p.compress), row.Rate, inflight.Load())
		}
		if inflight.Load() >= int64(p.maxInFlight) {
			r.notSent++
			return true
		}
		key := [2]int{row.Prompt, row.Completion}
		body, ok := bodies[key]
		if !ok {
			body = requestBody(row.Prompt, row.Completion)
			bodies[key] = body
		}
		inflight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inflight.Add(-1)
			rec := p.send(ctx, r.began, body)
			mu.Lock()
			r.records = append(r.records, rec)
			mu.Unlock()
		}()
		return true
	})
	wg.Wait()
	stopSampling()
	<-sampled
	st1, err := readState(p.s.admin)
	if err != nil {
		return nil, fmt.Errorf("reading the gateway's state: %v", err)
	}
	r.transitions = st1.transitions() - trans0
	r.ledger, err = readLedger(ctx, p.s.admin, r.began)
	return r, err
}

// schedule calls send at each request's time, in real seconds since the
// start, with its row, until it returns false. Request k goes when the
// rate's integral reaches k: what a row leaves of a request carries into
// the next, so that every row sends its rate × its real length, however
// short or sparse.
func schedule(tr *trace.Trace, compress float64, send func(t float64, row trace.Row) bool) {
	first := tr.Rows[0].Second
	carry := 0.5 // a request at the middle of its share of time
	for i, row := range tr.Rows {
		a, b := (row.Second-first)/compress, (tr.Until(i)-first)/compress
		if row.Rate <= 0 {
			continue
		}
		t := a + (1-carry)/row.Rate
		for ; t < b; t += 1 / row.Rate {
			if !send(t, row) {
				return
			}
		}
		carry = 1 - (t-b)*row.Rate
	}
}

// send makes one request and records how it went.
func (p *player) send(ctx context.Context, began time.Time, body []byte) record {
	rec := p.do(ctx, began, body)
	rec.end = time.Since(began).Seconds()
	return rec
}

func (p *player) do(ctx context.Context, began time.Time, body []byte) record {
	rec := record{start: time.Since(began).Seconds()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.s.gateway+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return rec
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.s.key)
	resp, err := p.client.Do(req)
	if err != nil {
		return rec
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	rec.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		return rec
	}
	rec.side = sideCloud
	if p.selfGroups[resp.Header.Get("X-Hybrid-Target")] {
		rec.side = sideSelf
	}
	why := resp.Header.Get("X-Hybrid-Fallback-Reason")
	rec.spill = rec.side == sideCloud && strings.Contains(why, "red_line")
	rec.overflowed = rec.side == sideCloud && strings.Contains(why, "overflow")
	return rec
}

// requestBody is a chat request of about prompt tokens (the simulators
// count four characters a token) that generates exactly completion.
func requestBody(prompt, completion int) []byte {
	text := strings.Repeat("data ", max(prompt*4/5, 1))
	return fmt.Appendf(nil, `{"model":"chat-main","messages":[{"role":"user","content":%q}],"max_tokens":%d}`, text, completion)
}

// readLedger reads the gateway's ledger from the replay's start on.
func readLedger(ctx context.Context, admin string, from time.Time) (cost.Comparison, error) {
	var doc struct {
		Gateways []struct {
			cost.Comparison
		} `json:"gateways"`
	}
	q := url.Values{"from": {from.UTC().Truncate(time.Second).Format(time.RFC3339)}}
	if err := getJSON(ctx, admin+"/hybrid_llm/ledger?"+q.Encode(), &doc); err != nil {
		return cost.Comparison{}, fmt.Errorf("reading the ledger: %v", err)
	}
	if len(doc.Gateways) != 1 {
		return cost.Comparison{}, fmt.Errorf("the ledger has %d gateways; the replay reads one", len(doc.Gateways))
	}
	return doc.Gateways[0].Comparison, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// clock formats trace seconds as a time of day (with the day after the
// first).
func clock(s float64) string {
	d := int(s) / 86400
	h, m := int(s)%86400/3600, int(s)%3600/60
	if d > 0 {
		return fmt.Sprintf("day %d %02d:%02d", d+1, h, m)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}
