// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import "github.com/hybridllm/caddy-hybrid-llm/module/protocol"

// Asked is what a request asks: its endpoint's API, its body and the
// facts read from it.
type Asked struct {
	API      *protocol.API
	Stream   bool // the client asked for a stream
	Body     []byte
	Top      protocol.Request // the body's fields, and where its model is
	Features Features
}
