// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// maxBodyBytes bounds how much of a request body the simulators read.
const maxBodyBytes = 32 << 20

// RecordedRequest is one request received under /v1.
type RecordedRequest struct {
	Method, Path string
	Header       http.Header // a clone
	Body         []byte
}

// recorder keeps RecordedRequests in arrival order.
type recorder struct {
	disabled bool
	mu       sync.Mutex
	reqs     []RecordedRequest
}

func (rec *recorder) add(r *http.Request, body []byte) {
	if rec.disabled {
		return
	}
	rr := RecordedRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, rr)
	rec.mu.Unlock()
}

func (rec *recorder) list() []RecordedRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]RecordedRequest(nil), rec.reqs...)
}

func (rec *recorder) reset() {
	rec.mu.Lock()
	rec.reqs = nil
	rec.mu.Unlock()
}

// readBody reads the whole request body (up to maxBodyBytes). The returned
// slice is never modified afterwards, so it may be recorded as is.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= maxBodyBytes {
		buf.Grow(int(r.ContentLength) + 1)
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, maxBodyBytes))
	return buf.Bytes(), err
}

// newID returns prefix followed by 32 random hex digits, the form vLLM uses
// for response ids.
func newID(prefix string) string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	b := make([]byte, len(prefix)+32)
	copy(b, prefix)
	hex.Encode(b[len(prefix):], raw[:])
	return string(b)
}

// pause sleeps for d, reusing *t; it reports false if ctx ended first. A
// zero d returns at once without touching timers.
func pause(ctx context.Context, d time.Duration, t **time.Timer) bool {
	if d <= 0 {
		return true
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-(*t).C:
		return true
	case <-ctx.Done():
		(*t).Stop()
		return false
	}
}

// stopTimer stops t if it was created.
func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// writeJSON writes v as a JSON body with the given status, the way
// Starlette's JSONResponse does: compact, no HTML escaping, Content-Length.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, status, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// writeBody writes a prepared JSON body.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// abortConn ends the response abruptly: whatever was written is flushed and
// the connection is closed without completing the response. Where the
// connection cannot be hijacked (HTTP/2), the handler panics with
// http.ErrAbortHandler, which makes net/http reset the stream.
func abortConn(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// appendJSONString appends s to b as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
