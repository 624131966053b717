// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
)

// DrillResult is what one target answered a drill request.
type DrillResult struct {
	Group string `json:"group"`
	Model string `json:"model"`
	// whether the target answered (any HTTP status)
	Reachable bool    `json:"reachable"`
	Status    int     `json:"status"`
	OK        bool    `json:"ok"`
	LatencyMS float64 `json:"latency_ms"`
	// the model name in the upstream's answer
	AnsweredModel string `json:"answered_model,omitempty"`
	// the upstream's error message, or why it could not be reached
	Error string `json:"error,omitempty"`
}

const drillTimeout = 30 * time.Second

// drill sends a minimal request (max_tokens 1) through each target of the
// alias in turn, bypassing the order and any drain, and reports what each
// answered: a wrong cloud model name or key shows up on an ordinary day.
func (g *Gateway) drill(ctx context.Context, al *Alias) []DrillResult {
	out := make([]DrillResult, 0, len(al.Targets))
	for _, t := range al.Targets {
		out = append(out, g.drillTarget(ctx, t))
	}
	return out
}

func (g *Gateway) drillTarget(ctx context.Context, t *Target) DrillResult {
	res := DrillResult{Group: t.Group, Model: t.Model}
	body := []byte(`{"model":` + string(t.modelJSON) + `,"messages":[{"role":"user","content":"ping"}],"max_tokens":1}`)
	ctx, cancel := context.WithTimeout(ctx, drillTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		res.Error = err.Error()
		return res
	}
	req.RemoteAddr = "127.0.0.1:0"
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "drill-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, &caddyhttp.Server{})
	slot := &attemptSlot{group: t.group.vllm, model: t.Model, drill: true}
	w := &bufferWriter{header: make(http.Header), slot: slot}
	defer slot.release() // whatever the proxy panics with
	start := time.Now()
	aborted, err := proxy(t.group.proxy, w, req)
	res.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	switch {
	case w.status != 0 && !aborted:
		res.Reachable, res.Status = true, w.status
		res.OK = w.status == http.StatusOK
		b := w.buf.Bytes()
		res.AnsweredModel = gjson.GetBytes(b, "model").String()
		if !res.OK {
			if msg := gjson.GetBytes(b, "error.message"); msg.Exists() {
				res.Error = msg.String()
			} else {
				res.Error = http.StatusText(w.status)
			}
		}
	default:
		why := classify(err)
		if why == reasonNoEndpoint && slot.skip != "" {
			why = slot.skip
		}
		res.Error = string(why)
		if aborted {
			res.Error = "the answer broke off"
		}
	}
	return res
}
