// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package logkeys

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// keysLogger is a logger writing through a provisioned hybrid_llm
// encoder (or, with plain, Caddy's json encoder) into buf.
func keysLogger(t testing.TB, plain bool, buf *bytes.Buffer) *zap.Logger {
	t.Helper()
	var enc zapcore.Encoder
	if plain {
		je := new(logging.JSONEncoder)
		if err := je.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		enc = je
	} else {
		ke := new(KeysEncoder)
		if err := ke.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hybrid_llm {\n time_format unix_seconds_float\n}")); err != nil {
			t.Fatal(err)
		}
		if err := ke.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		enc = ke
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(buf), zapcore.DebugLevel))
}

// The encoder writes what Caddy's access log writes, with the request's
// credentials redacted: added as the access log adds the request (to the
// logger) or given with the entry, on every record.
func TestKeysEncoderRedactsTheRequest(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/chat/completions?api-version=1&api_key=sk-query", nil)
	r.Header.Set("Api-Key", "sk-header")
	r.Header.Set("X-Goog-Api-Key", "sk-goog")
	r.Header.Set("Authorization", "Bearer sk-bearer")
	r.Header.Set("User-Agent", "OpenAI/Python 1.99.0")
	req := zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r})
	var buf bytes.Buffer
	lazy := keysLogger(t, false, &buf).WithLazy(req)
	lazy.Info("handled request", zap.Int("status", 200))
	lazy.Info("handled request", zap.Int("status", 200)) // a second record of the same logger
	keysLogger(t, false, &buf).Info("handled request", req)
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d records: %s", len(lines), buf.Bytes())
	}
	for _, line := range lines {
		if bytes.Contains(line, []byte("sk-")) {
			t.Errorf("a key in the record: %s", line)
		}
		var rec struct {
			Request struct {
				URI     string              `json:"uri"`
				Headers map[string][]string `json:"headers"`
			} `json:"request"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		h := rec.Request.Headers
		if rec.Request.URI != "/v1/chat/completions?api-version=1&api_key=REDACTED" || h["Api-Key"][0] != "REDACTED" ||
			h["X-Goog-Api-Key"][0] != "REDACTED" || h["Authorization"][0] != "REDACTED" || h["User-Agent"][0] != "OpenAI/Python 1.99.0" {
			t.Errorf("record %s", line)
		}
	}

	// beside the request, nothing changes: the record is the json
	// encoder's, but for the redacted values
	var plain bytes.Buffer
	r.Header.Del("Api-Key")
	r.Header.Del("X-Goog-Api-Key")
	r.Header.Del("Authorization") // one header: the objects' order is the map's
	r.URL.RawQuery, r.RequestURI = "", "/v1/chat/completions"
	buf.Reset()
	keysLogger(t, false, &buf).WithLazy(req).Info("handled request", zap.Int("status", 200), zap.Object("resp_headers", headerObject{"X-Hybrid-Target": {"self"}}))
	keysLogger(t, true, &plain).WithLazy(req).Info("handled request", zap.Int("status", 200), zap.Object("resp_headers", headerObject{"X-Hybrid-Target": {"self"}}))
	strip := func(b []byte) []byte { return b[bytes.Index(b, []byte(`"msg"`)):] } // past the time, whose format differs
	if got, want := strip(buf.Bytes()), strip(plain.Bytes()); !bytes.Equal(got, want) {
		t.Errorf("record\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkKeysEncoder is an access log record's cost with the request
// redacted by the hybrid_llm encoder, by Caddy's filter encoder with the
// hybrid_llm_keys filter, and unredacted by the json encoder.
func BenchmarkKeysEncoder(b *testing.B) {
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	for _, h := range []string{"Accept", "Accept-Encoding", "Content-Type", "User-Agent", "X-Stainless-Lang", "X-Stainless-Os", "Api-Key"} {
		r.Header.Set(h, "value-"+h)
	}
	req := zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r})
	filter := func() zapcore.Encoder {
		fe := &logging.FilterEncoder{WrappedRaw: json.RawMessage(`{"format":"json"}`),
			FieldsRaw: map[string]json.RawMessage{"request>headers": json.RawMessage(`{"filter":"hybrid_llm_keys"}`),
				"request>uri": json.RawMessage(`{"filter":"hybrid_llm_keys"}`)}}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: b.Context()})
		b.Cleanup(cancel)
		if err := fe.Provision(ctx); err != nil {
			b.Fatal(err)
		}
		return fe
	}
	ke := new(KeysEncoder)
	if err := ke.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	je := new(logging.JSONEncoder)
	if err := je.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		enc  zapcore.Encoder
	}{{"hybrid_llm", ke}, {"filter", filter()}, {"json", je}} {
		b.Run(tc.name, func(b *testing.B) {
			core := zapcore.NewCore(tc.enc, zapcore.AddSync(discard{}), zapcore.InfoLevel)
			logger := zap.New(core)
			b.ReportAllocs()
			for b.Loop() {
				logger.WithLazy(req).Info("handled request", zap.Int("status", 200), zap.Int64("size", 512))
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
