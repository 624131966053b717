// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
)

// serveRegistry answers GET /hybrid_llm/registry[?gateway=&key=] with
// what etcd holds under the gateway's prefix (or one key), and POST with
// an adminapi.RegistryWrite: the value is checked as the watch checks it, written,
// and applied here before the answer.
func serveRegistry(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		g, err := gatewayNamed(r.URL.Query().Get("gateway"))
		if err != nil {
			return err
		}
		f, err := fleetOf(g)
		if err != nil {
			return err
		}
		entries, rev, err := f.read(r.Context(), r.URL.Query().Get("key"))
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"gateway": g.Name, "prefix": f.prefix, "revision": rev, "applied_revision": g.applied.rev.Load(), "keys": entries})
	case http.MethodPost:
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			return caddy.APIError{HTTPStatus: http.StatusUnsupportedMediaType, Err: fmt.Errorf("Content-Type must be application/json")}
		}
		var req adminapi.RegistryWrite
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("decoding request: %v", err)}
		}
		g, err := gatewayNamed(req.Gateway)
		if err != nil {
			return err
		}
		f, err := fleetOf(g)
		if err != nil {
			return err
		}
		rev, err := f.write(r.Context(), req)
		if err != nil {
			return err
		}
		g.awaitRegistry(rev)
		verb := "put"
		if req.Delete {
			verb = "deleted"
		}
		g.logger.Warn("registry key "+verb+" through the admin API", zap.String("key", req.Key))
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(map[string]any{"gateway": g.Name, "key": req.Key, "revision": rev})
	}
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET or POST", r.Method)}
}

func fleetOf(g *Gateway) (*fleet, error) {
	if g.fleet == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("gateway %q has no registry", g.Name)}
	}
	return g.fleet, nil
}

// read lists the keys under the prefix, or one key, as etcd has them now.
func (f *fleet) read(ctx context.Context, key string) ([]adminapi.RegistryEntry, int64, error) {
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

// write puts or deletes a group's or an alias's key, checked first.
func (f *fleet) write(ctx context.Context, req adminapi.RegistryWrite) (int64, error) {
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
