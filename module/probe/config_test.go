// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestConfigProvision(t *testing.T) {
	s, stale, ok, err := (*Config)(nil).Provision()
	if err != nil || s.HealthInterval != 2*time.Second || s.MetricsInterval != 500*time.Millisecond ||
		s.ModelsInterval != 30*time.Second || stale != 2*time.Second || ok || s.Rise != 2 || s.Fall != 2 {
		t.Errorf("defaults: %+v stale %v ok %v err %v", s, stale, ok, err)
	}
	_, _, _, err = (&Config{MetricsInterval: caddy.Duration(time.Second), StaleAfter: caddy.Duration(time.Second)}).Provision()
	if err == nil || !strings.Contains(err.Error(), "must exceed metrics_interval") {
		t.Errorf("stale_after <= metrics_interval: %v", err)
	}
}
