// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package logkeys keeps client keys out of Caddy's logs: the
// hybrid_llm_keys log field filter and the hybrid_llm log encoder, which
// redact the credentials of a record's request headers and URI (Caddy
// redacts only Authorization and cookies). It knows which names and
// values are credentials from package credentials, and nothing else of
// the product.
package logkeys
