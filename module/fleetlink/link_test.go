// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package fleetlink

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// The registry's endpoints may come as one placeholder holding a list
// (split on commas and spaces), its credentials as placeholders; the
// prefix defaults to the gateway's own, and one given keeps no trailing
// slash. A list that resolves to nothing is an error, not a fleet of
// none.
func TestRegistryOptions(t *testing.T) {
	t.Setenv("FLEETLINK_TEST_ETCD", "http://10.0.0.1:2379, http://10.0.0.2:2379")
	t.Setenv("FLEETLINK_TEST_PASS", "s3cret")
	rc := &RegistryConfig{Endpoints: []string{"{env.FLEETLINK_TEST_ETCD}", "http://10.0.0.3:2379"}, Password: "{env.FLEETLINK_TEST_PASS}"}
	o, err := rc.Options("gw", nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"}; !slices.Equal(o.Endpoints, want) {
		t.Errorf("endpoints %q, want %q", o.Endpoints, want)
	}
	if o.Password != "s3cret" || o.Prefix != "/hybrid-llm/gw" || o.TLS != nil {
		t.Errorf("password %q, prefix %q, tls %v", o.Password, o.Prefix, o.TLS != nil)
	}
	rc = &RegistryConfig{Endpoints: []string{"http://10.0.0.1:2379"}, Prefix: "/shared/", TLS: &RegistryTLS{}}
	if o, err = rc.Options("gw", nil, zap.NewNop()); err != nil || o.Prefix != "/shared" || o.TLS == nil {
		t.Errorf("a prefix of its own and tls: prefix %q, tls %v, %v", o.Prefix, o.TLS != nil, err)
	}
	t.Setenv("FLEETLINK_TEST_ETCD", "")
	if _, err := (&RegistryConfig{Endpoints: []string{"{env.FLEETLINK_TEST_ETCD}"}}).Options("gw", nil, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "resolve to none") {
		t.Errorf("endpoints that resolve to none: %v", err)
	}
	if _, err := (&RegistryTLS{CA: "/nonexistent/ca.pem"}).Config(); err == nil || !strings.Contains(err.Error(), "registry tls ca") {
		t.Errorf("a CA file that is not there: %v", err)
	}
}
