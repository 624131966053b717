// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import "github.com/hybridllm/caddy-hybrid-llm/module/protocol"

// asked is what a request asks: its endpoint's API, its body and the
// facts read from it.
type asked struct {
	api      *protocol.API
	stream   bool // the client asked for a stream
	body     []byte
	top      protocol.Request // the body's fields, and where its model is
	features features
}
