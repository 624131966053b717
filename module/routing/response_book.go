// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"sync"

	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// ResponseHolder is where a stored response of the Responses API lives:
// the group and model that answered, and for a vLLM group the endpoint
// (each vLLM process keeps its own store).
type ResponseHolder struct {
	Group, Model, Endpoint string
}

// ResponseBook remembers which upstream holds each response the gateway
// passed on, so that a follow-up naming it (previous_response_id) goes
// there: up to a fixed number of responses, the oldest forgotten first.
// It is kept for the process, across config reloads.
type ResponseBook struct {
	mu      sync.Mutex
	holders map[string]ResponseHolder
	order   []string // the ids by age, a ring
	next    int
}

// maxResponses is how many responses a book remembers.
const maxResponses = 1 << 16

var responseBooks = reload.NewPool[*ResponseBook]()

// ResponseBookOf is gateway's book, the same across reloads.
func ResponseBookOf(gateway string) *ResponseBook {
	return responseBooks.Keep(gateway, func() *ResponseBook {
		return &ResponseBook{holders: make(map[string]ResponseHolder)}
	})
}

// Put notes that response id is held by h.
func (b *ResponseBook) Put(id string, h ResponseHolder) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.holders[id]; ok {
		b.holders[id] = h
		return
	}
	if len(b.order) < maxResponses {
		b.order = append(b.order, id)
	} else {
		delete(b.holders, b.order[b.next])
		b.order[b.next] = id
		b.next = (b.next + 1) % maxResponses
	}
	b.holders[id] = h
}

// Forget forgets response id (an answer that did not end whole).
func (b *ResponseBook) Forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.holders, id) // its place in order is reused in turn
}

// Holder is where response id is held, if the book knows.
func (b *ResponseBook) Holder(id string) (ResponseHolder, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.holders[id]
	return h, ok
}
