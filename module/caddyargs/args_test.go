// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package caddyargs

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// dispenser is at the directive of input, ready to read its arguments.
func dispenser(input string) *caddyfile.Dispenser {
	d := caddyfile.NewTestDispenser(input)
	d.Next()
	return d
}

func TestArgumentsAndTheirErrors(t *testing.T) {
	if n, err := PositiveInt(dispenser("max_num_seqs 64")); err != nil || n != 64 {
		t.Errorf("PositiveInt = %d, %v", n, err)
	}
	if _, err := PositiveInt(dispenser("max_num_seqs 0")); err == nil || !strings.Contains(err.Error(), "max_num_seqs") {
		t.Errorf("PositiveInt(0): %v, want an error naming the option", err)
	}
	if _, err := PositiveInt(dispenser("max_num_seqs 1 2")); err == nil {
		t.Error("PositiveInt took two arguments")
	}
	if d, err := Duration(dispenser("timeout 1m30s")); err != nil || time.Duration(d) != 90*time.Second {
		t.Errorf("Duration = %v, %v", d, err)
	}
	if l, err := Limit(dispenser("timeout off")); err != nil || l == nil || *l != 0 {
		t.Errorf("Limit(off) = %v, %v", l, err)
	}
	if on, err := OnOff(dispenser("stream_usage off")); err != nil || on {
		t.Errorf("OnOff(off) = %v, %v", on, err)
	}
	if _, err := OnOff(dispenser("stream_usage maybe")); err == nil {
		t.Error("OnOff took maybe")
	}
}

func TestUnknownOptionSuggestsTheNearest(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{"max_num_seq", "max_num_seqs"}, // a letter short
		{"probe_", "probe"},             // a start
		{"colour", ""},                  // nothing near
	} {
		if s := Suggest(tc.got, []string{"max_num_seqs", "max_queue", "probe"}); s != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.got, s, tc.want)
		}
	}
	err := UnknownOption(dispenser("max_num_seq 4"), "option", "max_num_seq", "max_num_seqs", "max_queue")
	if err == nil || !strings.Contains(err.Error(), "did you mean 'max_num_seqs'") {
		t.Errorf("UnknownOption: %v", err)
	}
}
