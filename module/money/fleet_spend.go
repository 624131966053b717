// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package money

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/hybridllm/caddy-hybrid-llm/module/proclock"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
)

// Cloud spend across a fleet: each gateway process publishes its book to
// the registry (under its process ID and the gateway's name, not leased:
// a month's spend outlives the process), and adds the others' books of
// the same gateway name to its own when it checks the spend cap and the
// client budgets. The sum is eventually consistent: what another replica
// spent shows here within fleetSpendInterval plus the watch's delay, so
// the fleet can overshoot a cap by what the other replicas spend in that
// time, besides the requests in flight when it is reached.
//
// The process ID is Caddy's instance ID (kept in the data directory) with
// the pid and a random part: two processes that share a data directory
// (with storages of their own, or on a shared volume) publish two books,
// never one that each overwrites with half the fleet's spend. A restarted
// process starts a book of its own from zero, and the book of its last
// run stays in the registry and counts, as any other process's, for its
// day and month: the spend of a process that exited is never lost, and
// never counted twice (so with a registry the book is not kept in Caddy's
// storage: the registry keeps it). What a process spent after its last
// publication, when it was killed, is in its journal (see module/books),
// which marks each publication: the next process on the same storage
// starts its own book with the charges after the last mark.

// fleetSpendInterval is how often a gateway publishes its book when it
// changed.
const fleetSpendInterval = 2 * time.Second

// spendName is the registry name of this process's book of a gateway.
func spendName(gateway string) string {
	id := ProcessID()
	if id == "" {
		return "" // not published: the others cannot count it
	}
	return id + "." + proclock.FileName(gateway)
}

// ProcessID names this process among all gateway processes: Caddy's
// instance ID, the pid and a random part; "" without an instance ID.
func ProcessID() string { return processID() }

var processID = sync.OnceValue(func() string {
	id, err := caddy.InstanceID()
	if err != nil {
		return ""
	}
	var r [8]byte // a container's pid is 1 on every start
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s-%d-%x", id, os.Getpid(), r)
})

// FleetBook is this process's book of a gateway in its registry: what it
// publishes there, and what it takes of the others' books.
type FleetBook struct {
	fleet   *fleet.Fleet
	book    *books.SpendBook
	gateway string
	name    string // its name in the registry; "": not published
	clock   clock.Clock
	logger  *zap.Logger
}

// NewFleetBook is this process's book of gateway gw in registry f.
func NewFleetBook(f *fleet.Fleet, book *books.SpendBook, gw string, c clock.Clock, logger *zap.Logger) *FleetBook {
	return &FleetBook{fleet: f, book: book, gateway: gw, name: spendName(gw), clock: c, logger: logger}
}

// Apply takes the others' books from a snapshot.
func (fb *FleetBook) Apply(s *registry.Snapshot) {
	if fb == nil {
		return
	}
	t := fb.clock.Now().UTC()
	total, clients := s.Spent(fb.gateway, fb.name, t.Format(time.DateOnly), t.Format("2006-01"))
	fb.book.SetOthers(total, clients)
}

// Publish writes the book to the registry whenever it changed, every
// fleetSpendInterval, until the config stops; Cleanup writes it once
// more (see Final).
func (fb *FleetBook) Publish(ctx context.Context) {
	if fb == nil || fb.name == "" {
		return
	}
	var published uint64
	var day string
	loop.Loop{Name: "spend publisher", Every: fleetSpendInterval, Logger: fb.logger}.Go(ctx, nil, func(ctx context.Context) {
		b, v, seq := fb.book.Publication(fb.gateway, fb.clock.Now())
		if v == published && b.Total.Day == day {
			fb.book.MarkPublished(seq) // what is published has not changed since
			return
		}
		if err := fb.fleet.PutSpend(ctx, fb.name, b); err != nil {
			fb.logger.Debug("registry: could not publish the cloud spend; trying again", zap.Error(err))
			return
		}
		published, day = v, b.Total.Day
		fb.book.MarkPublished(seq)
	})
}

// Final writes the book once more as the config stops, before the
// registry's client may close: the others count this process's last
// spend too (the key outlives it).
func (fb *FleetBook) Final() {
	if fb == nil || fb.name == "" {
		return
	}
	b, _, seq := fb.book.Publication(fb.gateway, fb.clock.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := fb.fleet.PutSpend(ctx, fb.name, b); err != nil {
		fb.logger.Warn("registry: could not publish the cloud spend as the config stops", zap.Error(err))
		return
	}
	fb.book.MarkPublished(seq)
}
