// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

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
	id := processID()
	if id == "" {
		return "" // not published: the others cannot count it
	}
	return id + "." + proclock.FileName(gateway)
}

// processID names this process among all gateway processes: Caddy's
// instance ID, the pid and a random part; "" without an instance ID.
var processID = sync.OnceValue(func() string {
	id, err := caddy.InstanceID()
	if err != nil {
		return ""
	}
	var r [8]byte // a container's pid is 1 on every start
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s-%d-%x", id, os.Getpid(), r)
})

// applySpend takes the others' books from a snapshot.
func (g *Gateway) applySpend(s *registry.Snapshot) {
	if g.money.spend == nil {
		return
	}
	t := g.clock.Now().UTC()
	total, clients := s.Spent(g.Name, g.spendName, t.Format(time.DateOnly), t.Format("2006-01"))
	g.money.spend.SetOthers(total, clients)
}

// publishSpend writes the gateway's book to the registry whenever it
// changed, every fleetSpendInterval, until the config stops; Cleanup
// writes it once more (see finalSpend).
func (g *Gateway) publishSpend(ctx context.Context) {
	if g.spendName == "" {
		return
	}
	var published uint64
	var day string
	loop.Loop{Name: "spend publisher", Every: fleetSpendInterval, Logger: g.logger}.Go(ctx, nil, func(ctx context.Context) {
		b, v, seq := g.money.spend.Publication(g.Name, g.clock.Now())
		if v == published && b.Total.Day == day {
			g.money.spend.MarkPublished(seq) // what is published has not changed since
			return
		}
		if err := g.putSpend(ctx, b); err != nil {
			g.logger.Debug("registry: could not publish the cloud spend; trying again", zap.Error(err))
			return
		}
		published, day = v, b.Total.Day
		g.money.spend.MarkPublished(seq)
	})
}

// putSpend writes a book under the gateway's spend key.
func (g *Gateway) putSpend(ctx context.Context, b registry.Book) error {
	return g.fleet.PutSpend(ctx, g.spendName, b)
}

// finalSpend writes the book once more as the config stops, before the
// registry's client may close: the others count this process's last
// spend too (the key outlives it).
func (g *Gateway) finalSpend() {
	if g.fleet == nil || g.money.spend == nil || g.spendName == "" || g.begun == nil || !g.begun.Load() {
		return
	}
	b, _, seq := g.money.spend.Publication(g.Name, g.clock.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := g.putSpend(ctx, b); err != nil {
		g.logger.Warn("registry: could not publish the cloud spend as the config stops", zap.Error(err))
		return
	}
	g.money.spend.MarkPublished(seq)
}

// publishedFrom returns the last record of a journal that a book in the
// registry includes: what a process killed on that journal published,
// however soon after the put it died (its journal's mark may not be
// written yet). 0 when the registry does not answer, or holds none.
func (g *Gateway) publishedFrom(journal string) uint64 {
	if g.fleet == nil {
		return 0
	}
	return g.fleet.PublishedFrom(g.Name, journal)
}
