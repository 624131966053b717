// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry/registrytest"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
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

// Each live gateway of a registry holds its share of an endpoint's red
// line, so that together they never send it more than max_num_seqs +
// max_queue: with two other members under leases, this one keeps 1 of 3
// slots (three slow requests at once: one self-hosted, two to the cloud);
// when their leases expire, it has all 3 again.
func TestRegistrySharesTheRedLine(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{TTFT: 600 * time.Millisecond}, simulator.CloudConfig{})
	e.load("registry etcd {\n\tendpoints " + te.URL + "\n}\n" + vllmBlock("\tmax_num_seqs 3\n\tmax_queue 0\n"))
	prefix := "/hybrid-llm/" + e.gatewayName()
	redLine := func() (int64, int) {
		t.Helper()
		var doc struct {
			Gateways []struct {
				Registry struct {
					Members int `json:"members"`
				} `json:"registry"`
				Groups []struct {
					Endpoints []struct {
						RedLine int64 `json:"red_line"`
					} `json:"endpoints"`
				} `json:"groups"`
			} `json:"gateways"`
		}
		if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &doc); err != nil || len(doc.Gateways) != 1 {
			t.Fatalf("state: %v", err)
		}
		for _, g := range doc.Gateways[0].Groups {
			for _, ep := range g.Endpoints {
				return ep.RedLine, doc.Gateways[0].Registry.Members
			}
		}
		t.Fatal("no endpoint")
		return 0, 0
	}
	waitFor(t, "this gateway's membership", func() bool { _, n := redLine(); return n == 1 })
	if rl, _ := redLine(); rl != 3 {
		t.Fatalf("alone: red line %d, want 3", rl)
	}

	ctx := context.Background()
	lease, err := te.Client.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	// two more members, after this one's id (it ranks first), whose
	// clocks are years off: membership is their leases, kept by etcd's
	// clock, and the time they say they joined plays no part
	for id, since := range map[string]string{"~other-1": "1999-01-01T00:00:00Z", "~other-2": "2099-01-01T00:00:00Z"} {
		if _, err := te.Client.Put(ctx, prefix+"/members/"+id, `{"host":"elsewhere","since":"`+since+`"}`, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the other members", func() bool { _, n := redLine(); return n == 3 })
	if rl, _ := redLine(); rl != 1 {
		t.Fatalf("one of three gateways: red line %d, want 1 (3 slots over 3)", rl)
	}
	groups := make(chan string, 3)
	for range 3 {
		go func() {
			resp, err := client.Post(gateway+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
			if err != nil {
				groups <- err.Error()
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			groups <- resp.Header.Get("X-Hybrid-Target")
		}()
	}
	got := map[string]int{}
	for range 3 {
		got[<-groups]++
	}
	if got["self"] != 1 || got["cloud"] != 2 {
		t.Errorf("three requests at once with a red line of 1: %v", got)
	}

	began := time.Now()
	waitFor(t, "the other members' leases to expire", func() bool { rl, n := redLine(); return n == 1 && rl == 3 })
	t.Logf("the red line was 3 again %v after the others' leases (2 s) were last renewed", time.Since(began))
}

// The registry through the admin API (what `caddy hybrid-llm registry`
// calls): a put is checked as the watch checks it, written and applied
// when the call returns; a get shows what etcd holds; members' keys are
// the gateways' own; a gateway without a registry says so.
func TestRegistryThroughTheAdminAPI(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load("registry etcd {\n\tendpoints " + te.URL + "\n}\n" + defaultGateway)
	waitFor(t, "the gateway's member key", func() bool {
		resp, err := te.Client.Get(context.Background(), "/hybrid-llm/"+e.gatewayName()+"/members/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1
	})

	status, body := adminPost(t, "/hybrid_llm/registry", "application/json", `{"key":"groups/self","value":{"drained":true}}`)
	if status != 200 {
		t.Fatalf("put: %d %s", status, body)
	}
	if group, _ := routeOf(t); group != "cloud" {
		t.Errorf("after the put returned: answered by %s", group)
	}
	var doc struct {
		Prefix string `json:"prefix"`
		Keys   []struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/registry"), &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, k := range doc.Keys {
		var v bytes.Buffer
		_ = json.Compact(&v, k.Value)
		keys[k.Key] = v.String()
	}
	if keys["groups/self"] != `{"drained":true}` || len(doc.Keys) != 2 { // and this gateway's member key
		t.Errorf("registry %s: %v", doc.Prefix, keys)
	}
	for body, want := range map[string]string{
		`{"key":"groups/self","value":{"drained":"yes"}}`:          "cannot unmarshal",
		`{"key":"members/me","value":{"host":"x"}}`:                "the gateways' own",
		`{"key":"spend/me","value":{}}`:                            "the gateways' own books",
		`{"key":"models/x","value":{}}`:                            `unknown kind`,
		`{"key":"aliases/chat-main","value":{"weights":{"a":-1}}}`: "want 0 to 1000",
	} {
		if status, got := adminPost(t, "/hybrid_llm/registry", "application/json", body); status != 400 || !strings.Contains(string(got), want) {
			t.Errorf("%s: %d %s, want 400 with %q", body, status, got, want)
		}
	}
	if status, body := adminPost(t, "/hybrid_llm/registry", "application/json", `{"key":"groups/self","delete":true}`); status != 200 {
		t.Fatalf("rm: %d %s", status, body)
	}
	if group, _ := routeOf(t); group != "self" {
		t.Errorf("after the key was deleted: answered by %s", group)
	}

	e.load(defaultGateway)
	if status, body := adminPost(t, "/hybrid_llm/registry", "application/json", `{"key":"groups/self","delete":true}`); status != 404 ||
		!strings.Contains(string(body), "has no registry") {
		t.Errorf("without a registry: %d %s", status, body)
	}
}

// etcd over TLS, with a private CA and client certificates: the gateway
// presents its own and follows the registry as over plain HTTP.
func TestRegistryOverTLS(t *testing.T) {
	te := registrytest.StartTLS(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	c := te.Certs
	e.load("registry etcd {\n\tendpoints " + te.URL + "\n\ttls {\n\t\tca " + c.CA + "\n\t\tcert " + c.ClientCert + "\n\t\tkey " + c.ClientKey +
		"\n\t}\n}\n" + defaultGateway)
	te.Put("/hybrid-llm/"+e.gatewayName()+"/groups/self", `{"drained": true}`)
	waitFor(t, "the drain over TLS", func() bool { g, _ := routeOf(t); return g == "cloud" })
}

// Budgets and the spend cap hold across the fleet: the gateway publishes
// its cloud spend under the registry's spend/ keys, and counts another
// replica's book of the same gateway as its own spend; a client's rate
// limits are divided among the live gateways.
func TestRegistryFleetBudgetsAndLimits(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	thrifty, rich, paced := "thrifty-"+run, "rich-"+run, "paced-"+run
	e.load("registry etcd {\n\tendpoints " + te.URL + "\n}\n" + pricedCloud(t) +
		"clients {\n\tclient " + thrifty + " " + hashed("sk-thrifty-"+run) + " {\n\t\tbudget_day_usd 0.05\n\t}\n" +
		"\tclient " + rich + " " + hashed("sk-rich-"+run) + "\n" +
		"\tclient " + paced + " " + hashed("sk-paced-"+run) + " {\n\t\trpm 3\n\t}\n}\n")
	prefix := "/hybrid-llm/" + e.gatewayName()
	cloudFirst := strings.Replace(chatBody, "chat-main", "cloud-first", 1)
	send := func(key string) (*http.Response, []byte) {
		return post(t, "/v1/chat/completions", cloudFirst, "Authorization", "Bearer "+key)
	}

	// this gateway's spend goes to etcd, by client, without the keys
	if resp, body := send("sk-rich-" + run); resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("rich: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	var published string
	waitFor(t, "the gateway's cloud spend in etcd", func() bool {
		resp, err := te.Client.Get(context.Background(), prefix+"/spend/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if v := string(kv.Value); strings.Contains(v, `"gateway":"`+e.gatewayName()+`"`) && strings.Contains(v, `"`+rich+`":{`) {
				published = v
				return true
			}
		}
		return false
	})
	if strings.Contains(published, "sk-rich") {
		t.Errorf("the published spend holds a key: %s", published)
	}

	// another replica spent thrifty's day budget: this one closes the
	// cloud to thrifty without having spent anything for it
	day := time.Now().UTC()
	spent := `{"day":"` + day.Format(time.DateOnly) + `","month":"` + day.Format("2006-01") + `","day_usd":0.05,"month_usd":0.05}`
	te.Put(prefix+"/spend/another-replica", `{"gateway":"`+e.gatewayName()+`","total":`+spent+`,"clients":{"`+thrifty+`":`+spent+`}}`)
	waitFor(t, "the other replica's spend counted", func() bool {
		for _, c := range clientsOf(t, adminGet(t, "/hybrid_llm/clients?gateway="+e.gatewayName())) {
			if c.Name == thrifty {
				return c.CloudUSDToday == 0.05 && c.BudgetLeftUSD != nil && *c.BudgetLeftUSD == 0
			}
		}
		return false
	})
	resp, body := send("sk-thrifty-" + run)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" || resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:client_budget" {
		t.Errorf("thrifty, whose budget another replica spent: %d from %q (%q): %s", resp.StatusCode,
			resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	if resp, _ := send("sk-rich-" + run); resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Errorf("rich lost the cloud: %q", resp.Header.Get("X-Hybrid-Target"))
	}
	// a malformed book is refused, and the last good one stays
	rev := te.Put(prefix+"/spend/another-replica", `{"gateway":"`+e.gatewayName()+`","total":{"day_usd":-5}}`)
	waitFor(t, "the malformed book read", func() bool { r, _ := registryState(t); return r >= rev })
	if resp, _ := send("sk-thrifty-" + run); resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:client_budget" {
		t.Errorf("after a malformed book: %q", resp.Header.Get("X-Hybrid-Fallback-Reason"))
	}

	// three live gateways: paced's 3 requests a minute are one here
	lease, err := te.Client.Grant(context.Background(), 30)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"~other-1", "~other-2"} {
		if _, err := te.Client.Put(context.Background(), prefix+"/members/"+id, `{"host":"elsewhere","since":"2026-12-01T00:00:00Z"}`, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the other members", func() bool {
		return strings.Contains(strings.ReplaceAll(string(adminGet(t, "/hybrid_llm/state?gateway="+e.gatewayName())), " ", ""), `"members":3`)
	})
	if resp, body := send("sk-paced-" + run); resp.StatusCode != 200 {
		t.Fatalf("paced, first request: %d %s", resp.StatusCode, body)
	}
	resp, body = send("sk-paced-" + run)
	if ae := wantError(t, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded"); !strings.Contains(ae.Error.Message, "1 requests per minute (this gateway's share of the fleet's 3)") {
		t.Errorf("paced, second request: %q", ae.Error.Message)
	}
	if _, err := te.Client.Revoke(context.Background(), lease.ID); err != nil {
		t.Fatal(err)
	}
}

// The registry lists a vLLM group's endpoints: an address the config
// lacks is added without a reload (probed, then selected); one it stops
// listing takes no new requests while a stream already on it runs to its
// end; a weight in the registry is the endpoint's weight.
func TestRegistryAddsAndRemovesEndpoints(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	added, addedSrv := startVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}, ITL: 40 * time.Millisecond, OutputTokens: 50})
	e.load("registry etcd {\n\tendpoints " + te.URL + "\n}\n" + defaultGateway)
	key := "/hybrid-llm/" + e.gatewayName() + "/groups/self"
	type endpointDoc struct {
		Address string  `json:"address"`
		Health  string  `json:"health"`
		Drained bool    `json:"drained"`
		Weight  float64 `json:"weight"`
		Added   bool    `json:"added"`
	}
	endpoints := func() map[string]endpointDoc {
		t.Helper()
		var doc struct {
			Gateways []struct {
				Groups []struct {
					Name      string        `json:"name"`
					Endpoints []endpointDoc `json:"endpoints"`
				} `json:"groups"`
			} `json:"gateways"`
		}
		if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state?gateway="+e.gatewayName()), &doc); err != nil || len(doc.Gateways) != 1 {
			t.Fatalf("state: %v", err)
		}
		out := map[string]endpointDoc{}
		for _, g := range doc.Gateways[0].Groups {
			if g.Name == "self" {
				for _, ep := range g.Endpoints {
					out[ep.Address] = ep
				}
			}
		}
		return out
	}
	configured, extra := e.selfSrv.Addr(), addedSrv.Addr()

	te.Put(key, `{"endpoints": [{"address": "`+configured+`", "drained": true}, {"address": "`+extra+`", "weight": 2}]}`)
	waitFor(t, "the added endpoint probed", func() bool { ep := endpoints()[extra]; return ep.Added && ep.Health == "up" })
	if ep := endpoints()[extra]; ep.Weight != 2 || ep.Drained {
		t.Errorf("the added endpoint: %+v, want weight 2, not drained", ep)
	}
	if ep := endpoints()[configured]; !ep.Drained || ep.Added {
		t.Errorf("the config's endpoint: %+v, want drained, not added", ep)
	}
	e.self.ResetRequests()
	if group, reason := routeOf(t); group != "self" {
		t.Fatalf("with the config's endpoint drained and one added: answered by %s (%s)", group, reason)
	}
	if n, m := inferences(added), inferences(e.self); n != 1 || m != 0 {
		t.Fatalf("the added endpoint got %d requests and the drained one %d, want 1 and 0", n, m)
	}

	// a stream runs on the added endpoint when the registry drops it
	resp, err := client.Post(gateway+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("the stream's first line: %q %v", line, err)
	}
	te.Put(key, `{"endpoints": [{"address": "`+configured+`", "weight": 3}]}`)
	waitFor(t, "the added endpoint gone", func() bool { _, ok := endpoints()[extra]; return !ok })
	if ep := endpoints()[configured]; ep.Drained || ep.Weight != 3 {
		t.Errorf("the config's endpoint: %+v, want undrained with weight 3", ep)
	}
	for range 3 {
		if group, reason := routeOf(t); group != "self" {
			t.Fatalf("after the removal: answered by %s (%s)", group, reason)
		}
	}
	if n := inferences(added); n != 2 {
		t.Errorf("the removed endpoint got %d requests, want 2 (none after its removal)", n)
	}
	rest, err := io.ReadAll(r)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(rest)), "data: [DONE]") {
		t.Errorf("the stream on the removed endpoint did not finish: %v, ends %q", err, string(rest[max(0, len(rest)-80):]))
	}
}

// inferences counts the POSTs a simulated vLLM got (not the probes).
func inferences(v *simulator.VLLM) int {
	n := 0
	for _, r := range v.Requests() {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// Registry entries for names the gateway does not have (another fleet's
// group, a typo) change nothing here and are logged once with the name;
// a malformed value is logged with its key, and the key keeps its last
// good value.
func TestRegistryNamesTheGatewayLacks(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	logPath := e.loadWithGatewayLog("registry etcd {\n\tendpoints " + te.URL + "\n}\n" + defaultGateway)
	prefix := "/hybrid-llm/" + e.gatewayName()
	te.Put(prefix+"/groups/nosuch", `{"drained": true}`)
	te.Put(prefix+"/aliases/nosuch-alias", `{"weights": {"self": 1}}`)
	te.Put(prefix+"/groups/cloud", `{"endpoints": [{"address": "10.0.0.9:443"}]}`)
	te.Put(prefix+"/groups/self", `{"drained": true}`)
	rev := te.Put(prefix+"/groups/self", `{"drained": "no"}`)
	waitFor(t, "the last change applied", func() bool { r, _ := registryState(t); return r >= rev })
	te.Put(prefix+"/groups/nosuch", `{"drained": false}`)
	rev = te.Put(prefix+"/aliases/nosuch-alias", `{"weights": {"self": 2}}`)
	waitFor(t, "the second changes applied", func() bool { r, _ := registryState(t); return r >= rev })

	for _, want := range [][]string{
		{`"msg":"registry: a group the gateway does not have"`, `"group":"nosuch"`},
		{`"msg":"registry: an alias the gateway does not have"`, `"alias":"nosuch-alias"`},
		{`"msg":"registry: endpoints are listed for vllm groups only`, `"group":"cloud"`},
	} {
		if n := logLines(t, logPath, want...); n != 1 {
			t.Errorf("%d lines with %q, want 1", n, want)
		}
	}
	if n := logLines(t, logPath, prefix+"/groups/self", "cannot unmarshal"); n != 1 {
		t.Errorf("%d lines naming the malformed key, want 1", n)
	}
	if group, reason := routeOf(t); group != "cloud" || !strings.Contains(reason, "self:drained") {
		t.Errorf("self's last good value is a drain: answered by %s (%s)", group, reason)
	}
}

// An etcd that comes back without its data starts at a lower revision:
// the gateway applies what the new etcd holds, not only what comes after
// the old revision.
func TestRegistryAfterEtcdLostItsHistory(t *testing.T) {
	te := registrytest.Start(t)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load("registry etcd {\n\tendpoints " + te.URL + "\n}\n" + defaultGateway)
	key := "/hybrid-llm/" + e.gatewayName() + "/groups/self"
	var last int64
	for i := range 20 { // a history longer than the new one will be, ending undrained
		last = te.Put(key, `{"drained": `+strconv.FormatBool(i%2 == 0)+`}`)
	}
	waitFor(t, "the history applied", func() bool { r, _ := registryState(t); return r >= last })
	if g, reason := routeOf(t); g != "self" {
		t.Fatalf("after an undrain: answered by %s (%s)", g, reason)
	}
	te.Stop()
	te.Dir = t.TempDir()
	te.Restart()
	// a drain at a revision below the ones applied before
	rev := te.Put(key, `{"drained": true}`)
	waitFor(t, "the new etcd's drain applied", func() bool { g, _ := routeOf(t); return g == "cloud" })
	// the gateway's member key, written again to the new etcd, may come
	// after the put: the revision applied is the new etcd's, at or past it
	if r, _ := registryState(t); r < rev || r >= last {
		t.Errorf("applied revision %d, want the new etcd's, %d or a little past it", r, rev)
	}
}
