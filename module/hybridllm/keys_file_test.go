// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
)

// The example keys file is valid, and every setting in it comes through.
func TestExampleKeysFile(t *testing.T) {
	fromFile, err := readKeysFile("../../examples/keys/clients.json")
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Name: "example", Clients: &Clients{}, in: front{aliases: map[string]*Alias{"chat-main": {name: "chat-main"}}}}
	g.in.models = newAliasList(g.in.aliases, time.Time{})
	cs, err := newCallers(g).newSet(nil, fromFile)
	if err != nil {
		t.Fatal(err)
	}
	a := cs.byKey[sha256.Sum256([]byte("sk-team-a-example"))]
	ops := cs.byKey[sha256.Sum256([]byte("sk-ops-example"))]
	if a == nil || a.name != "team-a" || !a.allows("chat-main") || a.rpm != 600 || a.tpm != 200000 || a.ceilings.MaxTokens != 4096 ||
		a.ceilings.Mode != clients.Clamp || a.ceilings.MaxN != 1 || a.budgetDay != 20 || a.budgetMonth != 300 || a.trusted {
		t.Errorf("team-a: %+v", a)
	}
	if ops == nil || !ops.trusted {
		t.Errorf("ops: %+v", ops)
	}
}
