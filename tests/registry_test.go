// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry/registrytest"
	"github.com/hybridllm/caddy-hybrid-llm/simulator"
)

// registryState reads the gateway's view of the registry.
func registryState(t *testing.T) (revision int64, contacted bool) {
	t.Helper()
	var doc struct {
		Gateways []struct {
			Registry *struct {
				Revision    int64      `json:"revision"`
				LastContact *time.Time `json:"last_contact"`
			} `json:"registry"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &doc); err != nil || len(doc.Gateways) != 1 || doc.Gateways[0].Registry == nil {
		t.Fatalf("state: %v %+v", err, doc)
	}
	r := doc.Gateways[0].Registry
	return r.Revision, r.LastContact != nil
}

// A drain written to etcd reaches the gateway without a reload; one made
// through the admin API goes through etcd (so every gateway of the fleet
// drains) and is in force when the call returns; a malformed value is
// refused and the last good one stays; with etcd down the gateway keeps
// serving as it was, and an admin drain says nothing changed; etcd back,
// the watch goes on.
func TestRegistryDrainsTheFleet(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := "registry etcd {\n\tendpoints " + te.URL + "\n}\n" + defaultGateway
	e.load(block)
	key := "/hybrid-llm/" + e.gatewayName() + "/groups/self"
	if group, _ := routeOf(t); group != "self" {
		t.Fatalf("before any drain: answered by %s", group)
	}

	began := time.Now()
	te.Put(key, `{"drained": true}`)
	waitFor(t, "the drain written to etcd", func() bool { g, _ := routeOf(t); return g == "cloud" })
	t.Logf("a drain put in etcd took effect within %v", time.Since(began))

	status, body := adminPost(t, "/hybrid_llm/undrain", "application/json", `{"group":"self"}`)
	if status != 200 || !strings.Contains(string(body), `"registry_revision"`) {
		t.Fatalf("undrain: %d %s", status, body)
	}
	if v := te.Get(key); strings.Contains(v, `"drained":true`) {
		t.Errorf("etcd still has %s", v)
	}
	if group, _ := routeOf(t); group != "self" {
		t.Errorf("after the admin API's undrain returned: answered by %s", group)
	}

	ep := e.selfSrv.Addr()
	if status, body := adminPost(t, "/hybrid_llm/drain", "application/json", `{"group":"self","endpoint":"`+ep+`"}`); status != 200 {
		t.Fatalf("drain an endpoint: %d %s", status, body)
	}
	if v := te.Get(key); !strings.Contains(v, `{"address":"`+ep+`","drained":true}`) {
		t.Errorf("the endpoint's drain in etcd: %s", v)
	}
	if group, reason := routeOf(t); group != "cloud" || !strings.Contains(reason, "self:") {
		t.Errorf("with its one endpoint drained: answered by %s (%s)", group, reason)
	}

	rev := te.Put(key, `{"drained": "yes"}`)
	waitFor(t, "the malformed value's revision", func() bool { r, _ := registryState(t); return r >= rev })
	if group, _ := routeOf(t); group != "cloud" {
		t.Errorf("a malformed value replaced the drain: answered by %s", group)
	}

	te.Stop()
	for range 5 {
		if group, _ := routeOf(t); group != "cloud" {
			t.Errorf("with etcd down: answered by %s", group)
		}
	}
	if status, body := adminPost(t, "/hybrid_llm/undrain", "application/json", `{"group":"self","endpoint":"`+ep+`"}`); status != 503 ||
		!strings.Contains(string(body), "nothing changed") {
		t.Errorf("undrain with etcd down: %d %s", status, body)
	}
	te.Restart()
	te.Put(key, `{}`)
	waitFor(t, "the change after etcd's restart", func() bool { g, _ := routeOf(t); return g == "self" })
}

// A gateway that starts while etcd cannot be reached starts from the
// last snapshot it applied, kept in Caddy's storage.
func TestRegistrySnapshotWhenEtcdIsDown(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := "registry etcd {\n\tendpoints " + te.URL + "\n\tdial_timeout 1s\n}\n" + defaultGateway
	e.load(block)
	rev := te.Put("/hybrid-llm/"+e.gatewayName()+"/groups/self", `{"drained": true}`)
	waitFor(t, "the drain", func() bool { r, _ := registryState(t); return r >= rev })

	te.Stop()
	e.load(defaultGateway) // the registry's watcher stops with the config
	e.load(block)
	if group, _ := routeOf(t); group != "cloud" {
		t.Errorf("started without etcd: answered by %s, want the drained group skipped", group)
	}
	if r, contacted := registryState(t); r < rev || contacted {
		t.Errorf("started without etcd: revision %d (want %d), etcd contacted %v", r, rev, contacted)
	}
}
