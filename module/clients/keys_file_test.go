// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"crypto/sha256"
	"testing"
)

// The example keys file is valid, and every setting in it comes through.
func TestExampleKeysFile(t *testing.T) {
	fromFile, err := readKeysFile("../../examples/keys/clients.json")
	if err != nil {
		t.Fatal(err)
	}
	cr := NewCallers(&Config{}, Setting{Alias: func(name string) bool { return name == "chat-main" },
		Models: func(func(string) bool) []byte { return []byte("[]") }})
	cs, err := cr.newSet(nil, fromFile)
	if err != nil {
		t.Fatal(err)
	}
	a := cs.byKey[sha256.Sum256([]byte("sk-team-a-example"))]
	ops := cs.byKey[sha256.Sum256([]byte("sk-ops-example"))]
	if a == nil || a.Name != "team-a" || !a.Allows("chat-main") || a.RPM != 600 || a.TPM != 200000 || a.Ceilings.MaxTokens != 4096 ||
		a.Ceilings.Mode != Clamp || a.Ceilings.MaxN != 1 || a.BudgetDay != 20 || a.BudgetMonth != 300 || a.Trusted {
		t.Errorf("team-a: %+v", a)
	}
	if ops == nil || !ops.Trusted {
		t.Errorf("ops: %+v", ops)
	}
}
