// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode"

	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// tierBody sets b to the request body (q) as a tier with a max_tokens gets
// it: clamped to it (or given it, when the request says nothing), its
// model swapped and, if its group asks for stream usage and the request
// does (u), the usage asked for; watch are the fields rules read. ok is
// false when the request asks for no more than the tier's
// max_tokens: the common body serves.
func (u *usageAsk) tierBody(q *routing.Asked, watch []string, t *routing.Target, cls priority.Class, b *upstreamBody) (length int64, injected, ok bool) {
	// the legacy completions endpoint answers 16 tokens when asked for
	// none: a tier's ceiling is no reason to ask for more
	fields, fill := q.API.LengthFields, ""
	if len(fields) > 0 && !q.API.ShortByDefault {
		fill = fields[0]
	}
	out, changed, err := protocol.ClampTokens(q.Body, fields, t.Tier.MaxTokens, fill)
	if err != nil || !changed {
		return 0, false, false
	}
	top, _ := protocol.Scan(out, watch...)
	var splices [2]splice
	n := 0
	if sp, ok := modelSplice(t, &top, cls); ok {
		splices[n], n = sp, n+1
	}
	if t.Upstream.Run.StreamUsage && (u.splice.with != nil || u.body != nil) {
		if sp, rewritten, ok := withStreamUsage(out, &top); ok {
			injected = true
			if rewritten != nil {
				out = rewritten
				top, _ = protocol.Scan(out, watch...)
				n = 0
				if sp, ok := modelSplice(t, &top, cls); ok {
					splices[n], n = sp, n+1
				}
			} else {
				splices[n], n = sp, n+1
			}
		}
	}
	return b.set(out, splices[:n]...), injected, true
}

// markDegraded marks the answer of a tier to request x as degraded: in the headers
// (whatever route_headers says: the caller may need to know), in the
// metrics and, with mark_body, in the body.
func markDegraded(d *routing.DegradeRecord, x *exchange, gw string, aw *attemptWriter, h http.Header) {
	t := aw.target
	d.Degraded = true
	from, why := degradeOrigin(x)
	d.From, d.Reason = from, string(why)
	h["X-Hybrid-Degraded"] = []string{"true"}
	h["X-Hybrid-Degraded-From"] = []string{from}
	h["X-Hybrid-Degrade-Reason"] = []string{d.Reason}
	if d.ClampedTo > 0 {
		h["X-Hybrid-Max-Tokens"] = []string{strconv.Itoa(d.ClampedTo)}
	}
	routing.DegradedTotal.WithLabelValues(gw, x.alias.Name, from, t.Group, d.Reason).Inc()
	if x.alias.Chain.MarkBody && aw.out.scan != nil { // a plain JSON or event-stream body
		mark := map[string]any{"from": from, "reason": d.Reason}
		if q := t.Tier.Quality; q != nil {
			mark["quality"] = *q
		}
		if d.ClampedTo > 0 {
			mark["max_tokens"] = d.ClampedTo
		}
		if len(d.Meta) > 0 {
			mark["metadata"] = d.Meta
		}
		b, _ := json.Marshal(mark)
		aw.out.mark = append(append([]byte(`"degraded":`), b...), ',')
		h.Del("Content-Length") // the body grows
	}
}

// markBody writes p to the client with the degraded mark spliced in after
// the first '{': a JSON answer's object, or a stream's first chunk. It
// returns the bytes of p written.
func (aw *attemptWriter) markBody(p []byte) (int, error) {
	i := bytes.IndexByte(p, '{')
	if i < 0 {
		return aw.toClient(p)
	}
	mark := aw.out.mark
	aw.out.mark = nil
	if j := bytes.IndexFunc(p[i+1:], func(r rune) bool { return !unicode.IsSpace(r) }); j >= 0 && p[i+1+j] == '}' {
		mark = mark[:len(mark)-1] // an empty object: no comma
	}
	n, err := aw.toClient(p[:i+1])
	if err != nil {
		return n, err
	}
	if _, err := aw.toClient(mark); err != nil {
		return n, err
	}
	m, err := aw.toClient(p[i+1:])
	return n + m, err
}

// degradeOrigin returns the upper target a degraded answer was meant for
// and why it was left: the request's first attempt.
func degradeOrigin(x *exchange) (from string, why routing.Reason) {
	if len(x.attempts) == 0 || (x.rule != "" && x.attempts[0].Target.Tier != nil) {
		// nothing tried before the tiers: a pre-routing rule sent it there
		return x.alias.Targets[0].Group, "route"
	}
	for _, a := range x.attempts {
		if a.Target.Tier == nil {
			return a.Target.Group, a.Reason
		}
	}
	return x.attempts[0].Target.Group, x.attempts[0].Reason
}
