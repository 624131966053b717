// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"slices"
	"strings"
	"time"
)

// The ledger's per-client record: what each client's answers used and
// cost, by the minute for a day (finer than the demand's 10-second
// buckets is not needed to split a window's cost among clients).
const (
	clientLedgerBucket  = time.Minute
	clientLedgerBuckets = 24 * 60
)

// clientUse is one client's use in a bucket or a window.
type clientUse struct {
	Client           string  `json:"client"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	SelfHostedTokens int64   `json:"self_hosted_tokens"`
	CloudUSD         float64 `json:"cloud_usd"`
	// the client's share of the self-hosted fixed cost: its self-hosted
	// tokens at the window's cost per token
	SelfHostedUSD float64 `json:"self_hosted_usd"`
}

type clientLedgerBucketData struct {
	start time.Time
	uses  []clientUse // a handful of clients a minute: searched in order
}

// addClientLocked records a client's answer. l.mu is held.
func (l *ledger) addClientLocked(t time.Time, client string, selfHosted bool, prompt, completion int64, cloudUSD float64) {
	start := t.Truncate(clientLedgerBucket)
	var b *clientLedgerBucketData
	if n := len(l.clientBuckets); n > 0 {
		if last := &l.clientBuckets[(l.clientNext-1+n)%n]; last.start.Equal(start) {
			b = last
		}
	}
	if b == nil {
		if len(l.clientBuckets) < clientLedgerBuckets {
			l.clientBuckets = append(l.clientBuckets, clientLedgerBucketData{start: start})
			l.clientNext = len(l.clientBuckets) % clientLedgerBuckets
			b = &l.clientBuckets[len(l.clientBuckets)-1]
		} else {
			b = &l.clientBuckets[l.clientNext]
			*b = clientLedgerBucketData{start: start, uses: b.uses[:0]}
			l.clientNext = (l.clientNext + 1) % clientLedgerBuckets
		}
	}
	i := slices.IndexFunc(b.uses, func(u clientUse) bool { return u.Client == client })
	if i < 0 {
		b.uses = append(b.uses, clientUse{Client: client})
		i = len(b.uses) - 1
	}
	u := &b.uses[i]
	u.PromptTokens += prompt
	u.CompletionTokens += completion
	if selfHosted {
		u.SelfHostedTokens += prompt + completion
	}
	u.CloudUSD += cloudUSD
}

// clientWindow sums each client's use since t0, by client name.
func (l *ledger) clientWindow(t0 time.Time) []clientUse {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []clientUse
	from := t0.Truncate(clientLedgerBucket)
	for _, b := range l.clientBuckets {
		if b.start.Before(from) {
			continue
		}
		for _, u := range b.uses {
			i := slices.IndexFunc(out, func(o clientUse) bool { return o.Client == u.Client })
			if i < 0 {
				out = append(out, clientUse{Client: u.Client})
				i = len(out) - 1
			}
			o := &out[i]
			o.PromptTokens += u.PromptTokens
			o.CompletionTokens += u.CompletionTokens
			o.SelfHostedTokens += u.SelfHostedTokens
			o.CloudUSD += u.CloudUSD
		}
	}
	slices.SortFunc(out, func(a, b clientUse) int { return strings.Compare(a.Client, b.Client) })
	return out
}
