// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/credentials"
	"github.com/hybridllm/caddy-hybrid-llm/module/lograte"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"go.uber.org/zap"
)

// A key sent where the gateway does not read one (in the query string, or
// in a header other than Authorization, Api-Key or X-Api-Key whose name is
// an API key's: see credentials.APIKeyLike) would be written verbatim to Caddy's
// access log, which redacts only the Authorization and cookie headers,
// from a copy of the request taken before any handler runs. Such a
// request is refused, and its access log record is skipped; a warning
// without the key's value takes its place. A key in the query string is
// refused whatever the gateway's clients; a header only when the gateway
// reads keys itself (clients by key): with no clients, or clients named
// by an authentication in front, another handler may read that header,
// and the hybrid_llm_keys log filter keeps it out of the log. The other
// credentials (an identity proxy's Cf-Access-Jwt-Assertion or
// X-Forwarded-Access-Token, a Helicone-Auth) are not the gateway's key:
// they are served, and the filter redacts them too. Either way no
// credential goes upstream (see credentials.Drop).

// StrayKeys refuses the requests that carry a key where the gateway
// does not read one, and warns of them at most once a minute.
type StrayKeys struct {
	gateway string
	byKey   bool // the gateway reads keys itself: clients by key
	warned  lograte.Every
	clock   clock.Clock
	logger  *zap.Logger
}

// NewStrayKeys is the stray keys of a gateway named gateway with clients
// cfg (nil: none), its warnings on clk's time.
func NewStrayKeys(gateway string, cfg *Config, clk clock.Clock, logger *zap.Logger) *StrayKeys {
	return &StrayKeys{gateway: gateway, byKey: cfg != nil && cfg.Identity == "", clock: clk, logger: logger}
}

// Find returns where a request carries a key the gateway does not read
// (credentials.Stray): its headers count only when the gateway reads
// keys itself, with clients by key; "" when it carries none.
func (sk *StrayKeys) Find(r *http.Request) string {
	if sk.byKey {
		return credentials.Stray(r)
	}
	return credentials.StrayInQuery(r.URL)
}

// Refuse answers a request that carries a key where the gateway does
// not read one (see Find): 401, with where to send it instead.
// Its access log record is skipped, since Caddy would write the key in
// it; the gateway logs a warning without the key instead, at most one a
// minute, and counts it in clients_refused_total.
func (sk *StrayKeys) Refuse(w http.ResponseWriter, r *http.Request, id, clientID, where string) error {
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	refused.WithLabelValues(sk.gateway).Inc()
	if sk.warned.Allow(sk.clock.Now()) {
		fields := []zap.Field{zap.String("request_id", id), zap.String("where", where),
			zap.String("remote_addr", r.RemoteAddr), zap.String("method", r.Method),
			zap.String("path", credentials.RedactedPath(r.URL.Path)), zap.String("query", credentials.RedactedQuery(r.URL.RawQuery))}
		if clientID != "" {
			fields = append(fields, zap.String("llm_client_request_id", clientID))
		}
		sk.logger.Warn("refused a request with an API key where none is read; its access log record is skipped, "+
			"since it would hold the key; at most one such warning a minute, clients_refused_total counts them all", fields...)
	}
	hint := "send the API key as `Authorization: Bearer <key>`, or in the api-key or x-api-key header"
	msg := "API keys are not accepted in the query string: " + hint
	if where != credentials.InQuery {
		msg = "the " + where + " header is not read: " + hint
	}
	w.Header().Set("Www-Authenticate", `Bearer realm="hybrid_llm"`)
	return protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
		Status: http.StatusUnauthorized, Type: protocol.TypeInvalidRequest, Code: "invalid_api_key",
		Message: msg,
	})
}
