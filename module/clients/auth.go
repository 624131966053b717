// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/ratelimit"
)

// Authenticate returns the client a request comes from. A request without
// a known client is answered 401 here, and ok is false.
func (cr *Callers) Authenticate(w http.ResponseWriter, r *http.Request) (cl *Caller, ok bool) {
	cs := cr.set.Load()
	if cr.cfg.Identity != "" {
		repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		name := ""
		if repl != nil {
			name = repl.ReplaceAll(cr.cfg.Identity, "")
		}
		if name == "" {
			return nil, cr.refuse(w, r, "the request has no client identity")
		}
		if cl = cs.byName[name]; cl == nil {
			cl = &Caller{Name: name} // authenticated in front, without settings here
		}
		return cl, true
	}
	key, problem := Presented(r.Header)
	if problem != "" {
		return nil, cr.refuse(w, r, problem)
	}
	// hashed in place: the key is never copied, and the lookup takes the
	// same time whichever key it is
	if cl = cs.byKey[HashOf(key)]; cl == nil {
		return nil, cr.refuse(w, r, "incorrect API key provided")
	}
	return cl, true
}

// refuse answers a request that names no known client. The message never
// repeats the key.
func (cr *Callers) refuse(w http.ResponseWriter, r *http.Request, why string) bool {
	refused.WithLabelValues(cr.s.Gateway).Inc()
	w.Header().Set("Www-Authenticate", `Bearer realm="hybrid_llm"`)
	_ = protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
		Status: http.StatusUnauthorized, Type: protocol.TypeInvalidRequest, Code: "invalid_api_key",
		Message: why,
	})
	return false
}

// Limited answers a request over its client's rpm or tpm ("requests" or
// "tokens"), the way the OpenAI API does: 429, rate_limit_exceeded, and
// when to come back.
func (cr *Callers) Limited(w http.ResponseWriter, api *protocol.API, cl *Caller, limit string, wait time.Duration) error {
	limited.WithLabelValues(cr.s.Gateway, cl.Name, limit).Inc()
	rpm, tpm := cl.Limits()
	n, of := rpm, cl.RPM
	if limit == "tokens" {
		n, of = tpm, cl.TPM
	}
	share := ""
	if n != of {
		share = " (this gateway's share of the fleet's " + strconv.Itoa(of) + ")"
	}
	w.Header().Set("Retry-After", ratelimit.RetryAfter(wait))
	return api.WriteError(w, protocol.Error{
		Status: http.StatusTooManyRequests, Type: limit, Code: "rate_limit_exceeded",
		Message: "rate limit reached for client " + cl.Name + ": " + strconv.Itoa(n) + " " + limit + " per minute" + share +
			"; try again in " + ratelimit.RetryAfter(wait) + "s",
	})
}
