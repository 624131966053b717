// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"testing"
)

func TestFallbackOnDefault(t *testing.T) {
	set, err := newStatusSet(defaultFallbackOn)
	if err != nil {
		t.Fatal(err)
	}
	tg := &Target{Run: TargetRun{fallbackOn: set}}
	for status, want := range map[int]bool{
		200: false, 204: false, 301: false, 400: false, 409: false, 422: false,
		401: true, 403: true, 404: false, 408: true, 429: true, // a 404 is held and read instead
		500: true, 502: true, 503: true, 504: true, 599: true,
	} {
		if got := tg.FallsBackOn(status); got != want {
			t.Errorf("fallsBackOn(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestFallbackOnSet(t *testing.T) {
	set, err := newStatusSet([]int{429, 503, 4})
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[int]bool{399: false, 400: true, 404: true, 499: true, 500: false, 503: true, 599: false, 600: false, 0: false} {
		if got := set.has(status); got != want {
			t.Errorf("has(%d) = %v, want %v", status, got, want)
		}
	}
	for _, bad := range [][]int{{200}, {302}, {600}, {3}, {0}, {-1}} {
		if _, err := newStatusSet(bad); err == nil {
			t.Errorf("newStatusSet(%v) accepted", bad)
		}
	}
}
