// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// ControlPrefix is the path prefix of the endpoints added by WithControl.
const ControlPrefix = "/_sim/"

type healthSetter interface{ SetHealthy(ok bool) }

type failureSetter interface {
	SetFailures(f Failures)
	Failures() Failures
}

type kvSetter interface {
	SetKVFloor(usage float64)
	ClimbKV(to float64, over time.Duration)
	KVStatus() KVStatus
}

// WithControl wraps a simulator (a *VLLM or *Cloud) with runtime control
// endpoints; every other path goes to h. The endpoints need no API key and
// are meant for loopback demos:
//
//	POST /_sim/health    {"healthy":false}   switch /health (vLLM) or /healthz (cloud)
//	POST /_sim/failures  {"error_rate":0.5,"error_status":503,"stall":"2s","cut_after_chunks":3}
//	GET  /_sim/failures  current failure injection, same shape
//	POST /_sim/kv        {"usage":0.9}  or  {"climb_to":0.95,"over":"10s"}  or  {}   (vLLM only)
//	GET  /_sim/kv        KV-cache floor and usage now
//
// POST /_sim/failures replaces the whole setting: absent fields are zero, so
// {} turns failure injection off. All POSTs answer 200 with the new state.
//
// POST /_sim/kv sets a floor under vllm:kv_cache_usage_perc (see
// VLLM.SetKVFloor and VLLM.ClimbKV): "usage" sets it at once; "climb_to"
// moves it linearly from its current value (or from "usage" if given too)
// to climb_to over "over" (a time.ParseDuration string; absent or "0s":
// at once), on the simulator's clock; {} removes it. Values must be in
// [0,1]; unknown fields are refused. Both methods answer
//
//	{"floor":0.5,"from":0.05,"climb_to":0.95,"over":"10s","remaining":"5s",
//	 "kv_cache_usage_perc":[0.5],"model_usage":[0.01],"num_gpu_blocks":32768}
//
// floor being the floor now, kv_cache_usage_perc what each engine's
// /metrics series reads now and model_usage the usage of its running
// requests alone.
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
		case "kv":
			ks, ok := h.(kvSetter)
			if !ok {
				controlError(w, http.StatusNotFound, "this simulator has no KV cache")
				return
			}
			switch r.Method {
			case http.MethodGet:
			case http.MethodPost:
				if err := setKV(ks, r, w); err != nil {
					controlError(w, http.StatusBadRequest, err.Error())
					return
				}
			default:
				controlMethod(w, http.MethodGet+", "+http.MethodPost)
				return
			}
			writeJSON(w, http.StatusOK, ks.KVStatus())
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

// setKV applies a POST /_sim/kv body.
func setKV(ks kvSetter, r *http.Request, w http.ResponseWriter) error {
	var body struct {
		Usage   *float64 `json:"usage"`
		ClimbTo *float64 `json:"climb_to"`
		Over    *string  `json:"over"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return err
	}
	for name, v := range map[string]*float64{"usage": body.Usage, "climb_to": body.ClimbTo} {
		if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 1) {
			return fmt.Errorf("%s must be in [0,1]", name)
		}
	}
	var over time.Duration
	if body.Over != nil {
		if body.ClimbTo == nil {
			return errors.New(`"over" needs "climb_to"`)
		}
		d, err := time.ParseDuration(*body.Over)
		if err != nil {
			return fmt.Errorf("over: %w", err)
		}
		if d < 0 {
			return errors.New("over must not be negative")
		}
		over = d
	}
	start := 0.0
	if body.Usage != nil {
		start = *body.Usage
	}
	if body.Usage != nil || body.ClimbTo == nil {
		ks.SetKVFloor(start)
	}
	if body.ClimbTo != nil {
		ks.ClimbKV(*body.ClimbTo, over)
	}
	return nil
}
