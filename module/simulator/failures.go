// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"
)

// Failures is runtime failure injection, shared by both simulators. It
// applies to completion, chat-completion and embedding requests only;
// /v1/models, /health and /metrics are never affected.
type Failures struct {
	// ErrorRate is the fraction in [0,1] of requests answered with
	// ErrorStatus. Selection is deterministic: counting requests that pass
	// validation since the last SetFailures as n = 1, 2, 3, …, request n
	// fails when floor(n·ErrorRate) > floor((n-1)·ErrorRate). So 0.5 fails
	// every second request, 0.25 every fourth and 1 all of them.
	ErrorRate float64
	// ErrorStatus is the status of injected errors (default 500). The body
	// is in the simulator's own error shape; a 401 is a rejected key and a
	// 404 says the requested model does not exist.
	ErrorStatus int
	// Stall delays the request before it is examined at all, so before any
	// response header is written. It ends early when the client goes away.
	Stall time.Duration
	// CutAfterChunks > 0 makes a streamed response abort the connection
	// after that many SSE data events (the chat role event counts): no
	// [DONE] and no chunked-encoding terminator, so the client sees an
	// abrupt close. A non-streamed response writes half its body (with the
	// full Content-Length) and then aborts.
	CutAfterChunks int
}

type failuresJSON struct {
	ErrorRate      float64 `json:"error_rate"`
	ErrorStatus    int     `json:"error_status"`
	Stall          string  `json:"stall"`
	CutAfterChunks int     `json:"cut_after_chunks"`
}

// MarshalJSON encodes f as
// {"error_rate":0.5,"error_status":503,"stall":"2s","cut_after_chunks":3}.
func (f Failures) MarshalJSON() ([]byte, error) {
	return json.Marshal(failuresJSON{
		ErrorRate:      f.ErrorRate,
		ErrorStatus:    f.ErrorStatus,
		Stall:          f.Stall.String(),
		CutAfterChunks: f.CutAfterChunks,
	})
}

// UnmarshalJSON decodes the form written by MarshalJSON. Absent fields are
// zero; "stall" is a time.ParseDuration string. The result is validated.
func (f *Failures) UnmarshalJSON(b []byte) error {
	var j failuresJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Failures{ErrorRate: j.ErrorRate, ErrorStatus: j.ErrorStatus, CutAfterChunks: j.CutAfterChunks}
	if j.Stall != "" {
		d, err := time.ParseDuration(j.Stall)
		if err != nil {
			return fmt.Errorf("stall: %w", err)
		}
		out.Stall = d
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*f = out
	return nil
}

// Validate reports whether f is usable.
func (f Failures) Validate() error {
	switch {
	case math.IsNaN(f.ErrorRate) || f.ErrorRate < 0 || f.ErrorRate > 1:
		return errors.New("error_rate must be in [0,1]")
	case f.ErrorStatus != 0 && (f.ErrorStatus < 400 || f.ErrorStatus > 599):
		return errors.New("error_status must be a 4xx or 5xx status")
	case f.Stall < 0:
		return errors.New("stall must not be negative")
	case f.CutAfterChunks < 0:
		return errors.New("cut_after_chunks must not be negative")
	}
	return nil
}

// injector holds the current Failures and the ErrorRate counter.
type injector struct {
	cur atomic.Pointer[failureState]
}

type failureState struct {
	Failures
	n atomic.Uint64 // requests counted for ErrorRate
}

func (in *injector) set(f Failures) {
	if f.ErrorStatus == 0 {
		f.ErrorStatus = http.StatusInternalServerError
	}
	f.ErrorRate = min(max(f.ErrorRate, 0), 1)
	in.cur.Store(&failureState{Failures: f})
}

func (in *injector) get() Failures {
	if s := in.cur.Load(); s != nil {
		return s.Failures
	}
	return Failures{ErrorStatus: http.StatusInternalServerError}
}

// state returns the current failure state; nil when none was ever set.
func (in *injector) state() *failureState { return in.cur.Load() }

// shouldFail counts one request and reports whether it gets an injected
// error.
func (s *failureState) shouldFail() bool {
	if s == nil || s.ErrorRate <= 0 {
		return false
	}
	// The epsilon keeps products such as 3·(1/3) from landing just below
	// an integer.
	const eps = 1e-9
	n := float64(s.n.Add(1))
	return math.Floor(n*s.ErrorRate+eps) > math.Floor((n-1)*s.ErrorRate+eps)
}

// stall waits for s.Stall; it reports false if ctx ended first.
func (s *failureState) stall(ctx context.Context) bool {
	if s == nil || s.Stall <= 0 {
		return true
	}
	t := time.NewTimer(s.Stall)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *failureState) cutAfter() int {
	if s == nil {
		return 0
	}
	return s.CutAfterChunks
}
