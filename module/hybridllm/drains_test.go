// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"testing"

	"github.com/caddyserver/certmagic"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// The drains stored are the drains a new process starts with: groups and
// endpoints alike, and none of those undrained.
func TestDrainsLastInStorage(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	gateway := func() *Gateway {
		g := &Gateway{Name: "gw/1", life: lifetime{storage: st}, logger: zap.NewNop(), Groups: map[string]*Group{}}
		for _, name := range []string{"self", "cloud", "spare"} {
			g.Groups[name] = &Group{Shared: upstream.NewGroupState()}
		}
		loadDrains(st, g.Name, g.Groups, g.logger)
		return g
	}
	g := gateway()
	g.Groups["cloud"].Shared.Drained.Store(true)
	g.Groups["spare"].Shared.Drained.Store(true)
	g.Groups["self"].Shared.Endpoint("10.0.0.5:8000").Drained.Store(true)
	g.Groups["self"].Shared.Endpoint("10.0.0.6:8000")
	if err := saveDrains(context.Background(), st, g.Name, g.Groups); err != nil {
		t.Fatal(err)
	}
	g.Groups["spare"].Shared.Drained.Store(false) // undrained
	if err := saveDrains(context.Background(), st, g.Name, g.Groups); err != nil {
		t.Fatal(err)
	}

	g = gateway() // a new process
	self := g.Groups["self"].Shared
	if !g.Groups["cloud"].Shared.Drained.Load() || g.Groups["spare"].Shared.Drained.Load() || self.Drained.Load() {
		t.Errorf("groups drained: cloud %v, spare %v, self %v; want only cloud", g.Groups["cloud"].Shared.Drained.Load(),
			g.Groups["spare"].Shared.Drained.Load(), self.Drained.Load())
	}
	if !self.Endpoint("10.0.0.5:8000").Drained.Load() || self.Endpoint("10.0.0.6:8000").Drained.Load() {
		t.Errorf("self's endpoints drained: %v %v; want only 10.0.0.5:8000", self.Endpoint("10.0.0.5:8000").Drained.Load(),
			self.Endpoint("10.0.0.6:8000").Drained.Load())
	}
}
