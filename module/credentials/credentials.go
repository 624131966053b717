// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package credentials tells a client's credentials in a request: which
// header names are a credential's, or an API key's (by a pattern, not a
// list), where a request carries a key the gateway does not read (Stray),
// and how they are kept out of what goes upstream (Drop) and out of the
// log (RedactedURI, RedactedQuery, RedactedProtocols). Names are read
// without allocating. It is a leaf: it imports nothing of the product.
package credentials

import (
	"net/http"
	"net/url"
	"strings"
)

// KeyHeaders are the headers a client may send its key in, as the OpenAI
// and Azure OpenAI SDKs do, besides `Authorization: Bearer`.
var KeyHeaders = [...]string{"Api-Key", "X-Api-Key"}

// credentialWords are what the name of a credential holds, once lower-cased
// and stripped of every byte but letters and digits: X-Goog-Api-Key,
// Ocp-Apim-Subscription-Key, Helicone-Auth, ?client_secret=, ?jwt= and
// their kin. A pattern, not a list: a list misses the next vendor's.
// Not "session": a session id (X-Session-Id) is a routing and tracing
// key that clients send and upstreams read, not a secret.
var credentialWords = newWordSet("key", "token", "secret", "password", "passwd", "auth", "credential", "signature", "jwt")

// plainHeaders are the headers real clients send whose names look like a
// credential's but are not one: never refused. X-Idempotency-Key is set
// by the gateway itself before a request goes upstream.
var plainHeaders = [...]string{"Idempotency-Key", "X-Idempotency-Key", "Sec-Websocket-Key"}

// InsecureKeyProtocol prefixes the Sec-WebSocket-Protocol entry a
// browser's OpenAI Realtime client carries its key in.
const InsecureKeyProtocol = "openai-insecure-api-key."

// apiKeyWords are what the name of an API key holds, in the same form:
// X-Goog-Api-Key, Ocp-Apim-Subscription-Key, X-Api-Token. A key sent in
// such a header, where the gateway reads keys, was meant for it (see
// Stray); the other credentials (an identity proxy's
// Cf-Access-Jwt-Assertion, X-Forwarded-Access-Token) are another
// handler's, and pass.
var apiKeyWords = newWordSet("apikey", "apitoken", "subscriptionkey")

// CredentialLike reports whether a header's name is a credential's: it
// holds key, token, secret, password, passwd, auth, credential,
// signature or jwt once lower-cased and stripped to letters and digits
// (Api-Key, X-Goog-Api-Key, Helicone-Auth, Api_Key). It does not
// allocate for names up to 64 bytes.
func CredentialLike(name string) bool {
	switch name {
	case "Accept", "Accept-Encoding", "Accept-Language", "Connection", "Content-Length", "Content-Type", "User-Agent",
		"X-Request-Id", "X-Stainless-Arch", "X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Package-Version",
		"X-Stainless-Retry-Count", "X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Timeout",
		"Anthropic-Version", "Traceparent", "Tracestate":
		return false // what SDKs send on every request, by name
	}
	return holdsCredentialWord(name)
}

// holdsCredentialWord is CredentialLike's pattern.
func holdsCredentialWord(name string) bool {
	var b [64]byte
	return credentialWords.in(letters(b[:0], name))
}

// APIKeyLike reports whether a header's name is an API key's: it holds
// apikey, apitoken or subscriptionkey in the same form (X-Goog-Api-Key,
// Ocp-Apim-Subscription-Key, X-Api-Token).
func APIKeyLike(name string) bool {
	var b [64]byte
	return apiKeyWords.in(letters(b[:0], name))
}

// queryKey reports whether a query parameter's name, as sent (percent-
// and '+'-escaped), is a credential's. A suffix such as [], [0] or .0 is
// dropped with the rest of what is not a letter or a digit.
func queryKey(name string) bool {
	var b [64]byte
	return credentialWords.in(unescapedLetters(b[:0], name))
}

// letters appends to buf the letters, lower-cased, and the digits of
// name; the rest is dropped. Names up to cap(buf) bytes do not allocate.
func letters(buf []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		if c := letterOf[name[i]]; c != 0 {
			buf = append(buf, c)
		}
	}
	return buf
}

// unescapedLetters is letters of a percent-escaped name, unescaped.
func unescapedLetters(buf []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '%' && i+2 < len(name) && isHexDigit(name[i+1]) && isHexDigit(name[i+2]) {
			c = unhex(name[i+1])<<4 | unhex(name[i+2])
			i += 2
		}
		if c = letterOf[c]; c != 0 {
			buf = append(buf, c)
		}
	}
	return buf
}

// letterOf maps a letter to itself lower-cased, a digit to itself, and
// any other byte to 0.
var letterOf = func() (t [256]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c)
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = byte(c), byte(c)
	}
	return t
}()

// wordSet is a few words, looked for in a name's letters (see letters)
// at the positions that hold one's first byte.
type wordSet [256][]string // by first byte

func newWordSet(words ...string) *wordSet {
	s := new(wordSet)
	for _, w := range words {
		s[w[0]] = append(s[w[0]], w)
	}
	return s
}

// in reports whether b holds one of the set's words.
func (s *wordSet) in(b []byte) bool {
	for i, c := range b {
		for _, w := range s[c] {
			if len(w) <= len(b)-i && string(b[i:i+len(w)]) == w { // compared in place
				return true
			}
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
// reads a key from: Authorization, or one of KeyHeaders.
func keyHeader(name string) bool {
	if name == "Authorization" {
		return true
	}
	for _, h := range KeyHeaders {
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
		if strings.Contains(v, InsecureKeyProtocol) {
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

// RedactedQuery is a query string with every value replaced: the names
// and the separators ('&', ';') are kept as sent.
func RedactedQuery(q string) string { return redactQuery(q, func(string) bool { return true }) }

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

// RedactedURI is a request URI, or a URL, with the values of the
// credentials of its query, and of a query after an escaped '?' in its
// path, replaced; ok is false when it has none.
func RedactedURI(uri string) (string, bool) {
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

// RedactedProtocols is a Sec-WebSocket-Protocol value with the key of its
// openai-insecure-api-key entry (see InsecureKeyProtocol) replaced.
func RedactedProtocols(v string) string {
	var b strings.Builder
	for i, p := range strings.Split(v, ",") {
		if i > 0 {
			b.WriteByte(',')
		}
		if t := strings.TrimSpace(p); strings.HasPrefix(t, InsecureKeyProtocol) {
			p = p[:strings.Index(p, InsecureKeyProtocol)] + InsecureKeyProtocol + "REDACTED"
		}
		b.WriteString(p)
	}
	return b.String()
}

// Drop removes from a request's headers, before it goes upstream, every
// credential of the client's: the headers CredentialLike names but those
// real clients send that only look like one (Idempotency-Key,
// X-Idempotency-Key, Sec-WebSocket-Key), the Sec-WebSocket-Protocol
// entries a key rides in, and a Referer or Origin whose query holds one.
// Each group speaks for itself, with its own key.
func Drop(h http.Header) {
	for name, v := range h {
		switch {
		case CredentialLike(name):
			if !plainHeader(name) {
				delete(h, name)
			}
		case name == "Sec-Websocket-Protocol":
			if insecureKey(v) {
				delete(h, name)
			}
		case name == "Referer" || name == "Origin":
			for _, u := range v {
				if _, ok := RedactedURI(u); ok {
					delete(h, name)
					break
				}
			}
		}
	}
}

// Where a request carries a key the gateway does not read: a key sent
// there (in the query string, or in a header other than Authorization and
// KeyHeaders whose name is an API key's) would be written verbatim to an
// access log that redacts only the Authorization and cookie headers. A
// key in the query string is stray whatever the gateway's clients (see
// StrayInQuery); a header only when the gateway reads keys itself (see
// Stray): otherwise another handler may read that header. The other
// credentials (an identity proxy's Cf-Access-Jwt-Assertion or
// X-Forwarded-Access-Token, a Helicone-Auth) are not a key of the
// gateway's: they are never stray, and Drop keeps them from the upstream.

// InQuery is where Stray and StrayInQuery say a key is found in the query
// string, or in one after a '?' escaped in the path.
const InQuery = "query"

// Stray returns where a request carries a key the gateway does not read,
// for a gateway that reads keys itself: the name of a header (one
// APIKeyLike names but Authorization and KeyHeaders, or a
// Sec-WebSocket-Protocol with a key), or InQuery (see StrayInQuery); ""
// when it carries none.
func Stray(r *http.Request) string {
	for name, v := range r.Header {
		switch {
		case keyHeader(name):
		case APIKeyLike(name):
			return name
		case name == "Sec-Websocket-Protocol" && insecureKey(v):
			return name
		}
	}
	return StrayInQuery(r.URL)
}

// StrayInQuery returns InQuery when a URL's query string, or one after a
// '?' escaped in its path, names a credential; "" when neither does.
func StrayInQuery(u *url.URL) string {
	if strayQuery(u.RawQuery) {
		return InQuery
	}
	if i := strings.IndexByte(u.Path, '?'); i >= 0 && strayQuery(u.Path[i+1:]) {
		return InQuery // an escaped '?', which another server may split at
	}
	return ""
}

// RedactedPath is a path with every value of a query after an escaped
// '?' in it replaced (see RedactedQuery).
func RedactedPath(path string) string {
	if p, q, ok := strings.Cut(path, "?"); ok {
		return p + "?" + RedactedQuery(q)
	}
	return path
}
