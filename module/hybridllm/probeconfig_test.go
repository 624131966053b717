// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestProbeConfigProvision(t *testing.T) {
	s, stale, ok, err := (*ProbeConfig)(nil).provision()
	if err != nil || s.healthInterval != 2*time.Second || s.metricsInterval != 500*time.Millisecond ||
		s.modelsInterval != 30*time.Second || stale != 2*time.Second || ok || s.rise != 2 || s.fall != 2 {
		t.Errorf("defaults: %+v stale %v ok %v err %v", s, stale, ok, err)
	}
	_, _, _, err = (&ProbeConfig{MetricsInterval: caddy.Duration(time.Second), StaleAfter: caddy.Duration(time.Second)}).provision()
	if err == nil || !strings.Contains(err.Error(), "must exceed metrics_interval") {
		t.Errorf("stale_after <= metrics_interval: %v", err)
	}
}
