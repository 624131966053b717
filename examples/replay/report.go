// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/examples/replay/trace"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

// series is the replay over time, one point per interval of the trace:
// what the chart draws and what the transitions are counted on.
type series struct {
	step       float64   // trace seconds per point
	demand     []float64 // the trace's demand, GPUs
	self       []float64 // self-hosted load as run, GPUs (from the answers' spans)
	cloud      []float64 // cloud load as run, GPU equivalents
	spill      []bool    // some request went to the cloud because the self-hosted slots were full
	controller []bool    // the overflow controller was on
}

// seriesOf bins the run into points of step real seconds.
func seriesOf(r *run, tr *trace.Trace, m trace.Model, compress float64, step float64) *series {
	n := max(int(math.Ceil(r.duration/step)), 1)
	s := &series{step: step * compress, demand: make([]float64, n), self: make([]float64, n), cloud: make([]float64, n),
		spill: make([]bool, n), controller: make([]bool, n)}
	first := tr.Rows[0].Second
	for i := range n {
		s.demand[i] = m.Demand(tr.At(first + (float64(i)+0.5)*step*compress))
	}
	for _, rec := range r.records {
		if rec.side == sideFailed {
			continue
		}
		load := s.self
		if rec.side == sideCloud {
			load = s.cloud
		}
		for i := max(int(rec.start/step), 0); i < n && float64(i)*step < rec.end; i++ {
			a, b := max(rec.start, float64(i)*step), min(rec.end, float64(i+1)*step)
			if b > a {
				load[i] += (b - a) / step / m.SlotsPerGPU
			}
		}
		if i := int(rec.start / step); rec.spill && i < n {
			s.spill[i] = true
		}
	}
	j, on := 0, false
	for i := range n {
		for j < len(r.samples) && r.samples[j].at < float64(i+1)*step {
			on = r.samples[j].active
			j++
		}
		s.controller[i] = on
	}
	return s
}

// episodes counts a state's on/off changes (an "on" at the end counts
// its end) and the trace seconds it was on.
func episodes(states []bool, step float64) (transitions int, onSeconds float64) {
	prev := false
	for _, on := range states {
		if on != prev {
			transitions++
		}
		if on {
			onSeconds += step
		}
		prev = on
	}
	if prev {
		transitions++
	}
	return transitions, onSeconds
}

// report is a replay's result: the ledger's figures next to the ideal
// ones, and how often the state changed.
type report struct {
	name     string
	tr       *trace.Trace
	m        trace.Model
	compress float64
	r        *run
	prices   cost.Prices
	ideal    trace.Ideal
	s        *series
}

func newReport(name string, tr *trace.Trace, m trace.Model, p cost.Prices, compress float64, r *run, step float64) *report {
	rep := &report{name: name, tr: tr, m: m, compress: compress, r: r, prices: p, s: seriesOf(r, tr, m, compress, step)}
	// the ledger saw the gateway's start and the last answers too: the
	// ideal counts that time as idle, so that both cover the same window
	idle := seconds(r.ledger.WindowSeconds - r.duration)
	rep.ideal = tr.IdealFor(m, p, compress, idle)
	return rep
}

// counts are the requests by how they ended.
func (r *run) counts() (self, cloud, spilled, overflowed, failed int, codes map[int]int) {
	codes = map[int]int{}
	for _, rec := range r.records {
		switch rec.side {
		case sideSelf:
			self++
		case sideCloud:
			cloud++
		default:
			failed++
			codes[rec.status]++
		}
		if rec.spill {
			spilled++
		}
		if rec.overflowed {
			overflowed++
		}
	}
	return
}

// print writes the report as text.
func (rep *report) print(w io.Writer) {
	r, id, led := rep.r, rep.ideal.Comparison, rep.r.ledger
	self, cloud, spilled, overflowed, failed, codes := r.counts()
	fmt.Fprintf(w, "\n%s: %s of trace in %s (compressed %g×); %g sequence slots per GPU, a request of %d tokens holds one for %s\n",
		rep.name, hours(rep.tr.Duration()), seconds(r.duration).Round(time.Second), rep.compress, rep.m.SlotsPerGPU,
		rep.tr.Rows[0].Completion, rep.m.Service(rep.tr.Rows[0].Completion))
	fmt.Fprintf(w, "sent %d: self-hosted %d, cloud %d (%d spilled: the self-hosted slots full; %d by the overflow controller), failed %d",
		len(r.records), self, cloud, spilled, overflowed, failed)
	if failed > 0 {
		fmt.Fprintf(w, " %v", codes)
	}
	if r.notSent > 0 {
		fmt.Fprintf(w, "; %d not sent (too many in flight: the machine did not keep up)", r.notSent)
	}
	fmt.Fprintf(w, "\nthe ledger's window: %.1f s (the trace's %.1f s, the gateway's start and the last answers)\n\n", led.WindowSeconds, r.duration)

	month := func(c cost.Comparison) float64 {
		if c.WindowSeconds <= 0 {
			return 0
		}
		return cost.SecondsPerMonth / c.WindowSeconds
	}
	ml, mi := month(led), month(id)
	type figure struct {
		name         string
		ledger, want float64
		unit         string // "%", "$", "" (a number), "gpus"
	}
	avg := func(c cost.Comparison) float64 {
		if c.WindowSeconds <= 0 {
			return 0
		}
		return c.DemandGPUSecs / c.WindowSeconds
	}
	figs := []figure{
		{"average demand (GPUs)", avg(led), avg(id), ""},
		{"peak demand (GPUs)", led.PeakDemandGPUs, id.PeakDemandGPUs, ""},
		{"all-cloud: cost per month", led.AllCloud.TotalUSD * ml, id.AllCloud.TotalUSD * mi, "$"},
		{"all-self-hosted: GPUs", led.AllSelfHosted.GPUs, id.AllSelfHosted.GPUs, "gpus"},
		{"all-self-hosted: utilization", ptr(led.AllSelfHosted.Utilization), ptr(id.AllSelfHosted.Utilization), "%"},
		{"all-self-hosted: cost per month", led.AllSelfHosted.TotalUSD * ml, id.AllSelfHosted.TotalUSD * mi, "$"},
		{"hybrid: GPUs", led.Hybrid.GPUs, id.Hybrid.GPUs, "gpus"},
		{"hybrid: utilization", ptr(led.Hybrid.Utilization), ptr(id.Hybrid.Utilization), "%"},
		{"hybrid: cloud spend per month", led.Hybrid.CloudUSD * ml, id.Hybrid.CloudUSD * mi, "$"},
		{"hybrid: cost per month", led.Hybrid.TotalUSD * ml, id.Hybrid.TotalUSD * mi, "$"},
		{"hybrid beats all-self-hosted above ($/GPU-month)", ptr(led.HybridBeatsSelfHostedAbove), ptr(id.HybridBeatsSelfHostedAbove), "$"},
		{"hybrid beats all-cloud below ($/GPU-month)", ptr(led.HybridBeatsCloudBelow), ptr(id.HybridBeatsCloudBelow), "$"},
	}
	fmt.Fprintf(w, "%-50s %14s %14s %12s\n", "figure (costs scaled to a 30-day month)", "ledger", "ideal", "difference")
	for _, f := range figs {
		var a, b, d string
		switch f.unit {
		case "%":
			a, b, d = fmt.Sprintf("%.1f%%", f.ledger*100), fmt.Sprintf("%.1f%%", f.want*100), fmt.Sprintf("%+.1f points", (f.ledger-f.want)*100)
		case "$":
			a, b, d = usd(f.ledger), usd(f.want), relative(f.ledger, f.want)
		case "gpus":
			a, b, d = fmt.Sprintf("%g", f.ledger), fmt.Sprintf("%g", f.want), fmt.Sprintf("%+g", f.ledger-f.want)
		default:
			a, b, d = fmt.Sprintf("%.3f", f.ledger), fmt.Sprintf("%.3f", f.want), relative(f.ledger, f.want)
		}
		fmt.Fprintf(w, "%-50s %14s %14s %12s\n", f.name, a, b, d)
	}

	if extra := led.WindowSeconds - r.duration; extra > 0.05 {
		own := rep.tr.IdealFor(rep.m, rep.prices, rep.compress, 0)
		m := cost.SecondsPerMonth / own.WindowSeconds
		fmt.Fprintf(w, "the ideal over the ledger's window counts its last %.1f s idle; over the trace's own %.1f s it is: hybrid %.1f%%, "+
			"all-self-hosted %.1f%%, all-cloud %s a month, the hybrid's cloud %s\n", extra, own.WindowSeconds, ptr(own.Hybrid.Utilization)*100,
			ptr(own.AllSelfHosted.Utilization)*100, usd(own.AllCloud.TotalUSD*m), usd(own.Hybrid.CloudUSD*m))
	}

	spillN, spillOn := episodes(rep.s.spill, rep.s.step)
	ctlN, ctlOn := episodes(rep.s.controller, rep.s.step)
	total := rep.tr.Duration()
	onOff := func(n int, on float64) string {
		return fmt.Sprintf("%d (on %s, off %s)", n, hours(on), hours(max(total-on, 0)))
	}
	fmt.Fprintf(w, "\n%-40s %28s %28s\n", "transitions (time in each state)", "as run", "the demand's")
	fmt.Fprintf(w, "%-40s %28s %28s\n", "spill to the cloud (self-hosted slots full)", onOff(spillN, spillOn), onOff(rep.ideal.Transitions, rep.ideal.SpillSeconds))
	fmt.Fprintf(w, "%-40s %28s\n", "overflow controller (vLLM's queue)", onOff(int(r.transitions), ctlOn))
	if int64(ctlN) != r.transitions {
		fmt.Fprintf(w, "  (the samples every %s saw %d of the controller's transitions)\n", seconds(rep.s.step/rep.compress), ctlN)
	}
}

func ptr(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

func usd(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return "$" + commas(fmt.Sprintf("%.2f", v))
}

// commas groups an amount's thousands.
func commas(s string) string {
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 && whole[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String() + "." + frac
}

func relative(got, want float64) string {
	if math.IsNaN(got) || math.IsNaN(want) {
		return "-"
	}
	if want == 0 {
		if got == 0 {
			return "0%"
		}
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", (got-want)/want*100)
}

func hours(s float64) string {
	if s < 3600 {
		return fmt.Sprintf("%.0f min", s/60)
	}
	return fmt.Sprintf("%.1f h", s/3600)
}
