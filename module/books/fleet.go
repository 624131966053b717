// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import (
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
)

// With a registry, each gateway process publishes its book there (see
// Publication), and adds the others' books of the same gateway name to
// its own when it checks the spend cap and the client budgets (see
// SetOthers): the sum is eventually consistent. The journal marks what
// each publication includes (MarkPublished), so that the next process on
// the same storage starts its own book with the charges after the last
// mark (see ReplayPending).

// others is what the fleet's other processes spent, as last read.
type others struct {
	total   registry.Spend
	clients map[string]registry.Spend
}

// add counts the others' spend into a day and month of this book; theirs
// counts only for the same day and month.
func (o *others) add(s *Spend, client string) {
	from := o.total
	if client != "" {
		from = o.clients[client]
	}
	if from.Day == s.Day {
		s.DayUSD += from.DayUSD
	}
	if from.Month == s.Month {
		s.MonthUSD += from.MonthUSD
	}
}

// SetOthers takes what the fleet's other processes spent, in all and by
// client, from a snapshot of the registry.
func (b *SpendBook) SetOthers(total registry.Spend, clients map[string]registry.Spend) {
	b.fleet.others.Store(&others{total: total, clients: clients})
}

// Publication is the book as published: the total, and the clients that
// spent this month; with its version and, with a journal, the last
// record it includes.
func (b *SpendBook) Publication(gateway string, t time.Time) (book registry.Book, version, seq uint64) {
	var id string
	if j := b.journal.Load(); j != nil {
		j.Lock()
		defer j.Unlock()
		seq, id = j.SeqLocked(), j.ID()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total.roll(t)
	rb := registry.Book{Gateway: gateway, Total: registry.Spend(b.total), Journal: id, JournalSeq: seq}
	for name, s := range b.clients {
		s.roll(t)
		if s.MonthUSD > 0 {
			if rb.Clients == nil {
				rb.Clients = map[string]registry.Spend{}
			}
			rb.Clients[name] = registry.Spend(*s)
		}
	}
	return rb, b.fleet.version, seq
}

// MarkPublished marks in the journal, if any, that the book published
// includes its records up to seq.
func (b *SpendBook) MarkPublished(seq uint64) {
	if j := b.journal.Load(); j != nil {
		j.MarkPublished(seq)
	}
}
