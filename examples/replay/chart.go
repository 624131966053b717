// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// chart draws the replay as SVG: the trace's demand, the self-hosted and
// cloud loads as run (stacked), the self-hosted GPUs, and under them the
// spill and the overflow controller's state, over trace time.
func (rep *report) chart() []byte {
	const (
		width, height          = 960.0, 440.0
		left, right, top, plot = 56.0, 24.0, 40.0, 300.0
		band                   = 14.0
	)
	s := rep.s
	n := len(s.demand)
	ymax := 0.0
	for i := range n {
		ymax = max(ymax, s.demand[i], s.self[i]+s.cloud[i])
	}
	ymax = math.Ceil(ymax*1.1*2) / 2
	if ymax == 0 {
		ymax = 1
	}
	x := func(i float64) float64 { return left + i/float64(n)*(width-left-right) }
	y := func(v float64) float64 { return top + plot - v/ymax*plot }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%g" y="22" font-size="15" font-weight="bold">%s: demand and where it was served</text>`+"\n", left, esc(rep.name))

	// the grid and the axes
	for v := 0.0; v <= ymax+1e-9; v += gridStep(ymax) {
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#e5e5e5"/>`, left, y(v), width-right, y(v))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end">%g</text>`+"\n", left-6, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<text x="14" y="%g" transform="rotate(-90 14 %g)" text-anchor="middle">GPUs</text>`+"\n", top+plot/2, top+plot/2)
	total := float64(n) * s.step
	for _, tk := range timeTicks(total) {
		px := x(tk / s.step)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#e5e5e5"/>`, px, top, px, top+plot)
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%s</text>`+"\n", px, top+plot+2*band+40, tickLabel(rep.tr.Rows[0].Second+tk))
	}

	// the loads, stacked: self-hosted, then the cloud on top
	area := func(lower, upper func(int) float64, fill string) {
		var p strings.Builder
		steps(&p, n, func(i int) float64 { return x(float64(i)) }, func(i int) float64 { return y(upper(i)) }, false)
		steps(&p, n, func(i int) float64 { return x(float64(i)) }, func(i int) float64 { return y(lower(i)) }, true)
		fmt.Fprintf(&b, `<polygon points="%s" fill="%s" stroke="none"/>`+"\n", strings.TrimSpace(p.String()), fill)
	}
	zero := func(int) float64 { return 0 }
	selfTop := func(i int) float64 { return s.self[i] }
	cloudTop := func(i int) float64 { return s.self[i] + s.cloud[i] }
	area(zero, selfTop, "#4c78a8")
	area(selfTop, cloudTop, "#f58518")

	// the self-hosted GPUs, and the trace's demand as a step line
	gpus := rep.ideal.Hybrid.GPUs
	fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#1f3b5c" stroke-dasharray="6 4"/>`, left, y(gpus), width-right, y(gpus))
	fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end" fill="#1f3b5c">self-hosted GPUs: %g</text>`+"\n", width-right-4, y(gpus)-5, gpus)
	var d strings.Builder
	steps(&d, n, func(i int) float64 { return x(float64(i)) }, func(i int) float64 { return y(s.demand[i]) }, false)
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="black" stroke-width="1.5"/>`+"\n", strings.TrimSpace(d.String()))

	// the states, as bands under the plot
	bands := []struct {
		label string
		on    []bool
		fill  string
	}{{"spill to the cloud", s.spill, "#f58518"}, {"overflow controller", s.controller, "#e45756"}}
	for k, bd := range bands {
		by := top + plot + 8 + float64(k)*(band+4)
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="#f3f3f3"/>`, left, by, width-left-right, band)
		for i := 0; i < n; {
			if !bd.on[i] {
				i++
				continue
			}
			j := i
			for j < n && bd.on[j] {
				j++
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%g" width="%.1f" height="%g" fill="%s"/>`, x(float64(i)), by, x(float64(j))-x(float64(i)), band, bd.fill)
			i = j
		}
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" fill="#444">%s</text>`+"\n", left+4, by+band-3, bd.label)
	}

	// the legend
	ly := height - 14
	legend := []struct{ label, color string }{
		{"demand (the trace)", "black"}, {"self-hosted load", "#4c78a8"}, {"cloud load", "#f58518"}, {"overflow controller on", "#e45756"},
	}
	lx := left
	for _, l := range legend {
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="12" height="12" fill="%s"/><text x="%g" y="%g">%s</text>`, lx, ly-10, l.color, lx+16, ly, l.label)
		lx += 30 + 7*float64(len(l.label))
	}
	b.WriteString("\n</svg>\n")
	return b.Bytes()
}

// steps writes the points of a step line over n intervals, interval i
// from xs(i) to xs(i+1) at ys(i), leaving out the points a level run
// does not need; backwards from the last interval to the first.
func steps(p *strings.Builder, n int, xs, ys func(int) float64, backwards bool) {
	pt := func(x, y float64) { fmt.Fprintf(p, "%.1f,%.1f ", x, y) }
	if !backwards {
		for i := range n {
			if i == 0 || !same(ys(i), ys(i-1)) {
				pt(xs(i), ys(i))
			}
			if i == n-1 || !same(ys(i), ys(i+1)) {
				pt(xs(i+1), ys(i))
			}
		}
		return
	}
	for i := n - 1; i >= 0; i-- {
		if i == n-1 || !same(ys(i), ys(i+1)) {
			pt(xs(i+1), ys(i))
		}
		if i == 0 || !same(ys(i), ys(i-1)) {
			pt(xs(i), ys(i))
		}
	}
}

// same reports whether two coordinates print alike.
func same(a, b float64) bool { return math.Round(a*10) == math.Round(b*10) }

// gridStep is a round step for the GPUs axis.
func gridStep(ymax float64) float64 {
	for _, s := range []float64{0.25, 0.5, 1, 2, 5, 10, 20, 50} {
		if ymax/s <= 8 {
			return s
		}
	}
	return 100
}

// timeTicks are round trace times across the trace.
func timeTicks(total float64) []float64 {
	step := 7 * 86400.0
	for _, s := range []float64{60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86400, 2 * 86400} {
		if total/s <= 12 {
			step = s
			break
		}
	}
	var ticks []float64
	for t := 0.0; t <= total+1e-9; t += step {
		ticks = append(ticks, t)
	}
	return ticks
}

// tickLabel is a time of day, 24:00 at a day's end (with the day after
// the first).
func tickLabel(s float64) string {
	switch d := int(s) / 86400; {
	case d == 1 && int(s)%86400 == 0:
		return "24:00"
	case d > 1 && int(s)%86400 == 0:
		return fmt.Sprintf("day %d 24:00", d)
	}
	return clock(s)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
