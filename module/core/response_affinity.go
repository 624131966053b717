// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"github.com/tidwall/gjson"
)

// A Responses API answer is stored where it was made (store, the API's
// default): OpenAI's in its own API, a vLLM in its process. A follow-up
// that names it (previous_response_id) is served only there. The gateway
// notes which target (and vLLM endpoint) answered each response id, sends
// a follow-up to that target alone, pinned to that endpoint, and, when
// that upstream is gone (out of the config, or down) or unknown, tries the alias's targets in order,
// passing over those that do not hold the response; when none does, the
// client is told so.

// storedResponse is what the gateway reads of a Responses API answer: its
// id, from the start of its body.
type storedResponse struct {
	id       string
	head     []byte // the answer's start, until its id is read
	endpoint string // the vLLM endpoint that answered, if any
}

// maxResponseHead caps what is held of an answer's start for its id.
const maxResponseHead = 4 << 10

// holderPlan is plan for follow-up q whose previous response book places:
// its holder's target alone (in order, the plan's backing array), if it
// is still one of the plan's and, for a vLLM group, its endpoint still one
// of the group's and up; the plan as it is otherwise.
func holderPlan(book *routing.ResponseBook, q *routing.Asked, plan []*routing.Target, order *[6]*routing.Target) []*routing.Target {
	if q.PreviousID() == "" || book == nil {
		return plan
	}
	p := &q.Responses.Previous
	h, ok := book.Holder(p.ID)
	if !ok {
		return plan
	}
	for _, t := range plan {
		if t.Group == h.Group && t.Model == h.Model && holds(t.Upstream, h.Endpoint) {
			p.Holder = &h
			order[0] = t
			return order[:1]
		}
	}
	return plan
}

// holds reports whether group grp still has the endpoint a response is
// held at, and its probes do not find it down (any endpoint for a group
// whose endpoints the gateway does not list: dynamic upstreams): a vLLM
// that went down lost its store.
func holds(grp *upstream.Group, endpoint string) bool {
	if endpoint == "" || grp.VLLM == nil || (len(grp.VLLM.Endpoints) == 0 && grp.VLLM.Added.Load() == nil) {
		return true
	}
	if ep, ok := grp.VLLM.Endpoints[endpoint]; ok {
		return ep.Prober == nil || ep.Prober.Snapshot().Health != probe.HealthDown
	}
	if added := grp.VLLM.Added.Load(); added != nil {
		for _, u := range added.Upstreams {
			if u.Dial == endpoint {
				return true
			}
		}
	}
	return false
}

// pinFor is the endpoint an attempt of q on t must go to: the one holding
// the previous response, when t is its holder's target.
func pinFor(q *routing.Asked, t *routing.Target) string {
	if r := q.Responses; r != nil && r.Previous.Holder != nil && t.Group == r.Previous.Holder.Group {
		return r.Previous.Holder.Endpoint
	}
	return ""
}

// readResponseID reads the answer's response id from the start of its
// body as it passes: a JSON answer's top-level id, a stream's first
// event's response.id; and notes where it is held at once, for a
// follow-up the client may send before this answer's end has left (see
// noteResponse).
func readResponseID(aw *attemptWriter, p []byte) {
	s := aw.rt.x.stored
	s.head = append(s.head, p[:min(len(p), maxResponseHead-len(s.head))]...)
	head := s.head
	if aw.out.sse {
		i := bytes.Index(head, []byte("data:"))
		if i < 0 {
			aw.out.sniff = len(head) < maxResponseHead
			return
		}
		head = head[i+5:]
		if j := bytes.IndexByte(head, '\n'); j >= 0 {
			head = head[:j]
		}
		if id := gjson.GetBytes(head, "response.id"); id.Type == gjson.String {
			s.id = strings.Clone(id.Str)
		}
	} else if id := gjson.GetBytes(head, "id"); id.Type == gjson.String {
		s.id = strings.Clone(id.Str)
	}
	if s.id != "" || len(s.head) >= maxResponseHead {
		aw.out.sniff, s.head = false, nil
	}
	rt := aw.rt
	if s.id != "" && !rt.q.Responses.NoStore && rt.f.Responses != nil {
		t := aw.target
		rt.f.Responses.Put(s.id, routing.ResponseHolder{Group: t.Group, Model: t.Model, Endpoint: s.endpoint})
	}
}

// noteResponse has book forget exchange x's response again when its
// answer did not end whole: no follow-up can name a response its upstream
// did not finish.
func noteResponse(book *routing.ResponseBook, x *exchange) {
	s := x.stored
	if s == nil || s.id == "" || book == nil || (x.ans.interruption == "" && x.ans.outcome == routing.OutcomeOK) {
		return
	}
	book.Forget(s.id)
}

// previousMissing reports whether a held 4xx says the target does not
// hold follow-up q's previous response: vLLM's 404 "Response with id
// '…' not found.", OpenAI's previous_response_not_found.
func previousMissing(q *routing.Asked, status int, body []byte) bool {
	id := q.PreviousID()
	if id == "" || (status != http.StatusNotFound && status != http.StatusBadRequest) || !bytes.Contains(body, []byte(id)) {
		return false
	}
	return status == http.StatusNotFound || gjson.GetBytes(body, "error.code").Str == "previous_response_not_found" ||
		gjson.GetBytes(body, "error.param").Str == "previous_response_id"
}
