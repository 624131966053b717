// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"testing"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// The drains stored are the drains a new process starts with: groups and
// endpoints alike, and none of those undrained.
func TestDrainsLastInStorage(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	gateway := func() *Gateway {
		g := &Gateway{Name: "gw/1", life: lifetime{storage: st}, logger: zap.NewNop(), Groups: map[string]*Group{}}
		for _, name := range []string{"self", "cloud", "spare"} {
			g.Groups[name] = &Group{shared: &groupShared{endpoints: map[string]*endpointShared{}}}
		}
		loadDrains(st, g.Name, g.Groups, g.logger)
		return g
	}
	g := gateway()
	g.Groups["cloud"].shared.drained.Store(true)
	g.Groups["spare"].shared.drained.Store(true)
	g.Groups["self"].shared.endpoint("10.0.0.5:8000").drained.Store(true)
	g.Groups["self"].shared.endpoint("10.0.0.6:8000")
	if err := saveDrains(context.Background(), st, g.Name, g.Groups); err != nil {
		t.Fatal(err)
	}
	g.Groups["spare"].shared.drained.Store(false) // undrained
	if err := saveDrains(context.Background(), st, g.Name, g.Groups); err != nil {
		t.Fatal(err)
	}

	g = gateway() // a new process
	self := g.Groups["self"].shared
	if !g.Groups["cloud"].shared.drained.Load() || g.Groups["spare"].shared.drained.Load() || self.drained.Load() {
		t.Errorf("groups drained: cloud %v, spare %v, self %v; want only cloud", g.Groups["cloud"].shared.drained.Load(),
			g.Groups["spare"].shared.drained.Load(), self.drained.Load())
	}
	if !self.endpoint("10.0.0.5:8000").drained.Load() || self.endpoint("10.0.0.6:8000").drained.Load() {
		t.Errorf("self's endpoints drained: %v %v; want only 10.0.0.5:8000", self.endpoint("10.0.0.5:8000").drained.Load(),
			self.endpoint("10.0.0.6:8000").drained.Load())
	}
}
