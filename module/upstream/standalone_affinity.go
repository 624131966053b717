// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/tidwall/gjson"
)

// maxKeyedBody is the largest request body the standalone policy reads
// for a conversation's key; a larger one, or one of unknown length, goes
// by its session or by load.
const maxKeyedBody = 4 << 20

// maxPooledBody is the largest buffer kept in the pool for the next
// request.
const maxPooledBody = 1 << 20

// bodyPool holds the buffers request bodies are read into for their key.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// conversationKey is the conversation key of a request a plain
// reverse_proxy sends (see AffinityConfig): the session its header or
// body field names, else its prompt's start. It reads the body, up to
// maxKeyedBody, and leaves r.Body reading it from the start; 0: none. A
// pick the proxy tries again (lb_try_duration, lb_retries) finds the key
// with the body read before.
func conversationKey(r *http.Request, a *AffinityConfig) uint64 {
	if a.SessionHeader != "" {
		if v := r.Header.Get(a.SessionHeader); v != "" {
			return protocol.SessionKey(v)
		}
	}
	if rb, ok := r.Body.(*readBody); ok {
		return rb.key
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > maxKeyedBody {
		return 0
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	buf.Grow(int(r.ContentLength))
	_, err := io.CopyN(buf, r.Body, r.ContentLength)
	rb := &readBody{r: bytes.NewReader(buf.Bytes()), buf: buf, rest: r.Body}
	r.Body = rb
	if err == nil {
		rb.key = keyOf(buf.Bytes(), a)
	} // else short: the proxy sends what there is, and fails as it would have
	return rb.key
}

// keyOf is a whole request body's conversation key: the session its body
// field names, else its prompt's start.
func keyOf(body []byte, a *AffinityConfig) uint64 {
	if a.SessionField != "" {
		if v := gjson.GetBytes(body, a.SessionField); v.Type == gjson.String && v.Str != "" {
			return protocol.SessionKey(v.Str)
		}
	}
	top, ok := protocol.Scan(body)
	if !ok {
		return 0
	}
	return top.AffinityKey()
}

// readBody is a request body read ahead for its key: the bytes read, then
// whatever the client sends after them. Its buffer goes back to the pool
// once the transport has read it whole and closed it; a body closed
// unread (a dial that failed) keeps it, for the proxy's retry. The
// transport may close it while it reads it.
type readBody struct {
	mu   sync.Mutex
	r    *bytes.Reader
	buf  *bytes.Buffer // nil once back in the pool
	rest io.ReadCloser
	key  uint64 // the conversation's, from the bytes read
}

func (b *readBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.r.Len() > 0 {
		defer b.mu.Unlock()
		return b.r.Read(p)
	}
	b.mu.Unlock()
	return b.rest.Read(p)
}

func (b *readBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf != nil && b.r.Len() == 0 {
		b.r.Reset(nil)
		if b.buf.Cap() <= maxPooledBody {
			bodyPool.Put(b.buf)
		}
		b.buf = nil
	}
	return nil // the server closes the client's body
}
