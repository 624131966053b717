// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/translate"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// Asked is what a request asks: its endpoint's API, its body and the
// facts read from it.
type Asked struct {
	API      *protocol.API
	Stream   bool // the client asked for a stream
	Body     []byte
	Top      protocol.Request // the body's fields, and where its model is
	Features Features
	// what a Responses API request says of stored responses (nil for
	// another API's)
	Responses *ResponsesAsk
	// what a translation into chat completions would lose, once read
	// (see Losses)
	losses *lossCache
}

// ResponsesAsk is what a Responses API request says of stored responses:
// the response a follow-up names, and whether its own is not to be
// stored (store false).
type ResponsesAsk struct {
	Previous PreviousResponse
	NoStore  bool
}

// PreviousResponse is the response a Responses API follow-up names
// (previous_response_id) and, when the gateway knows, where it is held.
type PreviousResponse struct {
	ID     string
	Holder *ResponseHolder
}

// PreviousID is the response a Responses API follow-up names; "" for
// another request.
func (a *Asked) PreviousID() string {
	if a.Responses == nil {
		return ""
	}
	return a.Responses.Previous.ID
}

// lossCache is what a translation would lose, for a target of vLLM's
// dialect or not, once read.
type lossCache [2]struct {
	read bool
	lost []string
}

// Translated reports whether the request reaches a target of group grp
// translated: a Messages request to a group that serves chat completions
// instead, and translates (see upstream.Group.TranslatesMessages). ok is
// false when the group cannot take it at all.
func (a *Asked) Translated(grp *upstream.Group) (translated, ok bool) {
	if grp.Serves(a.API.Endpoint) {
		return false, true
	}
	if a.API != protocol.Messages {
		return false, false
	}
	on, lossy := grp.TranslatesMessages()
	if !on {
		return false, false
	}
	return true, lossy || len(a.Losses(grp.Kind == upstream.KindVLLM)) == 0
}

// Losses names what a translation of the request into chat completions
// would leave out (see translate.Losses), for a target that speaks vLLM's
// dialect or not; read once each.
func (a *Asked) Losses(vllm bool) []string {
	i := 0
	if vllm {
		i = 1
	}
	if a.losses == nil {
		a.losses = new(lossCache)
	}
	if c := &a.losses[i]; !c.read {
		c.read, c.lost = true, translate.Losses(a.Body, vllm)
	}
	return a.losses[i].lost
}
