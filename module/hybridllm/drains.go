// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// Drains set through the admin API without a registry persist in Caddy's
// storage, a key per gateway listing its drained groups and endpoints: it
// is rewritten on every drain and undrain, and read as the gateway is
// provisioned, before it serves, so that a restart keeps what an operator
// took out. With a registry the registry keeps them.

// storedDrains is a gateway's drains as stored.
type storedDrains struct {
	Groups    []string            `json:"groups,omitempty"`
	Endpoints map[string][]string `json:"endpoints,omitempty"` // by group
}

func drainsKey(gateway string) string {
	return "hybrid_llm/drains/" + url.PathEscape(gateway) + ".json"
}

// drainsMu orders the writes of the drains.
var drainsMu sync.Mutex

// loadDrains drains what the drains of gateway gw stored in st name,
// among its groups. It only ever drains: a drain kept in memory since an
// earlier config stays.
func loadDrains(st certmagic.Storage, gw string, groups map[string]*Group, logger *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := st.Load(ctx, drainsKey(gw))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var d storedDrains
	if err == nil {
		err = json.Unmarshal(raw, &d)
	}
	if err != nil {
		logger.Error("the drains in storage could not be read; groups and endpoints drained before are not drained now",
			zap.String("key", drainsKey(gw)), zap.Error(err))
		return
	}
	for _, name := range d.Groups {
		if grp := groups[name]; grp != nil && grp.Shared != nil && !grp.Shared.Drained.Swap(true) {
			logger.Info("drained, as before the restart", zap.String("group", name))
		}
	}
	for _, name := range sortedKeys(d.Endpoints) {
		grp := groups[name]
		if grp == nil || grp.Shared == nil {
			continue
		}
		for _, dial := range d.Endpoints[name] {
			if !grp.Shared.Endpoint(dial).Drained.Swap(true) {
				logger.Info("drained, as before the restart", zap.String("group", name), zap.String("endpoint", dial))
			}
		}
	}
}

// saveDrains stores the drains of gateway gw's groups as they are now.
func saveDrains(ctx context.Context, st certmagic.Storage, gw string, groups map[string]*Group) error {
	drainsMu.Lock()
	defer drainsMu.Unlock()
	var d storedDrains
	for _, name := range sortedKeys(groups) {
		gs := groups[name].Shared
		if gs == nil {
			continue
		}
		if gs.Drained.Load() {
			d.Groups = append(d.Groups, name)
		}
		if dials := gs.DrainedEndpoints(); len(dials) > 0 {
			if d.Endpoints == nil {
				d.Endpoints = map[string][]string{}
			}
			d.Endpoints[name] = dials
		}
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return st.Store(ctx, drainsKey(gw), raw)
}
