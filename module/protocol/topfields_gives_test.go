// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol_test

import (
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// A watched field is given when the body has it, null included; an
// unwatched one never is.
func TestGives(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","priority":3}`:          true,
		`{"model":"m","priority":null}`:       true,
		`{"model":"m","meta":{"priority":1}}`: false,
		`{"model":"m"}`:                       false,
	} {
		top, ok := protocol.Scan([]byte(body), "tier", "priority")
		if !ok || top.Gives("priority") != want || top.Gives("model") {
			t.Errorf("%s: Gives(priority) %v, want %v", body, top.Gives("priority"), want)
		}
	}
}
