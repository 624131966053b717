// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package adminapi is the JSON of the gateway's admin API: the documents
// its routes under /hybrid_llm/ answer with, the bodies its POST routes
// read, and the routes' paths. The gateway (package hybridllm) fills and
// serves these types; the `caddy hybrid-llm` command (package command)
// reads them. Field names, JSON tags and their order are the API's
// stable, documented schema (README: "Admin API"): a change here is a
// change of the answers.
//
// It holds types only, no behaviour of the gateway. It must not import
// package hybridllm, package command, Caddy or any other part of the
// product except the leaf packages whose types its documents embed
// (cost, for the ledger's comparison).
package adminapi

// The admin API's routes, on Caddy's admin listener.
const (
	PathState       = "/hybrid_llm/state"        // GET: StateDoc
	PathLedger      = "/hybrid_llm/ledger"       // GET: LedgerDoc
	PathClients     = "/hybrid_llm/clients"      // GET: ClientsList
	PathDrain       = "/hybrid_llm/drain"        // POST ActionRequest
	PathUndrain     = "/hybrid_llm/undrain"      // POST ActionRequest
	PathDrill       = "/hybrid_llm/drill"        // POST ActionRequest: DrillResult by target
	PathSpendAccept = "/hybrid_llm/spend/accept" // POST ActionRequest
	PathWeight      = "/hybrid_llm/weight"       // POST ActionRequest
	PathRegistry    = "/hybrid_llm/registry"     // GET: RegistryEntry by key; POST RegistryWrite
)
