// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ControlPrefix is the path prefix of the endpoints added by WithControl.
const ControlPrefix = "/_sim/"

type healthSetter interface{ SetHealthy(ok bool) }

type failureSetter interface {
	SetFailures(f Failures)
	Failures() Failures
}

// WithControl wraps a simulator (a *VLLM or *Cloud) with runtime control
// endpoints; every other path goes to h. The endpoints need no API key and
// are meant for loopback demos:
//
//	POST /_sim/health    {"healthy":false}   switch /health (vLLM) or /healthz (cloud)
//	POST /_sim/failures  {"error_rate":0.5,"error_status":503,"stall":"2s","cut_after_chunks":3}
//	GET  /_sim/failures  current failure injection, same shape
//
// POST /_sim/failures replaces the whole setting: absent fields are zero, so
// {} turns failure injection off. Both POSTs answer 200 with the new state.
func WithControl(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, ControlPrefix)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		switch name {
		case "health":
			hs, ok := h.(healthSetter)
			if !ok {
				controlError(w, http.StatusNotFound, "this simulator has no switchable health")
				return
			}
			if r.Method != http.MethodPost {
				controlMethod(w, http.MethodPost)
				return
			}
			var body struct {
				Healthy *bool `json:"healthy"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.Healthy == nil {
				controlError(w, http.StatusBadRequest, `body must be {"healthy":true|false}`)
				return
			}
			hs.SetHealthy(*body.Healthy)
			writeJSON(w, http.StatusOK, map[string]bool{"healthy": *body.Healthy})
		case "failures":
			fs, ok := h.(failureSetter)
			if !ok {
				controlError(w, http.StatusNotFound, "this handler has no failure injection")
				return
			}
			switch r.Method {
			case http.MethodGet:
			case http.MethodPost:
				var f Failures
				if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&f); err != nil {
					controlError(w, http.StatusBadRequest, err.Error())
					return
				}
				fs.SetFailures(f)
			default:
				controlMethod(w, http.MethodGet+", "+http.MethodPost)
				return
			}
			writeJSON(w, http.StatusOK, fs.Failures())
		default:
			controlError(w, http.StatusNotFound, "unknown control endpoint")
		}
	})
}

func controlError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func controlMethod(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	controlError(w, http.StatusMethodNotAllowed, "method not allowed")
}
