// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/examples/replay/trace"
)

// The seed's day compressed into a few seconds, through a real Caddy
// with the module and the simulators: the self-hosted GPU carries the
// trough, the spill to the cloud runs through the evening peak and only
// then, the ledger counts the demand the trace makes, and the chart is an
// SVG of it.
func TestReplaySeedDay(t *testing.T) {
	o := defaults()
	o.compress = 7200 // the day in 12 s
	o.config = "Caddyfile"
	o.out = t.TempDir()
	var out bytes.Buffer
	rep, err := replay(context.Background(), o, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	r := rep.r
	self, cloud, spilled, overflowed, failed, codes := r.counts()
	if failed > 0 || r.notSent > 0 || self == 0 || cloud == 0 || spilled != cloud || overflowed != 0 {
		t.Errorf("self-hosted %d, cloud %d (spilled %d, by the controller %d), failed %d %v, not sent %d",
			self, cloud, spilled, overflowed, failed, codes, r.notSent)
	}
	// the spill, point by point: through most of the peak, hardly ever
	// in the trough (a stalled moment of this machine may spill one)
	var peakOn, peak, troughOn, trough int
	for i, on := range rep.s.spill {
		switch at := (float64(i) + 0.5) * rep.s.step; {
		case at > 0.62*86400 && at < 0.88*86400:
			peak++
			if on {
				peakOn++
			}
		case at < 0.58*86400 || at > 0.92*86400:
			trough++
			if on {
				troughOn++
			}
		}
	}
	if peakOn < peak/2 || troughOn > trough/20 {
		t.Errorf("spill on %d of %d points in the peak, %d of %d in the trough", peakOn, peak, troughOn, trough)
	}
	led, id := r.ledger, rep.ideal
	if led.WindowSeconds < r.duration {
		t.Errorf("the ledger saw %v s of a %v s replay", led.WindowSeconds, r.duration)
	}
	if d := led.DemandGPUSecs / id.DemandGPUSecs; d < 0.9 || d > 1.1 {
		t.Errorf("the ledger counted %v GPU-seconds of demand, the trace makes %v", led.DemandGPUSecs, id.DemandGPUSecs)
	}
	// what the hybrid buys: utilization, and less than all-cloud spends;
	// near the ideal (a config that flaps its overflow is 13 points and
	// 30% away), with room for a machine that stalls under the race
	// detector
	hu, iu := *led.Hybrid.Utilization, *id.Hybrid.Utilization
	if hu <= *led.AllSelfHosted.Utilization || led.Hybrid.CloudUSD >= led.AllCloud.CloudUSD || hu < iu-0.06 || hu > iu+0.02 {
		t.Errorf("hybrid %.1f%% (ideal %.1f%%) and $%v, all-self-hosted %.1f%%, all-cloud $%v", hu*100, iu*100, led.Hybrid.CloudUSD,
			*led.AllSelfHosted.Utilization*100, led.AllCloud.CloudUSD)
	}
	if d := led.Hybrid.CloudUSD / id.Hybrid.CloudUSD; d < 0.9 || d > 1.25 {
		t.Errorf("the hybrid's cloud spend %v, ideally %v", led.Hybrid.CloudUSD, id.Hybrid.CloudUSD)
	}
	// the peak is an instant: a stall of the machine may hold a few more
	if g := led.AllSelfHosted.GPUs; g != 3 && g != 4 {
		t.Errorf("all-self-hosted on %v GPUs, want 3 (or 4 after a stall)", g)
	}
	for _, want := range []string{"hybrid: utilization", "over the trace's own", "spill to the cloud (self-hosted slots full)", "overflow controller"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}

	svg, err := os.ReadFile(filepath.Join(o.out, "chart.svg"))
	if err != nil {
		t.Fatal(err)
	}
	polygons := 0
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not XML: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "polygon" {
			polygons++
		}
	}
	if polygons != 2 || !bytes.Contains(svg, []byte("demand (the trace)")) {
		t.Errorf("the chart has %d areas (want self-hosted and cloud) and no legend?\n%.400s", polygons, svg)
	}
}

// The replay sends traffic to loopback only, and refuses a trace or
// flags it cannot play before it sends anything.
func TestReplayRefuses(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("second,requests_per_second,prompt_tokens,completion_tokens\n0,5,10,10\n10,-3,10,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a Caddyfile that would send the load off this machine
	elsewhere := filepath.Join(t.TempDir(), "Caddyfile")
	cfg, err := os.ReadFile("Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("{$CLOUD_UPSTREAM:http://127.0.0.1:8092}"), []byte("https://10.9.8.7"), 1)
	if err := os.WriteFile(elsewhere, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  func(*options)
		want string
	}{
		{func(o *options) { o.gateway, o.admin = "http://10.1.2.3:8080", "http://127.0.0.1:2019" }, "only to loopback"},
		{func(o *options) { o.gateway, o.admin = "http://127.0.0.1:8080", "http://example.com:2019" }, "only to loopback"},
		{func(o *options) { o.gateway = "http://127.0.0.1:8080" }, "-gateway and -admin go together"},
		{func(o *options) { o.tracePath = bad }, "bad.csv: line 3: requests_per_second -3"},
		{func(o *options) { o.profile = "weekly" }, `unknown profile "weekly"`},
		{func(o *options) { o.compress = 0.5 }, "-compress 0.5"},
		{func(o *options) { o.compress = 1 }, "compress it more"},
		{func(o *options) { o.model.SlotsPerGPU = 2.5 }, "-slots 2.5"},
		{func(o *options) { o.model.SlotsPerGPU = 4000 }, "requests in flight at its peak"},
		{func(o *options) { o.gpus = 0.3 }, "a whole number of slots"},
		{func(o *options) { o.completion = 100_000 }, "the gateway's attempts give up at 10 minutes"},
		{func(o *options) { o.config = elsewhere }, "an upstream dials 10.9.8.7:443"},
	} {
		o := defaults()
		o.out = t.TempDir()
		tc.set(&o)
		_, err := replay(context.Background(), o, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
}

// Every row sends its rate times its real length, a dense row after a
// sparse one included, and rows of no traffic end (a rate-0 row whose
// end, turned to real time and back, came out just short of it once
// looped for good).
func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		csv      string
		compress float64
		want     int
	}{
		{"0,0.1,1,1\n10,100,1,1\n20,0,1,1\n", 1, 1001},
		{"0,0,1,1\n13,5,1,1\n20,0,1,1\n3900,40,1,1\n7380,0,1,1\n", 7200, 19},
		{"0,0,1,1\n13,5,1,1\n20,0,1,1\n", 360, 0},
		{"0,3,1,1\n1,3,1,1\n2,3,1,1\n3,3,1,1\n", 2, 6},
	} {
		tr, err := trace.Parse(strings.NewReader("second,requests_per_second,prompt_tokens,completion_tokens\n" + tc.csv))
		if err != nil {
			t.Fatal(err)
		}
		n, last := 0, -1.0
		schedule(tr, tc.compress, func(at float64, _ trace.Row) bool {
			if at < last || n > 1_000_000 {
				t.Fatalf("%q: arrival %d at %v after %v", tc.csv, n, at, last)
			}
			n, last = n+1, at
			return true
		})
		if n != tc.want {
			t.Errorf("%q at %g×: %d arrivals, want %d", tc.csv, tc.compress, n, tc.want)
		}
	}
}
