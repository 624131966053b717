// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"slices"
	"strings"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
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

// addClient records a client's answer in bucket b.
func (b *ledgerBucketData) addClient(client string, selfHosted bool, prompt, completion int64, cloudUSD float64) {
	i := slices.IndexFunc(b.clients, func(u clientUse) bool { return u.Client == client })
	if i < 0 {
		b.clients = append(b.clients, clientUse{Client: client})
		i = len(b.clients) - 1
	}
	u := &b.clients[i]
	u.PromptTokens += prompt
	u.CompletionTokens += completion
	if selfHosted {
		u.SelfHostedTokens += prompt + completion
	}
	u.CloudUSD += cloudUSD
}

// clientWindow sums each client's use in [from, to), by client name.
func (l *ledger) clientWindow(from, to time.Time) []clientUse {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []clientUse
	for i := range l.buckets {
		b := &l.buckets[i]
		if !b.in(from, to) {
			continue
		}
		for _, u := range b.clients {
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

// apiClientUses are uses as the admin API's ledger answers them.
func apiClientUses(uses []clientUse) []adminapi.ClientUse {
	if uses == nil {
		return nil
	}
	out := make([]adminapi.ClientUse, len(uses))
	for i, u := range uses {
		out[i] = adminapi.ClientUse(u)
	}
	return out
}
