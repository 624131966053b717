// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package vllmmetrics

import (
	"bytes"
	"strings"
	"testing"
)

// A server's other families are not parsed: a malformed line among them
// (an exporter's bug, a truncated label) leaves the load readable, and so
// does a name only the UTF-8 form can write.
func TestParseReadsOnlyItsFamilies(t *testing.T) {
	const text = "# HELP vllm:num_requests_waiting Waiting.\n" +
		"# TYPE vllm:num_requests_waiting gauge\n" +
		`vllm:num_requests_waiting{engine="0",model_name="m"} 3` + "\n" +
		"# TYPE some_exporter_metric gauge\n" +
		`some_exporter_metric{label="unterminated} 1` + "\n" +
		`{"process.open.fds"} 12` + "\n" +
		"# TYPE vllm:num_requests_running gauge\n" +
		`  vllm:num_requests_running{engine="0",model_name="m"} 2` + "\n" +
		"# TYPE vllm:time_to_first_token_seconds histogram\n" +
		`vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 4` + "\n" +
		`vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 5` + "\n" +
		`vllm:time_to_first_token_seconds_sum{model_name="m"} 0.9` + "\n" +
		`vllm:time_to_first_token_seconds_count{model_name="m"} 5` + "\n" +
		"# TYPE vllm:time_to_first_token_seconds_created gauge\n" +
		`vllm:time_to_first_token_seconds_created{model_name="m"} 1.7e9` + "\n"
	loads, invalid, err := Parse(strings.NewReader(text))
	if err != nil || invalid != "" {
		t.Fatalf("Parse: %v (invalid %q)", err, invalid)
	}
	l := loads["m"]
	if l == nil || l.Waiting != 3 || l.Running != 2 || l.TTFT == nil || l.TTFT.Total() != 5 {
		t.Fatalf("load %+v, want waiting 3, running 2, 5 first tokens", l)
	}
}

func TestSelectFamilies(t *testing.T) {
	for _, tc := range []struct {
		line string
		kept bool
	}{
		{`vllm:num_requests_waiting{model_name="m"} 1`, true},
		{`vllm:num_requests_waiting 1`, true},
		{"\tvllm:kv_cache_usage_perc\t0.5", true},
		{`{"vllm:gpu_cache_usage_perc",model_name="m"} 0.5`, true},
		{`{"vllm:num_requests_running"} 0.5`, true},
		{`# TYPE "vllm:num_requests_running" gauge`, true},
		{`#  HELP vllm:time_to_first_token_seconds Time to first token.`, true},
		{`vllm:time_to_first_token_seconds_bucket{le="1"} 2`, true},
		{`vllm:num_requests_waiting_total 1`, false},
		{`vllm:time_to_first_token_seconds_created 1`, false},
		{`vllm:e2e_request_latency_seconds_bucket{le="1"} 2`, false},
		{`# a comment about vllm:num_requests_waiting`, false},
		{``, false},
	} {
		got := selectFamilies(nil, []byte(tc.line))
		if kept := len(got) > 0; kept != tc.kept || kept && !bytes.Equal(got, []byte(tc.line+"\n")) {
			t.Errorf("%q: selected %q, want kept %v", tc.line, got, tc.kept)
		}
	}
}

// BenchmarkParse reads a whole exposition of vLLM's families (the
// shipped simulator's, 105 lines), as a probe does at every scrape.
func BenchmarkParse(b *testing.B) {
	data := readFixture(b, "vllm-many-families.txt")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Parse(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
