// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
)

// The admin API's reads and writes of the registry's keys, answered as
// the admin API's errors.

// Read lists the keys under the prefix, or one key, as etcd has them now.
func (f *Fleet) Read(ctx context.Context, key string) ([]adminapi.RegistryEntry, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	full, opts := f.prefix+"/", []clientv3.OpOption{clientv3.WithPrefix()}
	if key != "" {
		full, opts = f.prefix+"/"+strings.TrimPrefix(key, "/"), nil
	}
	resp, err := f.client.Get(ctx, full, opts...)
	if err != nil {
		return nil, 0, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: fmt.Errorf("the registry (etcd) cannot be reached: %v", err)}
	}
	if key != "" && len(resp.Kvs) == 0 {
		return nil, 0, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no registry key %s", full)}
	}
	entries := make([]adminapi.RegistryEntry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		v := json.RawMessage(kv.Value)
		if !json.Valid(v) {
			v, _ = json.Marshal(string(kv.Value)) // what the watch refuses, shown as text
		}
		entries = append(entries, adminapi.RegistryEntry{Key: strings.TrimPrefix(string(kv.Key), f.prefix+"/"), Value: v, ModRevision: kv.ModRevision})
	}
	return entries, resp.Header.Revision, nil
}

// Write puts or deletes a group's or an alias's key, checked first.
func (f *Fleet) Write(ctx context.Context, req adminapi.RegistryWrite) (int64, error) {
	full := f.prefix + "/" + strings.TrimPrefix(req.Key, "/")
	kind, _, err := registry.ParseKey(f.prefix, full)
	switch {
	case err != nil:
	case kind == registry.KindMember:
		err = fmt.Errorf("members/ keys are the gateways' own, held by their leases")
	case kind == registry.KindSpend:
		err = fmt.Errorf("spend/ keys are the gateways' own books; each writes its own")
	}
	if err == nil && !req.Delete {
		switch kind {
		case registry.KindGroup:
			_, err = registry.DecodeGroup(req.Value)
		case registry.KindAlias:
			_, err = registry.DecodeAlias(req.Value)
		}
	}
	if err != nil {
		return 0, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("registry key %s: %v", req.Key, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var rev int64
	if req.Delete {
		resp, derr := f.client.Delete(ctx, full)
		if derr == nil {
			rev = resp.Header.Revision
		}
		err = derr
	} else {
		resp, perr := f.client.Put(ctx, full, string(req.Value))
		if perr == nil {
			rev = resp.Header.Revision
		}
		err = perr
	}
	if err != nil {
		return 0, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: fmt.Errorf("nothing changed: the registry (etcd) cannot be reached: %v", err)}
	}
	return rev, nil
}
