// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

func TestParse(t *testing.T) {
	tr, err := Parse(strings.NewReader("# a comment\ncompletion_tokens, second,prompt_tokens,requests_per_second,note\n25,0,200,11.5,night\n40,3600,100,0,\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{Second: 0, Rate: 11.5, Prompt: 200, Completion: 25}, {Second: 3600, Rate: 0, Prompt: 100, Completion: 40}}
	if fmt.Sprint(tr.Rows) != fmt.Sprint(want) || tr.End != 3601 || tr.Duration() != 3601 {
		t.Errorf("rows %+v end %v, want %+v ending at 3601", tr.Rows, tr.End, want)
	}
	if r := tr.At(1800); r.Rate != 11.5 {
		t.Errorf("at 1800 s: %+v", r)
	}
}

// A bad trace is refused with the line that is wrong, before anything is
// sent.
func TestParseRefuses(t *testing.T) {
	const header = "second,requests_per_second,prompt_tokens,completion_tokens\n"
	for _, tc := range []struct{ csv, want string }{
		{"", "line 1: empty trace"},
		{"second,requests_per_second,prompt_tokens\n0,1,2\n", "line 1: missing column completion_tokens"},
		{header, "line 1: a header and no rows"},
		{header + "0,1,10,10\n60,x,10,10\n", "line 3: requests_per_second \"x\" is not a number"},
		{header + "0,-1,10,10\n", "line 2: requests_per_second -1 is outside"},
		{header + "0,1e9,10,10\n", "line 2: requests_per_second 1e+09 is outside"},
		{header + "0,NaN,10,10\n", "line 2: requests_per_second \"NaN\" is not a number"},
		{header + "-5,1,10,10\n", "line 2: second -5 is outside"},
		{header + "0,1,10,10\n60,1,10,10\n60,1,10,10\n", "line 4: second 60 is not after the row before"},
		{header + "0,1,10,0\n", "line 2: completion_tokens 0 is outside 1.."},
		{header + "0,1,2000000,10\n", "line 2: prompt_tokens 2e+06 is outside"},
		{header + "0,1,10.5,10\n", "line 2: token counts are whole numbers"},
		{header + "0,1,10\n", "line 2: 3 fields, no completion_tokens"},
	} {
		_, err := Parse(strings.NewReader(tc.csv))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.csv, err, tc.want)
		}
	}
}

// A GPU is its sequence slots: a request holds one for its service time,
// so a rate keeps rate × service requests in flight, that many slots.
func TestModelMapsRatesToGPUs(t *testing.T) {
	m := Model{SlotsPerGPU: 8, TTFT: 50 * time.Millisecond, ITL: 10 * time.Millisecond}
	if s := m.Service(25); s != 290*time.Millisecond {
		t.Errorf("service %v, want 50ms + 24 × 10ms", s)
	}
	rate := m.RateFor(2.5, 25) // 20 in flight, each 0.29 s
	if math.Abs(rate-20/0.29) > 1e-9 || math.Abs(m.Demand(Row{Rate: rate, Completion: 25})-2.5) > 1e-12 {
		t.Errorf("rate %v for 2.5 GPUs, back to %v GPUs", rate, m.Demand(Row{Rate: rate, Completion: 25}))
	}
}

// The seed's day, ideally served, gives the seed's table at any
// compression, with one spill a day: on at the evening peak, off after it.
func TestSeedDayIdeal(t *testing.T) {
	m := Model{SlotsPerGPU: 8, TTFT: 50 * time.Millisecond, ITL: 10 * time.Millisecond}
	tr := SeedDay(m, 200, 25)
	for _, compress := range []float64{1, 360, 4320} {
		id := tr.IdealFor(m, cost.Prices{SelfGPUs: 1, GPUCostPerMonth: 1000, CloudPerGPUSec: 0.000975}, compress, 0)
		month := cost.SecondsPerMonth / id.WindowSeconds
		got := fmt.Sprintf("%.1f%% %.1f%% %g GPUs $%.2f $%.2f", *id.Hybrid.Utilization*100, *id.AllSelfHosted.Utilization*100,
			id.AllSelfHosted.GPUs, id.AllCloud.TotalUSD*month, id.Hybrid.CloudUSD*month)
		if want := "58.0% 34.3% 3 GPUs $2603.02 $1137.24"; got != want {
			t.Errorf("compressed %g×: %s, want %s", compress, got, want)
		}
		if id.Transitions != 2 || id.SpillSeconds != 0.3*86400 {
			t.Errorf("compressed %g×: %d transitions, %v s of spill; want 2 and 7.2 h", compress, id.Transitions, id.SpillSeconds)
		}
	}
	// idle time the ledger saw beyond the trace dilutes the utilization
	id := tr.IdealFor(m, cost.Prices{SelfGPUs: 1}, 360, 24*time.Second)
	if u := *id.Hybrid.Utilization; math.Abs(u-0.58*240/264) > 1e-9 {
		t.Errorf("with 24 s idle after a 240 s replay: %v", u)
	}
}
