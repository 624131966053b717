// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// Every query of the example dashboard refers to metrics the module
// exports, and the dashboard covers what operators look at.
func TestDashboardQueriesUseExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../examples/grafana/hybrid-llm.json")
	if err != nil {
		t.Fatal(err)
	}
	if !gjson.ValidBytes(b) {
		t.Fatal("the dashboard is not JSON")
	}
	registerMetrics(nil, zap.NewNop())
	exported := map[string]bool{}
	descs := make(chan *prometheus.Desc, 256)
	for _, c := range collectors {
		c.Describe(descs)
	}
	close(descs)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			exported[m[1]] = true
		}
	}
	name := regexp.MustCompile(`caddy_hybrid_llm_[a-z0-9_]+`)
	var exprs []string
	gjson.GetBytes(b, "panels.#.targets.#.expr").ForEach(func(_, panel gjson.Result) bool {
		panel.ForEach(func(_, e gjson.Result) bool {
			exprs = append(exprs, e.String())
			return true
		})
		return true
	})
	gjson.GetBytes(b, "templating.list.#.definition").ForEach(func(_, d gjson.Result) bool {
		exprs = append(exprs, d.String())
		return true
	})
	if len(exprs) < 10 {
		t.Fatalf("only %d queries", len(exprs))
	}
	for _, e := range exprs {
		names := name.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("query uses no caddy_hybrid_llm metric: %s", e)
		}
		for _, n := range names {
			base := n
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if s, ok := strings.CutSuffix(n, suffix); ok && exported[s] {
					base = s
				}
			}
			if !exported[base] {
				t.Errorf("query refers to %s, which is not exported: %s", n, e)
			}
		}
	}
	all := strings.Join(exprs, "\n")
	for _, must := range []string{"utilization", "overflows_total", "fallbacks_total", "ttft_seconds", "cloud_cost_usd_total", "endpoint_requests_waiting"} {
		if !strings.Contains(all, must) {
			t.Errorf("the dashboard has no panel on %s", must)
		}
	}
}
