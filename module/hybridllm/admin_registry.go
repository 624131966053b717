// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
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
		entries, rev, err := f.Read(r.Context(), r.URL.Query().Get("key"))
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"gateway": g.Name, "prefix": f.Prefix(), "revision": rev, "applied_revision": g.reg.Rev.Load(), "keys": entries})
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
		rev, err := f.Write(r.Context(), req)
		if err != nil {
			return err
		}
		g.reg.Await(rev)
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

func fleetOf(g *Gateway) (*fleet.Fleet, error) {
	if g.reg == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("gateway %q has no registry", g.Name)}
	}
	return g.reg.Fleet, nil
}
