// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package credentials

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestStray(t *testing.T) {
	for _, tc := range []struct {
		target string
		header http.Header
		want   string
	}{
		{"/v1/chat/completions", http.Header{"Authorization": {"Bearer k"}, "Api-Key": {"k"}, "X-Api-Key": {"k"}}, ""},
		{"/v1/chat/completions?api-version=2024-10-21", nil, ""},
		{"/v1/chat/completions?api-key=k", nil, "query"},
		{"/v1/chat/completions?api-version=1&API_KEY=k", nil, "query"},
		{"/v1/chat/completions?key=k", nil, "query"},
		{"/v1/chat/completions?Access_Token=k", nil, "query"},
		{"/v1/chat/completions?api%2Dkey=k", nil, "query"},
		{"/v1/chat/completions?apikey", nil, "query"},
		{"/v1/chat/completions?api-version=2024-10-21&stream=1&model=m", nil, ""},
		{"/v1/chat/completions?monkey=2", nil, "query"}, // the price of a pattern
		{"/v1/chat/completions?api_key[]=k", nil, "query"},
		{"/v1/chat/completions?api_key%5B%5D=k", nil, "query"},
		{"/v1/chat/completions?x=1;api_key=k", nil, "query"},
		{"/v1/chat/completions?subscription-key=k", nil, "query"},
		{"/v1/chat/completions?key+=k", nil, "query"},
		{"/v1/chat/completions?openai_key=k", nil, "query"},
		{"/v1/chat/completions?api_key.0=k", nil, "query"},
		{"/v1/chat/completions?apikey2=k", nil, "query"},
		{"/v1/chat/completions?password=k", nil, "query"},
		{"/v1/chat/completions?client_secret=k", nil, "query"},
		{"/v1/chat/completions?jwt=k", nil, "query"},
		{"/v1/chat/completions?api_key%00=k", nil, "query"},
		{"/v1/chat/completions?%6Bey=k", nil, "query"},
		{"/v1/chat/completions%3Fapi_key=k", nil, "query"},
		{"/v1/models?session=k", nil, ""},
		{"/v1/chat/completions", http.Header{"Api_key": {"k"}}, "Api_key"},
		{"/v1/chat/completions", http.Header{"X_api_key": {"k"}}, "X_api_key"},
		{"/v1/chat/completions", http.Header{"Apikey": {"k"}}, "Apikey"},
		{"/v1/chat/completions", http.Header{"X-Stainless-Lang": {"js"}, "Sec-Fetch-Mode": {"cors"}}, ""},
		{"/v1/chat/completions", http.Header{"Idempotency-Key": {"i"}, "X-Idempotency-Key": {"i"}, "Accept-Encoding": {"gzip"}}, ""},
		{"/v1/chat/completions", http.Header{"Sec-Websocket-Protocol": {"realtime"}, "Referer": {"https://app/?api_key=k"}}, ""},
		{"/v1/chat/completions", http.Header{"Sec-Websocket-Protocol": {"realtime, openai-insecure-api-key.k"}}, "Sec-Websocket-Protocol"},
		{"/v1/chat/completions", http.Header{"X-Goog-Api-Key": {"k"}}, "X-Goog-Api-Key"},
		{"/v1/chat/completions", http.Header{"Ocp-Apim-Subscription-Key": {"k"}}, "Ocp-Apim-Subscription-Key"},
		{"/v1/chat/completions", http.Header{"X-Litellm-Api-Key": {"k"}}, "X-Litellm-Api-Key"},
		{"/v1/chat/completions", http.Header{"X-Portkey-Api-Key": {"k"}}, "X-Portkey-Api-Key"},
		{"/v1/chat/completions", http.Header{"Anthropic-Api-Key": {"k"}}, "Anthropic-Api-Key"},
		{"/v1/chat/completions", http.Header{"X-Api-Key-Old": {"k"}}, "X-Api-Key-Old"},
		{"/v1/chat/completions", http.Header{"X-Api-Token": {"k"}}, "X-Api-Token"},
		{"/v1/chat/completions", http.Header{"X-Vendor-Subscription-Key": {"k"}}, "X-Vendor-Subscription-Key"},
		// credentials that are not an API key: an identity proxy's,
		// another handler's; served (and dropped before the upstream)
		{"/v1/chat/completions", http.Header{"Cf-Access-Jwt-Assertion": {"j"}, "X-Auth-Request-Access-Token": {"t"},
			"X-Forwarded-Access-Token": {"t"}, "X-Amz-Security-Token": {"t"}, "Proxy-Authorization": {"Basic b"}}, ""},
		{"/v1/chat/completions", http.Header{"Helicone-Auth": {"k"}, "X-Secret-Key": {"k"}, "X-Auth-Key": {"k"}}, ""},
	} {
		r := httptest.NewRequest(http.MethodPost, tc.target, nil)
		for k, v := range tc.header {
			r.Header[k] = v
		}
		if got := Stray(r); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.target, tc.header, got, tc.want)
		}
		// only the query, whatever the headers
		want := ""
		if tc.want == InQuery {
			want = InQuery
		}
		if got := StrayInQuery(r.URL); got != want {
			t.Errorf("%s %v: in the query %q, want %q", tc.target, tc.header, got, want)
		}
	}
}

// A name is a credential's by a pattern; the headers real clients send
// are not.
func TestCredentialLike(t *testing.T) {
	for _, name := range []string{"Api-Key", "X-Goog-Api-Key", "Ocp-Apim-Subscription-Key", "Helicone-Auth", "Authorization",
		"Proxy-Authorization", "X-Amz-Security-Token", "Password", "Passwd", "X-Jwt-Assertion",
		"X-Signature", "X-Credentials", "x_secret", "API" + "KEY", strings.Repeat("x-", 100) + "key"} {
		if !CredentialLike(name) {
			t.Errorf("%s: not credential-like", name)
		}
	}
	for _, name := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Content-Type", "Content-Length", "User-Agent",
		"X-Stainless-Retry-Count", "X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-Os", "X-Stainless-Arch",
		"X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Timeout", "Sec-Fetch-Mode", "Openai-Beta",
		"Openai-Organization", "Openai-Project", "X-Request-Id", "Traceparent", "Tracestate", "Keep-Alive", "Connection",
		"X-Forwarded-For", "X-Hybrid-Color", "Anthropic-Version", "Anthropic-Beta", "api-version", "Cookie", "Referer", "Origin",
		"X-Session-Id", "Session-Id"} {
		if CredentialLike(name) || holdsCredentialWord(name) {
			t.Errorf("%s: credential-like", name)
		}
	}
	if n := testing.AllocsPerRun(100, func() { CredentialLike("Ocp-Apim-Subscription-Key"); queryKey("api_key%5B%5D") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// The headers whose names look like a credential's but are not one, and
// the Sec-WebSocket-Protocol key.
func TestHeaderKinds(t *testing.T) {
	for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key", "Sec-Websocket-Key"} {
		if !CredentialLike(name) || !plainHeader(name) {
			t.Errorf("%s: credential-like %v, plain %v", name, CredentialLike(name), plainHeader(name))
		}
	}
	for _, name := range []string{"Authorization", "Api-Key", "X-Api-Key"} {
		if !keyHeader(name) {
			t.Errorf("%s: not a key header", name)
		}
	}
	if keyHeader("X-Goog-Api-Key") || !APIKeyLike("X-Goog-Api-Key") || APIKeyLike("Helicone-Auth") {
		t.Error("an API key header read as the gateway's, or a credential as an API key")
	}
	if !insecureKey([]string{"realtime", "realtime, openai-insecure-api-key.k"}) || insecureKey([]string{"realtime"}) {
		t.Error("the Sec-WebSocket-Protocol key")
	}
	if got := RedactedProtocols("realtime,  openai-insecure-api-key.k , openai-beta.realtime-v1"); got != "realtime,  openai-insecure-api-key.REDACTED, openai-beta.realtime-v1" {
		t.Errorf("protocols %q", got)
	}
}

// No credential of the client's goes upstream; the headers real clients
// send do.
func TestDrop(t *testing.T) {
	h := http.Header{
		"X-Goog-Api-Key": {"k"}, "Helicone-Auth": {"k"}, "X-Auth-Key": {"k"}, "Api_key": {"k"},
		"Cf-Access-Jwt-Assertion": {"j"}, "X-Forwarded-Access-Token": {"t"},
		"Sec-Websocket-Protocol": {"openai-insecure-api-key.k"}, "Referer": {"https://app.example/?x=1;api_key=k"},
		"Idempotency-Key": {"i"}, "User-Agent": {"OpenAI/JS 6.49.0"}, "X-Stainless-Lang": {"js"}, "Origin": {"https://app.example"},
	}
	Drop(h)
	if len(h) != 4 || h["Idempotency-Key"] == nil || h["User-Agent"] == nil || h["X-Stainless-Lang"] == nil || h["Origin"] == nil {
		t.Errorf("left %v", h)
	}
}

// A URI's query credentials are redacted, split on '&' and ';', names
// unescaped, after an escaped '?' too; the rest is kept as sent.
func TestRedactedURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/v1/models", "/v1/models"},
		{"/v1/models?api-version=1", "/v1/models?api-version=1"},
		{"/other?a=1;key=k&b=2", "/other?a=1;key=REDACTED&b=2"},
		{"/v1/chat/completions%3Fapi_key=k", "/v1/chat/completions%3Fapi_key=REDACTED"},
		{"/v1/chat/completions%3fx=1&api_key=k?token=t", "/v1/chat/completions%3fx=1&api_key=REDACTED?token=REDACTED"},
		{"/x?api_key%00=k&api_key%5B%5D=k&api_key[0]=k&key+=k", "/x?api_key%00=REDACTED&api_key%5B%5D=REDACTED&api_key[0]=REDACTED&key+=REDACTED"},
		{"https://app.example/page?client_secret=k", "https://app.example/page?client_secret=REDACTED"},
	} {
		if got, _ := RedactedURI(tc.in); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestRedactedQuery(t *testing.T) {
	// a path with an escaped '?', as the refusal's warning logs it
	if got := RedactedPath("/v1/chat/completions?api_key=sk-secret"); got != "/v1/chat/completions?api_key=REDACTED" {
		t.Errorf("path %q", got)
	}
	if got := RedactedQuery("api-version=1&api-key=sk-secret&flag&x="); got != "api-version=REDACTED&api-key=REDACTED&flag&x=REDACTED" {
		t.Errorf("got %q", got)
	}
}

// Names are read in place: a header's, and a query parameter's, escaped.
func BenchmarkCredentialLike(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		CredentialLike("Ocp-Apim-Subscription-Key")
		queryKey("api_key%5B%5D")
	}
}

// The names an SDK's request carries, none a credential's but
// Authorization: each read once, as Drop reads them.
func BenchmarkCredentialLikeSDKHeaders(b *testing.B) {
	names := []string{"Content-Type", "Accept", "User-Agent", "Content-Length", "X-Stainless-Lang", "X-Stainless-Package-Version", "Accept-Encoding", "X-Request-Id", "Authorization", "X-Stainless-Retry-Count", "Connection"}
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			CredentialLike(n)
		}
	}
}
