// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package reload keeps what must outlive a config reload. Caddy
// provisions a new config before it cleans up the one it replaces, so a
// value that both use is found by the new one and let go by the old one:
// a Pool counts who holds each value (over caddy.UsagePool), makes it for
// the first and destroys it after the last. What must outlive the configs
// that use it (a client's spend, a weight set by hand) is kept for the
// life of the process instead (Keep). Keys name what they keep by parts
// (Key), never by a separator a name could hold. It is a leaf: it imports
// nothing of the product.
package reload

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// Pool is a reference-counted store of one kind of value, by key. The
// zero Pool is not usable: see NewPool.
type Pool[V any] struct{ up *caddy.UsagePool }

// NewPool returns an empty pool.
func NewPool[V any]() *Pool[V] { return &Pool[V]{up: caddy.NewUsagePool()} }

// held is a value in the pool: it destroys the value, when the value is
// a caddy.Destructor, once nothing holds it.
type held[V any] struct{ v V }

func (h *held[V]) Destruct() error {
	if d, ok := any(h.v).(caddy.Destructor); ok {
		return d.Destruct()
	}
	return nil
}

// Acquire returns the key's value and holds it, making it with make when
// nothing holds it yet (made then reports true). make runs once for a key
// however many acquire it at once; an error from it leaves nothing held.
// Each Acquire that succeeded is matched by one Release.
func (p *Pool[V]) Acquire(key string, make func() (V, error)) (v V, made bool, err error) {
	val, loaded, err := p.up.LoadOrNew(key, func() (caddy.Destructor, error) {
		v, err := make()
		if err != nil {
			return nil, err
		}
		return &held[V]{v: v}, nil
	})
	if err != nil {
		return v, false, err
	}
	return val.(*held[V]).v, !loaded, nil
}

// Keep returns the key's value, making it with make the first time; it is
// kept for the life of the process, whatever configs come and go.
func (p *Pool[V]) Keep(key string, make func() V) V {
	val, _, _ := p.up.LoadOrNew(key, func() (caddy.Destructor, error) {
		return &held[V]{v: make()}, nil
	})
	return val.(*held[V]).v
}

// Release lets go of one hold on the key's value; after the last, the
// value leaves the pool and is destroyed, and Release returns what its
// Destruct returned.
func (p *Pool[V]) Release(key string) error {
	_, err := p.up.Delete(key)
	return err
}

// Range calls f with each key and value in the pool, until f returns
// false.
func (p *Pool[V]) Range(f func(key string, v V) bool) {
	p.up.Range(func(k, val any) bool { return f(k.(string), val.(*held[V]).v) })
}

// Holds is how many hold the key's value; 0 when it is not in the pool.
func (p *Pool[V]) Holds(key string) int {
	n, _ := p.up.References(key)
	return n
}

// Key names a value by its parts (a gateway's name, an alias's, ...),
// joined by a byte no name holds, so that no two lists of parts make the
// same key.
func Key(parts ...string) string { return strings.Join(parts, "\x00") }
