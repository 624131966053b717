// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestStrayKey(t *testing.T) {
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
		{"/v1/chat/completions?keyboard=1&monkey=2", nil, ""},
		{"/v1/chat/completions", http.Header{"Api_key": {"k"}}, "Api_key"},
		{"/v1/chat/completions", http.Header{"X_api_key": {"k"}}, "X_api_key"},
		{"/v1/chat/completions", http.Header{"Apikey": {"k"}}, "Apikey"},
		{"/v1/chat/completions", http.Header{"X-Stainless-Lang": {"js"}, "Sec-Fetch-Mode": {"cors"}}, ""},
	} {
		r := httptest.NewRequest(http.MethodPost, tc.target, nil)
		for k, v := range tc.header {
			r.Header[k] = v
		}
		if got := strayKey(r, true); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.target, tc.header, got, tc.want)
		}
	}
}

func TestRedactedQuery(t *testing.T) {
	if got := redactedQuery("api-version=1&api-key=sk-secret&flag&x="); got != "api-version=REDACTED&api-key=REDACTED&flag&x=REDACTED" {
		t.Errorf("got %q", got)
	}
	enc := zapcore.NewMapObjectEncoder()
	KeyHeadersFilter{}.Filter(zap.String("uri", "/v1/models?api-version=1&API_KEY=sk-secret&key")).AddTo(enc)
	if got := enc.Fields["uri"]; got != "/v1/models?api-version=1&API_KEY=REDACTED&key" {
		t.Errorf("uri %q", got)
	}
}

// headerObject writes headers as Caddy's access log does.
type headerObject http.Header

func (h headerObject) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for k, v := range h {
		_ = enc.AddArray(k, zapcore.ArrayMarshalerFunc(func(ae zapcore.ArrayEncoder) error {
			for _, s := range v {
				ae.AppendString(s)
			}
			return nil
		}))
	}
	return nil
}

func TestKeyHeadersFilter(t *testing.T) {
	h := headerObject{"Api-Key": {"k1"}, "X-Api-Key": {"k2"}, "Api_key": {"k3"}, "Apikey": {"k4"}, "User-Agent": {"OpenAI/JS 6.49.0"}}
	enc := zapcore.NewMapObjectEncoder()
	KeyHeadersFilter{}.Filter(zap.Object("headers", h)).AddTo(enc)
	got := enc.Fields["headers"].(map[string]any)
	for _, k := range []string{"Api-Key", "X-Api-Key", "Api_key", "Apikey"} {
		if v := got[k].([]any); len(v) != 1 || v[0] != "REDACTED" {
			t.Errorf("%s: %v", k, v)
		}
	}
	if v := got["User-Agent"].([]any); len(v) != 1 || v[0] != "OpenAI/JS 6.49.0" {
		t.Errorf("User-Agent: %v", v)
	}
}
