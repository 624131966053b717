// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"sync/atomic"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// rateLimit is a per-minute limit kept as a generic cell rate (GCRA): tat
// is the time at which the client's use so far would be paid off at the
// limit's pace; a request is let in while that is less than a minute
// ahead. It needs one atomic word, and it knows when the next request may
// come.
type rateLimit struct {
	tat atomic.Int64 // unix nanoseconds
}

// window is the span a per-minute limit is counted over.
const window = time.Minute

// wait returns how long until the client is back under the limit (0: it
// is now). perMinute is the limit.
func (l *rateLimit) wait(perMinute int, t time.Time) time.Duration {
	if perMinute <= 0 {
		return 0
	}
	interval := window / time.Duration(perMinute)
	ahead := time.Duration(l.tat.Load() - t.UnixNano())
	return max(0, ahead+interval-window)
}

// take lets in one unit (a request) if the limit allows, and reports how
// long to wait otherwise.
func (l *rateLimit) take(perMinute int, t time.Time) time.Duration {
	w, _ := l.reserve(perMinute, 1, t)
	return w
}

// reserve lets in units (a request's tokens) if the limit has room for
// one more unit now, and reports how long to wait otherwise: what it lets
// in may go over the limit by at most those units. What it lets in is
// reserved until the time it returns, when the limit's pace has paid it
// off (see giveBack).
func (l *rateLimit) reserve(perMinute int, units int64, t time.Time) (wait time.Duration, until time.Time) {
	if perMinute <= 0 {
		return 0, time.Time{}
	}
	interval := int64(window / time.Duration(perMinute))
	n := t.UnixNano()
	for {
		tat := l.tat.Load()
		base := max(tat, n)
		if over := base + interval - n - int64(window); over > 0 {
			return time.Duration(over), time.Time{}
		}
		if next := base + interval*units; l.tat.CompareAndSwap(tat, next) {
			return 0, time.Unix(0, next)
		}
	}
}

// giveBack returns at t the units a reservation took (at perMinute, and
// held until until) and did not use: only the part of it still ahead of
// t. The part that elapsed was paid off by the time that passed; giving
// it back too would take it from the reservations made after it, and let
// the client past its limit.
func (l *rateLimit) giveBack(perMinute int, units int64, until, t time.Time) {
	if perMinute <= 0 || units <= 0 {
		return
	}
	back := min(int64(window/time.Duration(perMinute))*units, until.UnixNano()-t.UnixNano())
	if back > 0 {
		l.tat.Add(-back)
	}
}

// charge adds units (tokens) used at t, after the fact (what a
// reservation did not use goes back through giveBack).
func (l *rateLimit) charge(perMinute int, units int64, t time.Time) {
	if perMinute <= 0 || units <= 0 {
		return
	}
	cost := int64(window/time.Duration(perMinute)) * units
	n := t.UnixNano()
	for {
		tat := l.tat.Load()
		if l.tat.CompareAndSwap(tat, max(tat, n)+cost) {
			return
		}
	}
}

// clientUsage is what a client has used, kept by gateway and client name
// for the life of the process, so that it lasts across config reloads
// and a client that a keys file drops and adds back finds its minute as
// it left it.
type clientUsage struct {
	requests, tokens rateLimit
}

var clientUsages = reload.NewPool[*clientUsage]()

// usageOf returns the usage of a client of a gateway.
func usageOf(gateway, client string) *clientUsage {
	return clientUsages.Keep(reload.Key(gateway, client), func() *clientUsage { return new(clientUsage) })
}

// limits returns the client's per-minute limits on this gateway. With a
// registry they are its share among the fleet's live gateways, split as
// the red lines are (registry.Share) but never below one, so that the
// fleet together allows the configured limit: exactly, when the limit is
// at least the number of gateways.
func (c *client) limits() (rpm, tpm int) {
	rpm, tpm = c.rpm, c.tpm
	if c.fleet == nil {
		return rpm, tpm
	}
	if sh := c.fleet.Load(); sh != nil && sh.n > 1 {
		rpm, tpm = fleetLimit(rpm, sh), fleetLimit(tpm, sh)
	}
	return rpm, tpm
}

func fleetLimit(limit int, sh *fleetShare) int {
	if limit <= 0 {
		return limit
	}
	return max(1, registry.Share(limit, sh.rank, sh.n))
}
