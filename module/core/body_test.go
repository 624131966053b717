// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

func TestSetModelKeepsEverythingElse(t *testing.T) {
	for _, tc := range []struct {
		name, model, in, want string
	}{
		{
			name:  "first key, order and spacing kept",
			model: "gpt-4o-mini",
			in:    `{"model": "chat-main", "zeta": 1, "messages": [{"role":"user","content":"hi"}], "x_unknown": {"a": [1, 2]}}`,
			want:  `{"model": "gpt-4o-mini", "zeta": 1, "messages": [{"role":"user","content":"hi"}], "x_unknown": {"a": [1, 2]}}`,
		},
		{
			name:  "model last, nested model fields untouched",
			model: "qwen2.5-7b-instruct",
			in:    `{"metadata":{"model":"keep"},"stream":true,"model":"chat-main"}`,
			want:  `{"metadata":{"model":"keep"},"stream":true,"model":"qwen2.5-7b-instruct"}`,
		},
		{
			name:  "names needing JSON escapes",
			model: `org/model "v2"`,
			in:    `{"model":"chat-main"}`,
			want:  `{"model":"org/model \"v2\""}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := &routing.Target{Model: tc.model}
			tg.Run.ModelJSON = []byte(jsonString(tc.model))
			in := []byte(tc.in)
			top, _ := protocol.Scan(in)
			sp, _ := modelSplice(tg, &top, priority.Standard)
			if got := readUpstream(t, in, sp); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if string(in) != tc.in {
				t.Errorf("input modified: %s", in)
			}
		})
	}
}

// readUpstream reads body with the splices applied, as an upstream does,
// and checks the length the request declares.
func readUpstream(t *testing.T, body []byte, splices ...splice) string {
	t.Helper()
	var ub upstreamBody
	n := ub.set(body, splices...)
	got, err := io.ReadAll(&ub)
	if err != nil || int64(len(got)) != n {
		t.Fatalf("read %d bytes (%v), declared %d", len(got), err, n)
	}
	return string(got)
}

// A request the transport sends again (its pooled connection was found
// closed) carries the whole body, however much of it the first try read,
// and reads in any chunk size give the same bytes.
func TestUpstreamBodyReplaysFromTheStart(t *testing.T) {
	in := []byte(`{"model":"chat-main","stream":true}`)
	want := `{"model":"qwen","stream":true,"stream_options":{"include_usage":true}}`
	top, _ := protocol.Scan(in)
	tg := &routing.Target{Model: "qwen", Run: routing.TargetRun{ModelJSON: []byte(`"qwen"`)}}
	model, _ := modelSplice(tg, &top, priority.Standard)
	usage, _, _ := withStreamUsage(in, &top)
	var ub upstreamBody
	if n := ub.set(in, model, usage); n != int64(len(want)) {
		t.Fatalf("declared length %d, want %d", n, len(want))
	}
	first := make([]byte, 20) // the first try got this far
	if n, err := io.ReadFull(&ub, first); n != 20 || err != nil {
		t.Fatalf("first read: %d bytes, %v", n, err)
	}
	again, _ := ub.replay()
	for _, size := range []int{1, 3, 7, 512} {
		var got []byte
		buf := make([]byte, size)
		for {
			n, err := again.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil || n == 0 {
				t.Fatalf("chunks of %d: read %d bytes, %v", size, n, err)
			}
		}
		if string(got) != want {
			t.Errorf("chunks of %d: replayed %s\nwant %s", size, got, want)
		}
		again, _ = ub.replay()
	}
	rest, _ := io.ReadAll(&ub)
	if string(first)+string(rest) != want {
		t.Errorf("the first try's body, read on: %s%s", first, rest)
	}
}

func TestStreamUsageSplice(t *testing.T) {
	tg := &routing.Target{Model: "qwen", Run: routing.TargetRun{ModelJSON: []byte(`"qwen"`)}}
	for _, tc := range []struct{ in, want string }{
		{
			in:   `{"messages":[],"model":"chat-main","stream":true} `,
			want: `{"messages":[],"model":"qwen","stream":true,"stream_options":{"include_usage":true}} `,
		},
		{
			in:   `{"model":"chat-main","stream_options":{"continuous_usage_stats":false},"stream":true}`,
			want: `{"model":"qwen","stream_options":{"continuous_usage_stats":false,"include_usage":true},"stream":true}`,
		},
	} {
		in := []byte(tc.in)
		top, _ := protocol.Scan(in)
		usage, rewritten, ok := withStreamUsage(in, &top)
		if !ok {
			t.Fatalf("%s: no stream usage", tc.in)
		}
		var got string
		if rewritten != nil {
			top, _ = protocol.Scan(rewritten)
			model, _ := modelSplice(tg, &top, priority.Standard)
			got = readUpstream(t, rewritten, model)
		} else {
			model, _ := modelSplice(tg, &top, priority.Standard)
			got = readUpstream(t, in, model, usage)
		}
		if got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func jsonString(s string) string {
	return `"` + strings.NewReplacer(`"`, `\"`, `\`, `\\`).Replace(s) + `"`
}

func TestReadBodyLimit(t *testing.T) {
	const limit = 16
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool
		wantErr error
	}{
		{name: "under", body: "0123456789"},
		{name: "exactly the limit", body: strings.Repeat("a", limit)},
		{name: "declared over", body: strings.Repeat("a", limit+1), wantErr: errBodyTooLarge},
		{name: "chunked under", body: "0123456789", chunked: true},
		{name: "chunked exactly", body: strings.Repeat("a", limit), chunked: true},
		{name: "chunked over", body: strings.Repeat("a", limit+1), chunked: true, wantErr: errBodyTooLarge},
		{name: "chunked far over", body: strings.Repeat("a", 10*limit), chunked: true, wantErr: errBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(tc.body))
			if tc.chunked {
				r.ContentLength = -1
			}
			got, err := readBody(r, limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && string(got) != tc.body {
				t.Errorf("got %q, want %q", got, tc.body)
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("X-Request-Id", "abc-123")
	w := httptest.NewRecorder()
	id, clientID := RequestID(w, r, new(RequestHeads))
	if id == "abc-123" || id == "" || clientID != "abc-123" {
		t.Errorf("a client's id: id %q, client's %q", id, clientID)
	}
	if got := r.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != id {
		t.Errorf("the request carries %q, want the gateway's %q", got, id)
	}
	if got := w.Header().Values("X-Request-Id"); len(got) != 1 || got[0] != id {
		t.Errorf("the answer carries %q, want the gateway's %q", got, id)
	}

	for _, bad := range []string{"", "has space", strings.Repeat("x", 129), "new\x7fline"} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if bad != "" {
			r.Header.Set("X-Request-Id", bad)
		}
		w := httptest.NewRecorder()
		got, clientID := RequestID(w, r, new(RequestHeads))
		if got == bad || got == "" || clientID != "" {
			t.Errorf("bad id %q kept: %q, client's %q", bad, got, clientID)
		}
		if r.Header.Get("X-Request-Id") != got || w.Header().Get("X-Request-Id") != got {
			t.Errorf("generated id %q not set on the request and the answer (got %q, %q)", got, r.Header.Get("X-Request-Id"), w.Header().Get("X-Request-Id"))
		}
		// the answer's header may change without changing the request's
		w.Header().Add("X-Request-Id", "added")
		if v := r.Header.Values("X-Request-Id"); len(v) != 1 || v[0] != got {
			t.Errorf("adding to the answer's id changed the request's: %q", v)
		}
	}
	r1 := httptest.NewRequest(http.MethodPost, "/", nil)
	r2 := httptest.NewRequest(http.MethodPost, "/", nil)
	r1.Header.Set("X-Request-Id", "same")
	r2.Header.Set("X-Request-Id", "same")
	if id1, _ := RequestID(httptest.NewRecorder(), r1, new(RequestHeads)); id1 == firstOf(RequestID(httptest.NewRecorder(), r2, new(RequestHeads))) {
		t.Error("two requests got one id")
	}
}

// firstOf returns the gateway's id of a requestID result.
func firstOf(id, _ string) string { return id }

func TestNewRequestIDShape(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newRequestID()
		if len(id) != 26 || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q repeats", id)
		}
		seen[id] = true
	}
}

// A gzip-compressed request body is read decoded, its limit counted in
// decoded bytes (a small bomb is refused), and the header goes so that
// upstreams get what they are sent: the plain body. Other encodings are
// refused, not read as JSON.
func TestReadRequestBodyDecodesGzip(t *testing.T) {
	const limit = 1 << 10
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		_ = zw.Close()
		return b.Bytes()
	}
	for _, tc := range []struct {
		name, encoding string
		body           []byte
		want           string
		wantErr        error
	}{
		{"gzip", "gzip", gz(`{"model":"chat-main"}`), `{"model":"chat-main"}`, nil},
		{"x-gzip", "X-Gzip", gz(`{}`), `{}`, nil},
		{"identity", "identity", []byte(`{}`), `{}`, nil},
		{"a bomb", "gzip", gz(strings.Repeat("a", 100*limit)), "", errBodyTooLarge},
		{"not gzip", "gzip", []byte(`{"model":"chat-main"}`), "", errBadEncoding},
		{"cut short", "gzip", gz(`{"model":"chat-main"}`)[:12], "", errBadEncoding},
		{"brotli", "br", []byte{0x0b, 0x02, 0x80}, "", errUnsupportedEncoding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(tc.body))
			r.Header.Set("Content-Encoding", tc.encoding)
			got, err := readRequestBody(r, limit)
			if !errors.Is(err, tc.wantErr) || string(got) != tc.want {
				t.Fatalf("%q %v, want %q %v", got, err, tc.want, tc.wantErr)
			}
			if _, still := r.Header["Content-Encoding"]; err == nil && still {
				t.Error("the Content-Encoding stays on a decoded body")
			}
		})
	}
}
