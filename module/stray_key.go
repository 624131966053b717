// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// A key sent where the gateway does not read one (in the query string, or
// in a header spelt otherwise than Authorization, Api-Key or X-Api-Key)
// would be written verbatim to Caddy's access log, which redacts only the
// Authorization and cookie headers, from a copy of the request taken
// before any handler runs. Such a request is refused, and its access log
// record is skipped; a warning without the key's value takes its place.
// A key in the query string is refused whatever the gateway's clients; a
// header only when the gateway reads keys itself (clients by key): with
// no clients, or clients named by an authentication in front, another
// handler may read that header, and the hybrid_llm_keys log filter keeps
// it out of the log.

// keyLike reports whether a query parameter's or header's name is the
// name of a credential: case and '-' or '_' aside, api-key, x-api-key,
// key, access_token and their kin.
func keyLike(name string) bool {
	var buf [24]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '-' || c == '_':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if n == len(buf) {
			return false
		}
		buf[n], n = c, n+1
	}
	switch string(buf[:n]) {
	case "apikey", "xapikey", "key", "xkey", "apitoken", "xapitoken", "accesstoken", "xaccesstoken",
		"authtoken", "xauthtoken", "token", "xtoken", "auth", "xauth", "authorization", "xauthorization",
		"bearer", "openaiapikey", "xopenaiapikey", "secret", "xsecret", "apisecret", "xapisecret":
		return true
	}
	return false
}

// strayKey returns where a request carries a key the gateway does not
// read: "query" or, with headers, the header's name; "" when it carries
// none.
func strayKey(r *http.Request, headers bool) string {
	for name := range r.Header {
		if !headers {
			break
		}
		switch name {
		case "Authorization", "Api-Key", "X-Api-Key": // read (canonical keys)
			continue
		}
		if keyLike(name) {
			return name
		}
	}
	if strayQuery(r.URL.RawQuery) {
		return "query"
	}
	return ""
}

// strayQuery reports whether a query string names a key.
func strayQuery(q string) bool {
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if name, _, _ := strings.Cut(pair, "="); queryKey(name) {
			return true
		}
	}
	return false
}

// queryKey reports whether a query parameter's name, as sent, names a key.
func queryKey(name string) bool {
	if strings.ContainsAny(name, "%+") {
		name, _ = url.QueryUnescape(name)
	}
	return keyLike(name)
}

// redactedQuery is a query string with every value replaced.
func redactedQuery(q string) string { return redactQuery(q, func(string) bool { return true }) }

// redactedKeys is a query string with the values of the keys replaced.
func redactedKeys(q string) string { return redactQuery(q, queryKey) }

func redactQuery(q string, redact func(name string) bool) string {
	var b strings.Builder
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		name, _, hasValue := strings.Cut(pair, "=")
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		if !hasValue || !redact(name) {
			b.WriteString(pair)
			continue
		}
		b.WriteString(name)
		b.WriteString("=REDACTED")
	}
	return b.String()
}

// refuseStrayKey answers a request that carries a key where the gateway
// does not read one (see strayKey): 401, with where to send it instead.
// Its access log record is skipped, since Caddy would write the key in
// it; the gateway logs a warning without the key instead, at most one a
// minute, and counts it in clients_refused_total.
func (g *Gateway) refuseStrayKey(w http.ResponseWriter, r *http.Request, id, clientID, where string) error {
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	clientsRefused.WithLabelValues(g.Name).Inc()
	if g.strayKeys.allow(now()) {
		fields := []zap.Field{zap.String("request_id", id), zap.String("where", where),
			zap.String("remote_addr", r.RemoteAddr), zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.String("query", redactedQuery(r.URL.RawQuery))}
		if clientID != "" {
			fields = append(fields, zap.String("llm_client_request_id", clientID))
		}
		g.logger.Warn("refused a request with an API key where none is read; its access log record is skipped, "+
			"since it would hold the key; at most one such warning a minute, clients_refused_total counts them all", fields...)
	}
	hint := "send the API key as `Authorization: Bearer <key>`, or in the api-key or x-api-key header"
	msg := "API keys are not accepted in the query string: " + hint
	if where != "query" {
		msg = "the " + where + " header is not read: " + hint
	}
	w.Header().Set("Www-Authenticate", `Bearer realm="hybrid_llm"`)
	return writeError(w, http.StatusUnauthorized, errTypeInvalidRequest, "invalid_api_key", "", msg)
}
