// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// A model value spelled with escapes names its alias all the same.
func TestAnEscapedModelFindsItsAlias(t *testing.T) {
	f, _ := protocol.Scan([]byte(`{"model":"chat\u002dmain"}`))
	g := newFront(Front{Aliases: map[string]*routing.Alias{"chat-main": {Name: "chat-main"}}})
	if al, ok := aliasNamed(g.Aliases, &f); !ok || al.Name != "chat-main" {
		t.Errorf("escaped value %s not found as chat-main", f.Model)
	}
}
