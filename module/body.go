// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"crypto/rand"
	"errors"
	"io"
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
// unknown fields are kept. The input is never modified.
func (t *Target) setModel(body []byte) ([]byte, error) {
	if t.sameName {
		return body, nil
	}
	return sjson.SetRawBytesOptions(body, "model", t.modelJSON, &sjson.Options{Optimistic: true})
}

// duplicateKey reports whether the JSON object body holds key more than
// once at its top level, whatever the spelling (escapes included).
// Decoders disagree on which one counts: gjson and sjson take the first,
// Go's and Python's decoders (vLLM's, a cloud's) the last.
func duplicateKey(body []byte, key string) bool {
	n := 0
	gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
		if k.Str == key {
			n++
		}
		return n < 2
	})
	return n > 1
}

// requestID returns the request's X-Request-Id if it is a sane token (1
// to 128 visible ASCII characters), or a new random id.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 && visibleASCII(id) {
		return id
	}
	id := rand.Text()
	r.Header.Set("X-Request-Id", id)
	return id
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
