// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package logkeys

import (
	"net/http"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The filter redacts a URI's query credentials.
func TestKeyHeadersFilterURI(t *testing.T) {
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
	h := headerObject{"Api-Key": {"k1"}, "X-Api-Key": {"k2"}, "Api_key": {"k3"}, "Apikey": {"k4"}, "User-Agent": {"OpenAI/JS 6.49.0"},
		"X-Goog-Api-Key": {"k5"}, "Helicone-Auth": {"k6"}, "X-Auth-Key": {"k7"}, "Ocp-Apim-Subscription-Key": {"k8"},
		"Cf-Access-Jwt-Assertion": {"j1"}, "X-Auth-Request-Access-Token": {"t1"}, "X-Forwarded-Access-Token": {"t2"},
		"Referer":                {"https://app.example/chat?x=1&api_key=k9"},
		"Sec-Websocket-Protocol": {"realtime, openai-insecure-api-key.k10, openai-beta.realtime-v1"}}
	enc := zapcore.NewMapObjectEncoder()
	KeyHeadersFilter{}.Filter(zap.Object("headers", h)).AddTo(enc)
	got := enc.Fields["headers"].(map[string]any)
	if v := got["Referer"].([]any); len(v) != 1 || v[0] != "https://app.example/chat?x=1&api_key=REDACTED" {
		t.Errorf("Referer: %v", v)
	}
	if v := got["Sec-Websocket-Protocol"].([]any); len(v) != 1 || v[0] != "realtime, openai-insecure-api-key.REDACTED, openai-beta.realtime-v1" {
		t.Errorf("Sec-Websocket-Protocol: %v", v)
	}
	for _, k := range []string{"Api-Key", "X-Api-Key", "Api_key", "Apikey", "X-Goog-Api-Key", "Helicone-Auth", "X-Auth-Key", "Ocp-Apim-Subscription-Key",
		"Cf-Access-Jwt-Assertion", "X-Auth-Request-Access-Token", "X-Forwarded-Access-Token"} {
		if v := got[k].([]any); len(v) != 1 || v[0] != "REDACTED" {
			t.Errorf("%s: %v", k, v)
		}
	}
	if v := got["User-Agent"].([]any); len(v) != 1 || v[0] != "OpenAI/JS 6.49.0" {
		t.Errorf("User-Agent: %v", v)
	}
}
