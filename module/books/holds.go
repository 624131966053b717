// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import "sync"

// Holds are the USD that requests in flight on priced cloud targets
// reserved, in all and by client; a book's, so that they outlive a
// reload with the requests. Who reads them to decide whether to take
// more holds them locked meanwhile (Lock, Unlock).
type Holds struct {
	mu      sync.Mutex
	total   float64
	clients map[string]float64
}

// Lock locks the holds.
func (h *Holds) Lock() { h.mu.Lock() }

// Unlock unlocks them.
func (h *Holds) Unlock() { h.mu.Unlock() }

// TotalLocked is what all requests in flight hold. The caller holds the
// lock.
func (h *Holds) TotalLocked() float64 { return h.total }

// ClientLocked is what a client's requests in flight hold. The caller
// holds the lock.
func (h *Holds) ClientLocked(client string) float64 { return h.clients[client] }

// TakeLocked adds usd held for client (none: the spend cap only). The
// caller holds the lock.
func (h *Holds) TakeLocked(client string, usd float64) {
	h.total += usd
	if client != "" {
		if h.clients == nil {
			h.clients = map[string]float64{}
		}
		h.clients[client] += usd
	}
}

// Give takes usd held for client (none: the spend cap only) off the
// holds.
func (h *Holds) Give(client string, usd float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total = max(0, h.total-usd)
	if client != "" && h.clients != nil {
		if v := h.clients[client] - usd; v > 1e-12 {
			h.clients[client] = v
		} else {
			delete(h.clients, client)
		}
	}
}

// Held returns what all requests in flight hold, and what each client's
// do.
func (h *Holds) Held() (total float64, clients map[string]float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	clients = make(map[string]float64, len(h.clients))
	for k, v := range h.clients {
		clients[k] = v
	}
	return h.total, clients
}
