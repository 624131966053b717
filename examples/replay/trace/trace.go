// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package trace is what a replay plays: a day of requests as rows of
// (second, requests per second, prompt tokens, completion tokens), read
// from CSV or built from a profile, and the figures an ideal hybrid would
// reach on it, computed from the trace alone.
//
// A trace is mapped to simulated GPUs honestly: a request occupies one of
// a GPU's sequence slots (vLLM's max_num_seqs per GPU) for its service
// time, the simulator's time to first token plus one inter-token latency
// per further token. A row of r requests per second whose requests take s
// seconds keeps r·s requests in flight: r·s/slots GPUs of demand. The
// replay keeps the rates and shortens each row by the compression factor,
// so a request lasts as long as it would at full speed and the demand in
// GPUs is the trace's.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

// Row is a stretch of the trace: from Second on, Rate requests per
// second, each with Prompt prompt tokens and Completion completion
// tokens, until the next row.
type Row struct {
	Second     float64
	Rate       float64
	Prompt     int
	Completion int
}

// Trace is a day (or any span) of traffic: its rows in time order and
// the second it ends at.
type Trace struct {
	Rows []Row
	End  float64
}

// Limits on what a trace may hold: beyond them a value is refused as
// absurd, not replayed.
const (
	MaxRate   = 10_000    // requests per second
	MaxTokens = 1_000_000 // prompt or completion tokens of one request
	MaxSecond = 31 * 86400
)

// Columns are the CSV header's names, in any order.
var Columns = [4]string{"second", "requests_per_second", "prompt_tokens", "completion_tokens"}

// Parse reads a CSV trace: a header naming the four columns (any order,
// more columns ignored), then one row per line. A row lasts until the
// next; the last one lasts one second. Errors name the line.
func Parse(r io.Reader) (*Trace, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("line 1: empty trace: want a header " + strings.Join(Columns[:], ","))
	}
	if err != nil {
		return nil, err
	}
	line, _ := cr.FieldPos(0)
	col := [4]int{-1, -1, -1, -1}
	for i, h := range header {
		for j, name := range Columns {
			if strings.EqualFold(strings.TrimSpace(h), name) {
				col[j] = i
			}
		}
	}
	for j, c := range col {
		if c < 0 {
			return nil, fmt.Errorf("line %d: missing column %s (the header must name %s)", line, Columns[j], strings.Join(Columns[:], ","))
		}
	}
	t := &Trace{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		row, err := parseRow(rec, col)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		if n := len(t.Rows); n > 0 && row.Second <= t.Rows[n-1].Second {
			return nil, fmt.Errorf("line %d: second %v is not after the row before (%v)", line, row.Second, t.Rows[n-1].Second)
		}
		t.Rows = append(t.Rows, row)
	}
	if len(t.Rows) == 0 {
		return nil, fmt.Errorf("line %d: a header and no rows", line)
	}
	t.End = t.Rows[len(t.Rows)-1].Second + 1
	return t, nil
}

func parseRow(rec []string, col [4]int) (Row, error) {
	var v [4]float64
	for j, c := range col {
		if c >= len(rec) {
			return Row{}, fmt.Errorf("%d fields, no %s", len(rec), Columns[j])
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(rec[c]), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return Row{}, fmt.Errorf("%s %q is not a number", Columns[j], rec[c])
		}
		v[j] = f
	}
	row := Row{Second: v[0], Rate: v[1], Prompt: int(v[2]), Completion: int(v[3])}
	switch {
	case row.Second < 0 || row.Second > MaxSecond:
		return row, fmt.Errorf("second %v is outside 0..%d", v[0], MaxSecond)
	case row.Rate < 0 || row.Rate > MaxRate:
		return row, fmt.Errorf("requests_per_second %v is outside 0..%d", v[1], MaxRate)
	case v[2] != math.Trunc(v[2]) || v[3] != math.Trunc(v[3]):
		return row, fmt.Errorf("token counts are whole numbers, got %v and %v", v[2], v[3])
	case row.Prompt < 0 || row.Prompt > MaxTokens:
		return row, fmt.Errorf("prompt_tokens %v is outside 0..%d", v[2], MaxTokens)
	case row.Completion < 1 || row.Completion > MaxTokens:
		return row, fmt.Errorf("completion_tokens %v is outside 1..%d", v[3], MaxTokens)
	}
	return row, nil
}

// Model is how the replay's simulated GPUs serve a request.
type Model struct {
	SlotsPerGPU float64       // vLLM's max_num_seqs per GPU
	TTFT, ITL   time.Duration // the simulator's latencies
}

// Service is how long one request with completion tokens holds its slot.
func (m Model) Service(completion int) time.Duration {
	return m.TTFT + time.Duration(max(completion-1, 0))*m.ITL
}

// Demand is a row's demand in GPUs.
func (m Model) Demand(r Row) float64 {
	return r.Rate * m.Service(r.Completion).Seconds() / m.SlotsPerGPU
}

// RateFor is the rate that makes gpus of demand with requests of
// completion tokens.
func (m Model) RateFor(gpus float64, completion int) float64 {
	return gpus * m.SlotsPerGPU / m.Service(completion).Seconds()
}

// SeedDay is the seed's day: 0.4 GPUs of demand 70% of the time and 2.5
// GPUs the other 30%, the evening peak (from 14:24 to 21:36), with
// requests of prompt and completion tokens.
func SeedDay(m Model, prompt, completion int) *Trace {
	const day = 86400
	return &Trace{
		Rows: []Row{
			{Second: 0, Rate: m.RateFor(0.4, completion), Prompt: prompt, Completion: completion},
			{Second: 0.6 * day, Rate: m.RateFor(2.5, completion), Prompt: prompt, Completion: completion},
			{Second: 0.9 * day, Rate: m.RateFor(0.4, completion), Prompt: prompt, Completion: completion},
		},
		End: day,
	}
}

// Duration is the trace's length, in trace seconds.
func (t *Trace) Duration() float64 { return t.End - t.Rows[0].Second }

// Until is when row i ends, in trace seconds.
func (t *Trace) Until(i int) float64 {
	if i+1 < len(t.Rows) {
		return t.Rows[i+1].Second
	}
	return t.End
}

// At returns the row in force at trace second s.
func (t *Trace) At(s float64) Row {
	i := 0
	for i+1 < len(t.Rows) && t.Rows[i+1].Second <= s {
		i++
	}
	return t.Rows[i]
}

// Ideal is what a perfect hybrid would make of the trace: the
// self-hosted GPUs carry min(demand, gpus) at every instant and the cloud
// the rest, with every transition exactly where the demand crosses the
// GPUs. Times are the trace's divided by compress, as the replay plays
// them, so the figures compare with the ledger's over the same window.
type Ideal struct {
	cost.Comparison
	// Transitions are the spill's on/off changes the demand requires:
	// each crossing of the self-hosted GPUs, up or down
	Transitions int
	// SpillSeconds is the time the demand is above the GPUs, in trace
	// seconds
	SpillSeconds float64
}

// IdealFor computes the ideal figures with the prices; idle is real time
// without demand added to the window (where the ledger looked longer than
// the trace lasted).
func (t *Trace) IdealFor(m Model, p cost.Prices, compress float64, idle time.Duration) Ideal {
	var id Ideal
	samples := make([]cost.Sample, 0, len(t.Rows))
	over := false
	for i, r := range t.Rows {
		d := m.Demand(r)
		secs := t.Until(i) - r.Second
		self := min(d, p.SelfGPUs)
		samples = append(samples, cost.Sample{
			Dur:  time.Duration(secs / compress * float64(time.Second)),
			Self: self, Cloud: d - self,
		})
		spill := d > p.SelfGPUs
		if spill != over {
			id.Transitions++
		}
		over = spill
		if spill {
			id.SpillSeconds += secs
		}
	}
	if over {
		id.Transitions++ // the trace ends: the spill ends with it
	}
	if idle > 0 {
		samples = append(samples, cost.Sample{Dur: idle})
	}
	id.Comparison = cost.Compare(samples, p, -1)
	return id
}
