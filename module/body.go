// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// errBodyTooLarge reports a body over the configured cap.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads the whole request body, refusing more than limit bytes.
// A declared Content-Length over the limit is refused before reading.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	size := int64(512)
	if r.ContentLength > 0 {
		size = r.ContentLength + 1 // +1 so that ReadFull sees EOF
	}
	buf := make([]byte, 0, size)
	lr := io.LimitReader(r.Body, limit+1)
	for {
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if int64(len(buf)) > limit {
			return nil, errBodyTooLarge
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
	if int64(len(buf)) > limit {
		return nil, errBodyTooLarge
	}
	return buf, nil
}

// setModel returns the body with its top-level "model" set to the
// target's model name. Nothing else changes: key order, whitespace and
// unknown fields are kept. The input is never modified. at is the model
// value as scanTop found it: its position makes the swap one copy, with
// no second search past the messages (clients often send them first).
func (t *Target) setModel(body []byte, at gjson.Result) ([]byte, error) {
	if t.sameName {
		return body, nil
	}
	if at.Index > 0 && at.Index+len(at.Raw) <= len(body) && string(body[at.Index:at.Index+len(at.Raw)]) == at.Raw {
		out := make([]byte, 0, len(body)-len(at.Raw)+len(t.modelJSON))
		out = append(out, body[:at.Index]...)
		out = append(out, t.modelJSON...)
		return append(out, body[at.Index+len(at.Raw):]...), nil
	}
	return sjson.SetRawBytesOptions(body, "model", t.modelJSON, &sjson.Options{Optimistic: true})
}

// withStreamUsage returns the body asking for stream usage
// (stream_options.include_usage). Without stream_options, the field is
// appended at the end of the object, which keeps the model's position.
func withStreamUsage(body []byte, top topFields) ([]byte, bool) {
	if !top.hasStreamOptions {
		end := bytes.LastIndexByte(body, '}')
		if end > 0 {
			const field = `,"stream_options":{"include_usage":true}`
			out := make([]byte, 0, len(body)+len(field))
			out = append(out, body[:end]...)
			out = append(out, field...)
			return append(out, body[end:]...), true
		}
	}
	b, err := sjson.SetBytes(body, "stream_options.include_usage", true)
	return b, err == nil
}

// topFields are the top-level fields the gateway reads of a request.
type topFields struct {
	model      gjson.Result // the first model field
	models     int          // how many model fields, whatever their spelling
	stream     bool
	wantsUsage bool // stream_options.include_usage

	hasStreamOptions bool

	// for pre-routing and context windows
	messages, prompt, input gjson.Result
	maxTokens               int64
}

// scanTop reads the top-level fields of a JSON body in one pass and
// reports whether it is an object. A model key given twice (escapes
// included) is counted: decoders disagree on which one counts (gjson and
// sjson take the first, Go's and Python's decoders, vLLM's and a cloud's,
// the last).
func scanTop(body []byte) (topFields, bool) {
	var f topFields
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return f, false
	}
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			if f.models == 0 {
				f.model = v
			}
			f.models++
		case "stream":
			f.stream = v.Bool()
		case "stream_options":
			f.hasStreamOptions = true
			f.wantsUsage = v.Get("include_usage").Bool()
		case "messages":
			f.messages = v
		case "prompt":
			f.prompt = v
		case "input":
			f.input = v
		case "max_tokens", "max_completion_tokens":
			f.maxTokens = max(f.maxTokens, v.Int())
		}
		return true
	})
	return f, true
}

// requestID returns the request's X-Request-Id if it is a sane token (1
// to 128 visible ASCII characters), or a new random id.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 && visibleASCII(id) {
		return id
	}
	id := newRequestID()
	r.Header.Set("X-Request-Id", id)
	return id
}

// newRequestID returns 26 random base-32 characters (130 bits), like
// crypto/rand.Text, from the runtime's fast per-thread generator: an id
// must be unique, not secret.
func newRequestID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	var b [26]byte
	a, c := rand.Uint64(), rand.Uint64()
	for i := range b {
		if i == 13 {
			a = c
		}
		b[i] = alphabet[a&31]
		a >>= 5
	}
	return string(b[:])
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
