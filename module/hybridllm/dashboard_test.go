// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// exportedMetrics maps every metric name the module exports to its labels.
func exportedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	registerMetrics(nil, zap.NewNop())
	exported := map[string][]string{}
	descs := make(chan *prometheus.Desc, 256)
	for _, c := range collectors {
		c.Describe(descs)
	}
	close(descs)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	vl := regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
	for d := range descs {
		s := d.String()
		m := fq.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("no name in %s", s)
		}
		var labels []string
		if l := vl.FindStringSubmatch(s); l != nil && l[1] != "" {
			labels = strings.Split(l[1], ",")
		}
		exported[m[1]] = labels
	}
	if len(exported) < 20 {
		t.Fatalf("only %d metrics exported", len(exported))
	}
	return exported
}

var (
	metricName   = regexp.MustCompile(`caddy_hybrid_llm_[a-z0-9_]+`)
	quoted       = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	clauseLabels = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	templateVar  = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// queryProblems checks a PromQL query (or a rule's text) against the
// exported metrics: every caddy_hybrid_llm name is exported (histograms
// with their _bucket, _count and _sum series), every label a selector
// matches belongs to its metric, and every label of a by, on, ignoring
// or without clause (and of a $labels template) to one of the query's
// metrics.
func queryProblems(q string, exported map[string][]string) []string {
	var problems []string
	q = quoted.ReplaceAllString(q, `""`)
	locs := metricName.FindAllStringIndex(q, -1)
	if len(locs) == 0 {
		return []string{"uses no caddy_hybrid_llm metric"}
	}
	all := map[string]bool{}
	for _, loc := range locs {
		n := q[loc[0]:loc[1]]
		base, labels := n, exported[n]
		if _, ok := exported[n]; !ok {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if s, ok := strings.CutSuffix(n, suffix); ok {
					if l, ok := exported[s]; ok {
						base, labels = s, l
						if suffix == "_bucket" {
							labels = append(slices.Clone(l), "le")
						}
					}
				}
			}
		}
		if _, ok := exported[base]; !ok {
			problems = append(problems, fmt.Sprintf("refers to %s, which is not exported", n))
			continue
		}
		for _, l := range labels {
			all[l] = true
		}
		rest := q[loc[1]:]
		if !strings.HasPrefix(rest, "{") {
			continue
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			problems = append(problems, fmt.Sprintf("%s: unclosed selector", n))
			continue
		}
		for _, m := range matcherLabel.FindAllStringSubmatch(rest[1:end], -1) {
			if !slices.Contains(labels, m[1]) {
				problems = append(problems, fmt.Sprintf("matches %s on label %q, which it does not have (%v)", n, m[1], labels))
			}
		}
	}
	var used []string
	for _, m := range clauseLabels.FindAllStringSubmatch(q, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				used = append(used, l)
			}
		}
	}
	for _, m := range templateVar.FindAllStringSubmatch(q, -1) {
		used = append(used, m[1])
	}
	for _, l := range used {
		if !all[l] {
			problems = append(problems, fmt.Sprintf("uses label %q, which none of its metrics has", l))
		}
	}
	return problems
}

// Every query of the example dashboard refers to metrics the module
// exports, and the dashboard covers what operators look at.
func TestDashboardQueriesUseExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../examples/grafana/hybrid-llm.json")
	if err != nil {
		t.Fatal(err)
	}
	if !gjson.ValidBytes(b) {
		t.Fatal("the dashboard is not JSON")
	}
	exported := exportedMetrics(t)
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
		for _, p := range queryProblems(e, exported) {
			t.Errorf("query %s: %s", p, e)
		}
	}
	all := strings.Join(exprs, "\n")
	for _, must := range []string{"utilization", "overflows_total", "fallbacks_total", "ttft_seconds", "cloud_cost_usd_total",
		"endpoint_requests_waiting", "model_listed", "breaker_opened_total"} {
		if !strings.Contains(all, must) {
			t.Errorf("the dashboard has no panel on %s", must)
		}
	}
}

// Every panel of the example dashboard says what it shows and which
// config it needs to show anything (or that it needs none), has an id of
// its own, and a place on the grid no other panel takes.
func TestDashboardPanelsDescribedAndLaidOut(t *testing.T) {
	b, err := os.ReadFile("../../examples/grafana/hybrid-llm.json")
	if err != nil {
		t.Fatal(err)
	}
	panels := gjson.GetBytes(b, "panels").Array()
	if len(panels) < 10 {
		t.Fatalf("only %d panels", len(panels))
	}
	ids := map[int64]string{}
	cells := map[[2]int64]string{}
	for _, p := range panels {
		title := p.Get("title").String()
		if title == "" {
			t.Errorf("panel %d has no title", p.Get("id").Int())
		}
		if d := p.Get("description").String(); !strings.Contains(d, "Needs") {
			t.Errorf("panel %q: its description (%q) does not say what it needs (\"Needs ...\")", title, d)
		}
		if len(p.Get("targets").Array()) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		id := p.Get("id").Int()
		if other, ok := ids[id]; ok || id == 0 {
			t.Errorf("panel %q: id %d taken by %q", title, id, other)
		}
		ids[id] = title
		g := p.Get("gridPos")
		x, y, w, h := g.Get("x").Int(), g.Get("y").Int(), g.Get("w").Int(), g.Get("h").Int()
		if w <= 0 || h <= 0 || x < 0 || y < 0 || x+w > 24 {
			t.Errorf("panel %q: gridPos %s off the grid", title, g.Raw)
			continue
		}
		for i := x; i < x+w; i++ {
			for j := y; j < y+h; j++ {
				if other, ok := cells[[2]int64{i, j}]; ok {
					t.Errorf("panel %q overlaps %q at (%d, %d)", title, other, i, j)
					i, j = x+w, y+h
					break
				}
				cells[[2]int64{i, j}] = title
			}
		}
	}
}

// The example alerting rules refer to metrics and labels the module
// exports, and every rule says what it means (a comment above it), has a
// for duration, a severity, a summary and a description. promtool checks
// their syntax and tests them (alerts_test.yml).
func TestDashboardAlertRulesUseExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../examples/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	lines := strings.Split(string(b), "\n")
	var starts []int
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "- alert:") {
			starts = append(starts, i)
		}
	}
	if len(starts) < 15 {
		t.Fatalf("only %d alerting rules", len(starts))
	}
	for k, s := range starts {
		name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[s]), "- alert:"))
		if s == 0 || !strings.HasPrefix(strings.TrimSpace(lines[s-1]), "#") {
			t.Errorf("%s: no comment above the rule", name)
		}
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		var rule []string
		for _, l := range lines[s:end] {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				rule = append(rule, l)
			}
		}
		text := strings.Join(rule, "\n")
		for _, must := range []string{"expr:", "for:", "severity:", "summary:", "description:"} {
			if !strings.Contains(text, must) {
				t.Errorf("%s: no %s", name, must)
			}
		}
		for _, p := range queryProblems(text, exported) {
			t.Errorf("%s %s", name, p)
		}
	}
}

// queryProblems catches what the tests above rely on it to catch.
func TestDashboardQueryProblemsCatchesInventions(t *testing.T) {
	exported := exportedMetrics(t)
	for q, want := range map[string]int{
		`sum by (group) (rate(caddy_hybrid_llm_requests_total{gateway=~"$gateway",group!=""}[5m]))`:                  0,
		`histogram_quantile(0.99, sum by (le, group) (rate(caddy_hybrid_llm_ttft_seconds_bucket{gateway="a"}[5m])))`: 0,
		`max by (gateway, group, endpoint) (caddy_hybrid_llm_breaker_open{endpoint=""}) > 0`:                         0,
		`caddy_hybrid_llm_breaker_open{endpoint="a", reason="x"}`:                                                    1,
		`rate(caddy_hybrid_llm_no_such_total[5m])`:                                                                   1,
		`sum by (endpoint) (caddy_hybrid_llm_overflow_active)`:                                                       1,
		`caddy_hybrid_llm_model_listed == 0 # {{ $labels.endpoint }}`:                                                1,
		`up`: 1,
	} {
		if got := queryProblems(q, exported); len(got) != want {
			t.Errorf("%s: %d problems %q, want %d", q, len(got), got, want)
		}
	}
}
