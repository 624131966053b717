// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
)

// WriteDrain records a group's or endpoint's drain flag in the registry;
// the watch applies it, on this gateway as on the others.
func (f *Fleet) WriteDrain(ctx context.Context, group, endpoint string, drained bool) (int64, error) {
	return f.update(ctx, registry.Key(f.prefix, registry.KindGroup, group), func(raw []byte) ([]byte, error) {
		var rg registry.Group
		if raw != nil {
			var err error
			if rg, err = registry.DecodeGroup(raw); err != nil {
				return nil, err
			}
		}
		if endpoint == "" {
			rg.Drained = drained
		} else {
			i := slices.IndexFunc(rg.Endpoints, func(ep registry.Endpoint) bool { return ep.Address == endpoint })
			if i < 0 {
				rg.Endpoints = append(rg.Endpoints, registry.Endpoint{Address: endpoint})
				i = len(rg.Endpoints) - 1
			}
			rg.Endpoints[i].Drained = drained
		}
		return json.Marshal(rg)
	})
}

// WriteWeight records an alias member's weight in the registry.
func (f *Fleet) WriteWeight(ctx context.Context, alias, group string, w int) (int64, error) {
	return f.update(ctx, registry.Key(f.prefix, registry.KindAlias, alias), func(raw []byte) ([]byte, error) {
		ra := registry.Alias{Weights: map[string]int{}}
		if raw != nil {
			var err error
			if ra, err = registry.DecodeAlias(raw); err != nil {
				return nil, err
			}
		}
		ra.Weights[group] = w
		return json.Marshal(ra)
	})
}

// update changes a key by read, modify and compare-and-swap, again when
// another writer came between.
func (f *Fleet) update(ctx context.Context, key string, change func([]byte) ([]byte, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for range 10 {
		resp, err := f.client.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("the registry (etcd) cannot be reached: %w", err)
		}
		var raw []byte
		var modRev int64
		if len(resp.Kvs) > 0 {
			raw, modRev = resp.Kvs[0].Value, resp.Kvs[0].ModRevision
		}
		value, err := change(raw)
		if err != nil {
			return 0, fmt.Errorf("registry key %s holds a value the gateway refuses (%v): fix or delete it first", key, err)
		}
		txn, err := f.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(value))).Commit()
		if err != nil {
			return 0, fmt.Errorf("the registry (etcd) cannot be reached: %w", err)
		}
		if txn.Succeeded {
			return txn.Header.Revision, nil
		}
	}
	return 0, errors.New("the registry key kept changing under the update; try again")
}

// PutSpend writes a process's book under its spend key, name (not
// leased: a month's spend outlives the process).
func (f *Fleet) PutSpend(ctx context.Context, name string, b registry.Book) error {
	raw, err := json.Marshal(b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = f.client.Put(ctx, registry.Key(f.prefix, registry.KindSpend, name), string(raw))
	return err
}

// PublishedFrom returns the last record of a journal that a gateway's
// book in the registry includes: what a process killed on that journal
// published, however soon after the put it died (its journal's mark may
// not be written yet). 0 when the registry does not answer, or holds
// none (logged to logger when it does not answer).
func (f *Fleet) PublishedFrom(gateway, journal string, logger *zap.Logger) uint64 {
	if journal == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := f.client.Get(ctx, registry.Key(f.prefix, registry.KindSpend, ""), clientv3.WithPrefix())
	if err != nil {
		logger.Warn("registry: could not read what the last process published; counting from the journal's marks", zap.Error(err))
		return 0
	}
	var last uint64
	for _, kv := range resp.Kvs {
		var b registry.Book
		if json.Unmarshal(kv.Value, &b) == nil && b.Journal == journal && b.Gateway == gateway {
			last = max(last, b.JournalSeq)
		}
	}
	return last
}
