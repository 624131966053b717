// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/http"
	"strings"
)

// credentialWords are what the name of a credential holds, once lower-cased
// and stripped of every byte but letters and digits: X-Goog-Api-Key,
// Ocp-Apim-Subscription-Key, Helicone-Auth, ?client_secret=, ?jwt= and
// their kin. A pattern, not a list: a list misses the next vendor's.
// Not "session": a session id (X-Session-Id) is a routing and tracing
// key that clients send and upstreams read, not a secret.
var credentialWords = [...]string{"key", "token", "secret", "password", "passwd", "auth", "credential", "signature", "jwt"}

// plainHeaders are the headers real clients send whose names look like a
// credential's but are not one: never refused. X-Idempotency-Key is set
// by the gateway itself before a request goes upstream.
var plainHeaders = [...]string{"Idempotency-Key", "X-Idempotency-Key", "Sec-Websocket-Key"}

// insecureKeyProtocol prefixes the Sec-WebSocket-Protocol entry a
// browser's OpenAI Realtime client carries its key in.
const insecureKeyProtocol = "openai-insecure-api-key."

// apiKeyWords are what the name of an API key holds, in the same form:
// X-Goog-Api-Key, Ocp-Apim-Subscription-Key, X-Api-Token. A key sent in
// such a header, where the gateway reads keys, was meant for it (see
// strayKey); the other credentials (an identity proxy's
// Cf-Access-Jwt-Assertion, X-Forwarded-Access-Token) are another
// handler's, and pass.
var apiKeyWords = [...]string{"apikey", "apitoken", "subscriptionkey"}

// credentialLike reports whether a header's name is a credential's (see
// credentialWords).
func credentialLike(name string) bool { return nameHolds(name, false, credentialWords[:]) }

// apiKeyLike reports whether a header's name is an API key's (see
// apiKeyWords).
func apiKeyLike(name string) bool { return nameHolds(name, false, apiKeyWords[:]) }

// queryKey reports whether a query parameter's name, as sent (percent-
// and '+'-escaped), is a credential's. A suffix such as [], [0] or .0 is
// dropped with the rest of what is not a letter or a digit.
func queryKey(name string) bool { return nameHolds(name, true, credentialWords[:]) }

// nameHolds reports whether name, unescaped if escaped, lower-cased and
// stripped to letters and digits, holds one of words. It does not
// allocate for names up to 64 bytes.
func nameHolds(name string, escaped bool, words []string) bool {
	buf := make([]byte, 0, 64)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if escaped && c == '%' && i+2 < len(name) && isHexDigit(name[i+1]) && isHexDigit(name[i+2]) {
			c = unhex(name[i+1])<<4 | unhex(name[i+2])
			i += 2
		}
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		default:
			continue
		}
		buf = append(buf, c)
	}
	for _, w := range words {
		if containsWord(buf, w) {
			return true
		}
	}
	return false
}

// containsWord is bytes.Contains for a string, without a conversion.
func containsWord(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		if string(b[i:i+len(w)]) == w { // compared in place
			return true
		}
	}
	return false
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// keyHeader reports whether a canonical header name is one the gateway
// reads a key from.
func keyHeader(name string) bool {
	if name == "Authorization" {
		return true
	}
	for _, h := range keyHeaders {
		if name == h {
			return true
		}
	}
	return false
}

// plainHeader reports whether a canonical header name is on plainHeaders.
func plainHeader(name string) bool {
	for _, h := range plainHeaders {
		if name == h {
			return true
		}
	}
	return false
}

// insecureKey reports whether a Sec-WebSocket-Protocol value carries a key.
func insecureKey(values []string) bool {
	for _, v := range values {
		if strings.Contains(v, insecureKeyProtocol) {
			return true
		}
	}
	return false
}

// queryPairs calls fn with each name=value pair of a query string, split
// on '&' and ';' (servers differ on ';'), until fn returns false.
func queryPairs(q string, fn func(pair string) bool) {
	for q != "" {
		i := strings.IndexAny(q, "&;")
		if i < 0 {
			fn(q)
			return
		}
		if !fn(q[:i]) {
			return
		}
		q = q[i+1:]
	}
}

// strayQuery reports whether a query string names a credential.
func strayQuery(q string) bool {
	found := false
	queryPairs(q, func(pair string) bool {
		name, _, _ := strings.Cut(pair, "=")
		found = queryKey(name)
		return !found
	})
	return found
}

// escapedQuery returns what follows a '?' escaped as %3F in a path, as
// sent: a query to a server that unescapes the path before splitting it.
func escapedQuery(path string) (string, bool) {
	for i := 0; i+2 < len(path); i++ {
		if path[i] == '%' && path[i+1] == '3' && (path[i+2] == 'F' || path[i+2] == 'f') {
			return path[i+3:], true
		}
	}
	return "", false
}

// redactedKeys is a query string with the values of its credentials
// replaced.
func redactedKeys(q string) string { return redactQuery(q, queryKey) }

// redactedQuery is a query string with every value replaced.
func redactedQuery(q string) string { return redactQuery(q, func(string) bool { return true }) }

func redactQuery(q string, redact func(name string) bool) string {
	var b strings.Builder
	for q != "" {
		pair, sep := q, ""
		if i := strings.IndexAny(q, "&;"); i >= 0 {
			pair, sep, q = q[:i], q[i:i+1], q[i+1:]
		} else {
			q = ""
		}
		name, _, hasValue := strings.Cut(pair, "=")
		if hasValue && redact(name) {
			b.WriteString(name)
			b.WriteString("=REDACTED")
		} else {
			b.WriteString(pair)
		}
		b.WriteString(sep)
	}
	return b.String()
}

// redactedURI is a request URI, or a URL, with the values of the
// credentials of its query, and of a query after an escaped '?' in its
// path, replaced; ok is false when it has none.
func redactedURI(uri string) (string, bool) {
	path, query, hasQuery := strings.Cut(uri, "?")
	changed := false
	if q, ok := escapedQuery(path); ok && strayQuery(q) {
		path = path[:len(path)-len(q)] + redactedKeys(q)
		changed = true
	}
	if hasQuery && strayQuery(query) {
		query = redactedKeys(query)
		changed = true
	}
	if !changed {
		return uri, false
	}
	if hasQuery {
		return path + "?" + query, true
	}
	return path, true
}

// redactedProtocols is a Sec-WebSocket-Protocol value with the key of its
// openai-insecure-api-key entry replaced.
func redactedProtocols(v string) string {
	var b strings.Builder
	for i, p := range strings.Split(v, ",") {
		if i > 0 {
			b.WriteByte(',')
		}
		if t := strings.TrimSpace(p); strings.HasPrefix(t, insecureKeyProtocol) {
			p = p[:strings.Index(p, insecureKeyProtocol)] + insecureKeyProtocol + "REDACTED"
		}
		b.WriteString(p)
	}
	return b.String()
}

// dropCredentials removes from a request's headers, before it goes
// upstream, every credential of the client's: the headers credentialLike
// names but those on plainHeaders, the Sec-WebSocket-Protocol entries a
// key rides in, and a Referer or Origin whose query holds one. Each
// group speaks for itself, with its own key.
func dropCredentials(h http.Header) {
	for name, v := range h {
		switch {
		case credentialLike(name):
			if !plainHeader(name) {
				delete(h, name)
			}
		case name == "Sec-Websocket-Protocol":
			if insecureKey(v) {
				delete(h, name)
			}
		case name == "Referer" || name == "Origin":
			for _, u := range v {
				if _, ok := redactedURI(u); ok {
					delete(h, name)
					break
				}
			}
		}
	}
}
