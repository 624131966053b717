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
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/core"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"github.com/tidwall/gjson"
)

const drillTimeout = 30 * time.Second

// drill sends a minimal request (max_tokens 1) to each endpoint of each
// target of the alias in turn, bypassing the order and any drain, and
// reports what each answered: a wrong cloud model name or key, or a dead
// replica behind a live one, shows up on an ordinary day.
func drill(ctx context.Context, al *routing.Alias) []adminapi.DrillResult {
	out := make([]adminapi.DrillResult, 0, len(al.Targets))
	for _, t := range al.Targets {
		out = append(out, drillTarget(ctx, t))
	}
	return out
}

func drillTarget(ctx context.Context, t *routing.Target) adminapi.DrillResult {
	res := adminapi.DrillResult{Group: t.Group, Model: t.Model, Endpoints: []adminapi.DrillEndpoint{}}
	addrs := drillAddresses(t.Upstream, drillRequest(ctx, t))
	if len(addrs) == 0 {
		// nothing to name (dynamic upstreams that list none): the
		// group's own choice, as a request would get
		addrs = []string{""}
	}
	for _, addr := range addrs {
		res.Endpoints = append(res.Endpoints, adminapi.DrillEndpoint{Address: addr, DrillAnswer: drillEndpoint(ctx, t, addr)})
	}
	res.DrillAnswer = res.Endpoints[0].DrillAnswer
	for _, e := range res.Endpoints {
		res.LatencyMS = max(res.LatencyMS, e.LatencyMS)
	}
	for _, e := range res.Endpoints {
		if !e.OK {
			res.DrillAnswer = e.DrillAnswer
			if len(res.Endpoints) > 1 {
				res.Error = e.Address + ": " + e.Error
			}
			break
		}
	}
	return res
}

// drillAddresses lists the endpoints of a group: the proxy's upstreams
// (or what its dynamic upstreams list now), then those a registry added.
func drillAddresses(grp *Group, r *http.Request) []string {
	ups := grp.Run.Proxy.Upstreams
	if len(ups) == 0 && grp.Run.Proxy.DynamicUpstreams != nil && r != nil {
		ups, _ = grp.Run.Proxy.DynamicUpstreams.GetUpstreams(r)
	}
	if vg := grp.VLLM; vg != nil {
		if a := vg.Added.Load(); a != nil {
			ups = append(ups[:len(ups):len(ups)], a.Upstreams...)
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, u := range ups {
		if u != nil && !seen[u.Dial] {
			seen[u.Dial] = true
			out = append(out, u.Dial)
		}
	}
	return out
}

// drillRequest builds a drill's request to the target, as the gateway's
// own request through the group's proxy.
func drillRequest(ctx context.Context, t *routing.Target) *http.Request {
	body := []byte(`{"model":` + string(t.Run.ModelJSON) + `,"messages":[{"role":"user","content":"ping"}],"max_tokens":1}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil
	}
	req.RemoteAddr = "127.0.0.1:0"
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "drill-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	return caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, &caddyhttp.Server{})
}

// drillEndpoint sends the drill request to the target's endpoint addr
// ("" for whichever the group's policy picks).
func drillEndpoint(ctx context.Context, t *routing.Target, addr string) adminapi.DrillAnswer {
	var res adminapi.DrillAnswer
	ctx, cancel := context.WithTimeout(ctx, drillTimeout)
	defer cancel()
	req := drillRequest(ctx, t)
	if req == nil {
		res.Error = "could not build the request"
		return res
	}
	slot := &upstream.Slot{Group: t.Upstream.VLLM, Model: t.Model, Drill: true, Pin: addr, Class: priority.Interactive} // up to the red line
	w := upstream.NewBufferWriter(slot)
	defer slot.Release() // whatever the proxy panics with
	start := time.Now()
	aborted, err := core.Proxy(t.Upstream.Run.Proxy, w, req)
	res.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	switch {
	case w.Status() != 0 && !aborted:
		res.Reachable, res.Status = true, w.Status()
		res.OK = w.Status() == http.StatusOK
		b := w.Body()
		res.AnsweredModel = gjson.GetBytes(b, "model").String()
		if !res.OK {
			if msg := gjson.GetBytes(b, "error.message"); msg.Exists() {
				res.Error = msg.String()
			} else {
				res.Error = http.StatusText(w.Status())
			}
		}
	default:
		why := because.Classify(err)
		if why == because.NoEndpoint && slot.Skip != "" {
			why = slot.Skip
		}
		res.Error = string(why)
		if aborted {
			res.Error = "the answer broke off"
		}
	}
	return res
}
