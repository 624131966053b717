// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package vllmmetrics

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	type want struct {
		waiting, running, kv      float64
		ttftTotal                 float64
		prefixQueries, prefixHits float64
	}
	for _, tc := range []struct {
		file  string
		wants map[string]want
	}{
		{"vllm-0.12.txt", map[string]want{"qwen2.5-7b-instruct": {3, 7, 0.42, 100, 0, 0}}},
		// 0.9.2-0.10 expose both names: the new one wins
		{"vllm-0.9-both.txt", map[string]want{"llama": {0, 2, 0.25, 0, 0, 0}}},
		// 0.9.1 and older: only gpu_cache_usage_perc, no engine label
		{"vllm-old-gpu-cache.txt", map[string]want{"llama": {1, 5, 0.8, 0, 0, 0}}},
		// data parallel: counts summed over engines, KV usage averaged
		{"vllm-dp-engines.txt", map[string]want{"qwen": {3, 10, 0.4, 7, 10000, 7500}}},
		// two models on one server: kept apart
		{"vllm-two-models.txt", map[string]want{"small": {0, 1, 0.1, 0, 0, 0}, "big": {4, 9, 0.9, 0, 0, 0}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			loads, invalid, err := Parse(bytes.NewReader(readFixture(t, tc.file)))
			if err != nil || invalid != "" {
				t.Fatal(err, invalid)
			}
			if len(loads) != len(tc.wants) {
				t.Fatalf("models %v", loads)
			}
			for name, w := range tc.wants {
				l := loads[name]
				if l == nil {
					t.Fatalf("no load for %q", name)
				}
				if l.Waiting != w.waiting || l.Running != w.running || math.Abs(l.KVUsage-w.kv) > 1e-9 {
					t.Errorf("%s: waiting %v running %v kv %v, want %+v", name, l.Waiting, l.Running, l.KVUsage, w)
				}
				if got := l.TTFT.Total(); got != w.ttftTotal {
					t.Errorf("%s: ttft observations %v, want %v", name, got, w.ttftTotal)
				}
				if l.PrefixQueries != w.prefixQueries || l.PrefixHits != w.prefixHits {
					t.Errorf("%s: prefix cache %v of %v, want %v of %v", name, l.PrefixHits, l.PrefixQueries, w.prefixHits, w.prefixQueries)
				}
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, file := range []string{"garbage.txt", "no-vllm.txt"} {
		if _, _, err := Parse(bytes.NewReader(readFixture(t, file))); err == nil {
			t.Errorf("%s: no error", file)
		}
	}
	if _, _, err := Parse(strings.NewReader("")); err == nil {
		t.Error("empty exposition: no error")
	}
}

func TestHistogramQuantileOverDeltas(t *testing.T) {
	earlier := &Histogram{Bounds: []float64{0.1, 0.5, 1, math.Inf(1)}, Counts: []float64{10, 20, 20, 20}}
	later := &Histogram{Bounds: []float64{0.1, 0.5, 1, math.Inf(1)}, Counts: []float64{10, 70, 120, 120}}
	d, ok := later.Delta(earlier)
	if !ok {
		t.Fatal("delta failed")
	}
	// 100 new observations: 50 in (0.1,0.5], 50 in (0.5,1]
	if p50 := d.Quantile(0.5); math.Abs(p50-0.5) > 1e-9 {
		t.Errorf("p50 %v, want 0.5", p50)
	}
	if p99 := d.Quantile(0.99); math.Abs(p99-0.99) > 1e-9 {
		t.Errorf("p99 %v, want 0.99", p99)
	}
	if _, ok := earlier.Delta(later); ok {
		t.Error("a counter reset must not yield a delta")
	}
	empty, _ := later.Delta(later)
	if !math.IsNaN(empty.Quantile(0.5)) {
		t.Error("no observations must give NaN")
	}
	inf := &Histogram{Bounds: []float64{0.1, math.Inf(1)}, Counts: []float64{0, 5}}
	if q := inf.Quantile(0.5); q != 0.1 {
		t.Errorf("rank in +Inf bucket: %v, want the highest finite bound", q)
	}
}

// A series whose value is no measurement is left out as if absent, and
// named for the warning; the valid series beside it still count. When
// nothing valid is left of the queue metrics, the scrape has none.
func TestParseIgnoresInvalidValues(t *testing.T) {
	const exposition = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} -3
vllm:num_requests_running{model_name="b"} 2
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} NaN
vllm:num_requests_waiting{model_name="b"} 1e12
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="a"} +Inf
vllm:kv_cache_usage_perc{model_name="b"} 7
`
	loads, invalid, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if invalid != "vllm:num_requests_waiting = NaN" {
		t.Errorf("invalid %q", invalid)
	}
	if a := loads["a"]; a != nil {
		t.Errorf("a has only invalid values, yet a load: %+v", a)
	}
	b := loads["b"]
	if b == nil || b.Running != 2 || b.Waiting != 0 || !math.IsNaN(b.KVUsage) {
		t.Errorf("b: %+v", b)
	}
	// only invalid queue metrics: none at all
	_, invalid, err = Parse(strings.NewReader("vllm:num_requests_running -1\nvllm:num_requests_waiting 1e300\n"))
	if err == nil || invalid == "" {
		t.Errorf("all invalid: err %v, invalid %q", err, invalid)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		loads, _, err := Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, l := range loads {
			if !(l.Waiting >= 0) || !(l.Running >= 0) || math.IsInf(l.Waiting, 0) || math.IsInf(l.Running, 0) ||
				!math.IsNaN(l.KVUsage) && !(l.KVUsage >= 0 && l.KVUsage <= 1) {
				t.Fatalf("bad load %+v", l)
			}
			if l.TTFT != nil {
				_ = l.TTFT.Quantile(0.99)
			}
		}
	})
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
