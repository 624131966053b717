// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package money is what a gateway keeps of its books (module/books) and
// asks of them: each answer charged (through the journal when the books
// hold money), the three-way comparison over its groups' prices, the
// self-hosted cost per token and the GPUs a request in flight occupies,
// the spend cap and the clients' budgets checked, the spend book saved
// while the config runs, and, with a registry, this process's book
// published there and the others' taken in.
//
// It knows nothing of routes or targets: the request core charges it and
// asks it whether the cloud is closed to a client. It imports the books,
// the groups' cost models (upstream), the clients' budgets, the fleet and
// the leaves, never the Caddy face.
package money
