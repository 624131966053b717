// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"go.uber.org/zap"
)

// authenticate returns the client a request comes from. A request without
// a known client is answered 401 here, and ok is false.
func (cr *callers) authenticate(w http.ResponseWriter, r *http.Request, id, clientID string) (cl *client, ok bool) {
	cs := cr.set.Load()
	if cr.cfg.Identity != "" {
		repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		name := ""
		if repl != nil {
			name = repl.ReplaceAll(cr.cfg.Identity, "")
		}
		if name == "" {
			return nil, cr.refuse(w, r, id, clientID, "the request has no client identity")
		}
		if cl = cs.byName[name]; cl == nil {
			cl = &client{name: name} // authenticated in front, without settings here
		}
		return cl, true
	}
	key, problem := clients.Presented(r.Header)
	if problem != "" {
		return nil, cr.refuse(w, r, id, clientID, problem)
	}
	// hashed in place: the key is never copied, and the lookup takes the
	// same time whichever key it is
	if cl = cs.byKey[clients.HashOf(key)]; cl == nil {
		return nil, cr.refuse(w, r, id, clientID, "incorrect API key provided")
	}
	return cl, true
}

// refuse answers a request that names no known client. The message never
// repeats the key.
func (cr *callers) refuse(w http.ResponseWriter, r *http.Request, id, clientID, why string) bool {
	if extra := logFields(r); extra != nil {
		extra.Set(zap.String("request_id", id))
		if clientID != "" {
			extra.Set(zap.String("llm_client_request_id", clientID))
		}
	}
	clientsRefused.WithLabelValues(cr.gateway).Inc()
	w.Header().Set("Www-Authenticate", `Bearer realm="hybrid_llm"`)
	_ = protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
		Status: http.StatusUnauthorized, Type: protocol.TypeInvalidRequest, Code: "invalid_api_key",
		Message: why,
	})
	return false
}

// limited answers a request over its client's rpm or tpm, the way the
// OpenAI API does: 429, rate_limit_exceeded, and when to come back.
func (cr *callers) limited(w http.ResponseWriter, api *protocol.API, cl *client, limit string, wait time.Duration) error {
	clientsLimited.WithLabelValues(cr.gateway, cl.name, limit).Inc()
	rpm, tpm := cl.limits()
	n, of := rpm, cl.rpm
	if limit == "tokens" {
		n, of = tpm, cl.tpm
	}
	share := ""
	if n != of {
		share = " (this gateway's share of the fleet's " + strconv.Itoa(of) + ")"
	}
	w.Header().Set("Retry-After", retryAfterSeconds(wait))
	return api.WriteError(w, protocol.Error{
		Status: http.StatusTooManyRequests, Type: limit, Code: "rate_limit_exceeded",
		Message: "rate limit reached for client " + cl.name + ": " + strconv.Itoa(n) + " " + limit + " per minute" + share +
			"; try again in " + retryAfterSeconds(wait) + "s",
	})
}
