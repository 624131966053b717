// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"unsafe"

	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// errBodyTooLarge reports a body over the configured cap.
var errBodyTooLarge = errors.New("request body too large")

var (
	// errUnsupportedEncoding is a request body compressed in a way the
	// gateway does not decode.
	errUnsupportedEncoding = errors.New("unsupported request Content-Encoding")
	// errBadEncoding is a request body that does not decode.
	errBadEncoding = errors.New("the request body is not valid gzip")
)

// readRequestBody reads the body as readBody does, decoded first when the
// client sent it gzip-compressed (the limit counts the decoded bytes).
// The Content-Encoding header goes: upstreams get the plain body.
func readRequestBody(r *http.Request, limit int64) ([]byte, error) {
	ce, ok := r.Header["Content-Encoding"]
	if !ok {
		return readBody(r, limit)
	}
	switch strings.ToLower(strings.TrimSpace(strings.Join(ce, ","))) {
	case "", "identity":
		delete(r.Header, "Content-Encoding")
		return readBody(r, limit)
	case "gzip", "x-gzip":
	default:
		return nil, errUnsupportedEncoding
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge // it will not be smaller decoded, as a rule
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return nil, errBadEncoding
	}
	body, err := readBody(&http.Request{Body: zr, ContentLength: -1}, limit)
	var corrupt flate.CorruptInputError
	if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &corrupt) {
		return nil, errBadEncoding // not the client's connection, nor a size limit
	}
	delete(r.Header, "Content-Encoding")
	return body, err
}

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
	lr := io.LimitedReader{R: r.Body, N: limit + 1}
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

// splice replaces body[from:to] with with.
type splice struct {
	from, to int
	with     []byte
}

// usageBody is a request body rewritten to ask for stream usage.
type usageBody struct {
	body []byte
	top  protocol.Request
}

// usageAsk is how a stream's usage is asked of the groups that allow it:
// a field spliced into the body, if splice.with is set, or else a body
// rewritten, if body is not nil.
type usageAsk struct {
	splice   splice
	body     *usageBody
	injected bool // the current attempt asked for it on its own
}

// upstreamBody is a request body as an upstream gets it: the client's
// bytes with the gateway's splices (the model swapped, stream usage asked
// for), read from where they are rather than copied into a new body.
type upstreamBody struct {
	parts  [5][]byte
	n      int // parts in use
	at     int // the part being read
	offset int // in it
}

// Read implements io.Reader.
func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.at >= b.n {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && b.at < b.n {
		c := copy(p[n:], b.parts[b.at][b.offset:])
		n += c
		if b.offset += c; b.offset == len(b.parts[b.at]) {
			b.at, b.offset = b.at+1, 0
		}
	}
	return n, nil
}

// Close implements io.Closer.
func (*upstreamBody) Close() error { return nil }

// set makes b read body with at most two splices applied, and returns its
// length. The splices are in order and do not overlap.
func (b *upstreamBody) set(body []byte, splices ...splice) int64 {
	n, last, size := 0, 0, int64(len(body))
	for _, s := range splices {
		b.parts[n], b.parts[n+1] = body[last:s.from], s.with
		n += 2
		size += int64(len(s.with) - (s.to - s.from))
		last = s.to
	}
	b.parts[n] = body[last:]
	b.n, b.at, b.offset = n+1, 0, 0
	return size
}

// replay returns the body again from its start, for a request the
// transport resends (see try).
func (b *upstreamBody) replay() (io.ReadCloser, error) {
	return &upstreamBody{parts: b.parts, n: b.n}, nil
}

// modelSplice swaps the body's model value, at the position protocol.Scan
// found it, for the target's model name: nothing else changes (key order,
// whitespace, unknown fields). A target that sends vLLM the request's
// priority (class cls) gets the field after the name. It reports false
// when the target takes the body as the client sent it.
func modelSplice(t *routing.Target, top *protocol.Request, cls priority.Class) (splice, bool) {
	if p := t.Run.ClassModelJSON; p != nil {
		return splice{from: top.ModelAt, to: top.ModelAt + len(top.Model), with: p[cls]}, true
	}
	if t.Run.SameName {
		return splice{}, false
	}
	return splice{from: top.ModelAt, to: top.ModelAt + len(top.Model), with: t.Run.ModelJSON}, true
}

// withStreamUsage asks for stream usage as the request's API asks for it
// (see protocol.AskStreamUsage): a splice where the body allows, else the
// body rewritten, which the caller must scan again.
func withStreamUsage(body []byte, top *protocol.Request) (splice, []byte, bool) {
	at, field, rewritten, ok := protocol.AskStreamUsage(body, top)
	return splice{from: at, to: at, with: field}, rewritten, ok
}

// RequestHeads are the values of the headers the gateway adds to a
// request and its answer, kept in one allocation: the route's, for a
// POST.
type RequestHeads struct {
	ids   [2]string // X-Request-Id: the request's and the answer's
	id    [26]byte  // the request id's bytes
	route [2]string // X-Hybrid-Target, X-Hybrid-Model
}

// RequestID gives the request a new id, the one its X-Request-Id header
// and the answer's carry from now on, and returns it with the client's
// own X-Request-Id if that is a sane token (1 to 128 visible ASCII
// characters). The client's id is only noted: two clients may send the
// same one. The id and the headers' values are kept in h.
func RequestID(w http.ResponseWriter, r *http.Request, h *RequestHeads) (id, clientID string) {
	fillRequestID(&h.id)
	// the bytes are never written again: the string is the id
	id = unsafe.String(&h.id[0], len(h.id))
	h.ids[0], h.ids[1] = id, id
	w.Header()["X-Request-Id"] = h.ids[1:2:2]
	if v := r.Header["X-Request-Id"]; len(v) == 1 {
		if c := v[0]; c != "" && len(c) <= 128 && visibleASCII(c) {
			clientID = c
		}
		v[0] = id // in place: no new slice
		return id, clientID
	}
	r.Header["X-Request-Id"] = h.ids[0:1:1]
	return id, ""
}

// newRequestID returns a new request id (see fillRequestID).
func newRequestID() string {
	var b [26]byte
	fillRequestID(&b)
	return string(b[:])
}

// fillRequestID writes 26 random base-32 characters (130 bits), like
// crypto/rand.Text, from the runtime's fast per-thread generator: an id
// must be unique, not secret.
func fillRequestID(b *[26]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	a, c := rand.Uint64(), rand.Uint64()
	for i := range b {
		if i == 13 {
			a = c
		}
		b[i] = alphabet[a&31]
		a >>= 5
	}
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// bodyFor sets b to the request body (q) as target t gets it: its model
// name swapped in and, if its group asks for stream usage and the request
// does (u), the usage asked for (injected). It returns the body's length.
func (u *usageAsk) bodyFor(q *routing.Asked, t *routing.Target, cls priority.Class, b *upstreamBody) (length int64, injected bool) {
	body, top := q.Body, &q.Top
	if t.Upstream.Run.StreamUsage && u.body != nil {
		body, top = u.body.body, &u.body.top
		injected = true
	}
	var splices [2]splice
	n := 0
	if sp, ok := modelSplice(t, top, cls); ok {
		splices[n], n = sp, n+1
	}
	if t.Upstream.Run.StreamUsage && u.splice.with != nil {
		splices[n], n = u.splice, n+1
		injected = true
	}
	return b.set(body, splices[:n]...), injected
}

// ask asks for stream usage in body (top: its fields; watch: those route
// rules read): a field spliced in where the body allows, else the body
// rewritten.
func (u *usageAsk) ask(body []byte, top *protocol.Request, watch []string) {
	sp, rewritten, ok := withStreamUsage(body, top)
	switch {
	case !ok:
	case rewritten != nil:
		u.body = &usageBody{body: rewritten}
		u.body.top, _ = protocol.Scan(rewritten, watch...) // the model may have moved
	default:
		u.splice = sp
	}
}
