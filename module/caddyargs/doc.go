// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package caddyargs reads the arguments of the gateway's Caddyfile
// directives (durations, limits, counts, shares, prices, on/off) with
// errors that say where and what was wanted, and names the option an
// unknown one was most likely meant to be. It is a leaf: it imports
// nothing of the product.
package caddyargs
