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
	// a Responses API follow-up's previous response, and whether the
	// request asks that its response not be stored (store false)
	Previous PreviousResponse
	NoStore  bool
	// what a translation into chat completions would lose, for a target
	// of vLLM's dialect or not, once read (see Losses)
	losses [2]*[]string
}

// PreviousResponse is the response a Responses API follow-up names
// (previous_response_id) and, when the gateway knows, where it is held.
type PreviousResponse struct {
	ID     string
	Holder *ResponseHolder
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
	if a.losses[i] == nil {
		lost := translate.Losses(a.Body, vllm)
		a.losses[i] = &lost
	}
	return *a.losses[i]
}
