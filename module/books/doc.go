// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package books is a gateway's money and demand: the ledger (the demand
// in GPU equivalents, the tokens, the cloud spend and each client's
// share, in one-minute buckets for 31 days), the cloud spend book (by
// UTC day and month, in all and per client, with what requests in flight
// hold of it and, with a registry, what the fleet's other processes
// spent), and how both last: across config reloads (kept by gateway
// name), restarts (snapshots in Caddy's storage) and crashes (the
// journal's records replayed past the snapshots).
//
// It knows nothing of requests, targets or prices: the gateway charges
// it what a request cost, occupies it while an attempt runs, and asks it
// what was spent. It imports the product's leaves (journal, cost,
// adminapi, registry's types, clock, loop, reload) and never the Caddy
// face.
package books
