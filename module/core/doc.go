// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package core is the request core: one inference request from its intake
// (the body read and scanned once, the alias, ceilings, colors, the
// client's limits, credentials dropped) through its plan (the alias's
// targets in order, each past its gates) and its attempts (each on its
// group's reverse_proxy, answering into an attempt writer that holds a
// fallback status back and commits at the first byte) to its end (usage
// found or estimated, charged, metered, logged, traced), and the mirror
// copies of it sent. What an API's requests and answers look like is
// package protocol's; what may pass a target over, and what watches
// attempts, is package routing's.
//
// It reads the gateway through a Front, never the Caddy face: it must
// not import package hybridllm.
package core
