// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const (
	teamAKey = "sk-team-a-0123456789abcdefghijklmnopqrstuvwxyz"
	teamBKey = "sk-team-b-zyxwvutsrqponmlkjihgfedcba9876543210"
)

// hashed is how a config names a key: its SHA-256.
func hashed(key string) string { return "sha256:" + sha256Hex(key) }

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// clientsBlock gives the default gateway two clients: team-a, its key
// from the environment, limited to chat-main; team-b, by its key's hash.
func clientsBlock() string {
	return defaultGateway + `
clients {
	client team-a {env.HYBRID_TEST_TEAM_A_KEY} {
		aliases chat-main
	}
	client team-b {
		key sha256:` + sha256Hex(teamBKey) + `
	}
}
`
}

func refusedTotal(t *testing.T, gw string) float64 {
	t.Helper()
	return metricValue(t, "caddy_hybrid_llm_clients_refused_total", map[string]string{"gateway": gw})
}

// Every request names a known client by its key, in any header an OpenAI
// SDK uses; anything else is refused 401 in the OpenAI shape, nothing is
// forwarded, and no key reaches an upstream, the config or a message.
func TestClientKeys(t *testing.T) {
	t.Setenv("HYBRID_TEST_TEAM_A_KEY", teamAKey)
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(clientsBlock())
	gw := e.gatewayName()
	refused0 := refusedTotal(t, gw)

	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"no key", nil},
		{"empty bearer", []string{"Authorization", "Bearer "}},
		{"not bearer", []string{"Authorization", "Basic " + teamAKey}},
		{"empty api-key", []string{"Api-Key", " "}},
		{"unknown key", []string{"Authorization", "Bearer sk-not-a-client"}},
		{"overlong key", []string{"Authorization", "Bearer " + strings.Repeat("k", 5000)}},
		{"two keys", []string{"Authorization", "Bearer " + teamAKey, "Api-Key", teamBKey}},
		{"the hash as key", []string{"Authorization", "Bearer sha256:" + sha256Hex(teamBKey)}},
		{"key in another header", []string{"Proxy-Authorization", "Bearer " + teamAKey}},
	} {
		before := len(e.selfPosts()) + len(e.cloudPosts())
		resp, body := post(t, "/v1/chat/completions", chatBody, tc.header...)
		apiErr := wantError(t, resp, body, http.StatusUnauthorized, "invalid_api_key")
		if strings.Contains(apiErr.Error.Message, teamAKey) || strings.Contains(apiErr.Error.Message, "sk-not-a-client") ||
			strings.Contains(string(body), teamBKey) {
			t.Errorf("%s: the answer repeats a key: %s", tc.name, body)
		}
		if resp.Header.Get("Www-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate", tc.name)
		}
		if n := len(e.selfPosts()) + len(e.cloudPosts()) - before; n != 0 {
			t.Errorf("%s: %d requests forwarded", tc.name, n)
		}
	}
	if got := refusedTotal(t, gw) - refused0; got != 9 {
		t.Errorf("clients_refused_total grew by %v, want 9", got)
	}

	// the key in each header the SDKs use, or the same key in two
	for i, header := range [][]string{
		{"Authorization", "Bearer " + teamAKey},
		{"authorization", "bearer " + teamBKey},
		{"Api-Key", teamAKey},
		{"X-Api-Key", teamBKey},
		{"Authorization", "Bearer " + teamAKey, "Api-Key", teamAKey},
	} {
		resp, body := post(t, "/v1/chat/completions", chatBody, append(header, "X-Request-Id", "client-key-"+string(rune('0'+i)))...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%v: %d %s", header[0], resp.StatusCode, body)
		}
		want := "team-a"
		if strings.Contains(strings.Join(header, " "), teamBKey) {
			want = "team-b"
		}
		if got := e.accessLog("client-key-" + string(rune('0'+i)))["llm_client"]; got != want {
			t.Errorf("%v: llm_client %v, want %s", header[0], got, want)
		}
	}
	for _, r := range append(e.selfPosts(), e.cloudPosts()...) {
		for k, v := range r.Header {
			if s := strings.Join(v, " "); strings.Contains(s, teamAKey) || strings.Contains(s, teamBKey) {
				t.Errorf("an upstream got a client key in %s", k)
			}
		}
	}
	if cfg := string(adminGet(t, "/config/")); strings.Contains(cfg, teamAKey) || strings.Contains(cfg, teamBKey) {
		t.Error("the config holds a client key")
	}

	// team-a may use chat-main only: cloud-first does not exist for it,
	// answered exactly as an alias nobody has
	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1), "Authorization", "Bearer "+teamAKey)
	hidden := wantError(t, resp, body, http.StatusNotFound, "model_not_found")
	resp, body = post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "no-such", 1), "Authorization", "Bearer "+teamAKey)
	unknown := wantError(t, resp, body, http.StatusNotFound, "model_not_found")
	if strings.Replace(hidden.Error.Message, "cloud-first", "X", 1) != strings.Replace(unknown.Error.Message, "no-such", "X", 1) {
		t.Errorf("a hidden alias reads differently from an unknown one: %q, %q", hidden.Error.Message, unknown.Error.Message)
	}
	if resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1), "Api-Key", teamBKey); resp.StatusCode != 200 {
		t.Errorf("team-b on cloud-first: %d %s", resp.StatusCode, body)
	}

	// the model list is the client's
	list := func(key string) []string {
		req, _ := http.NewRequest(http.MethodGet, gateway+"/v1/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, body := do(t, req)
		if key == "" {
			wantError(t, resp, body, http.StatusUnauthorized, "invalid_api_key")
			return nil
		}
		var doc struct {
			Data []struct{ ID string } `json:"data"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range doc.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got := list(teamAKey); strings.Join(got, ",") != "chat-main" {
		t.Errorf("team-a's models: %v", got)
	}
	if got := list(teamBKey); strings.Join(got, ",") != "chat-main,cloud-first" {
		t.Errorf("team-b's models: %v", got)
	}
	list("")

	// the official SDK sends its key as a bearer token
	var last *http.Response
	sdk := sdkClient(teamAKey, &last)
	if _, err := sdk.Chat.Completions.New(context.Background(), chatParams()); err != nil {
		t.Errorf("SDK with team-a's key: %v", err)
	}
	bad := sdkClient("sk-wrong", &last)
	if _, err := bad.Chat.Completions.New(context.Background(), chatParams()); err == nil || last == nil || last.StatusCode != http.StatusUnauthorized {
		t.Errorf("SDK with a wrong key: %v", err)
	}
}

// A keys file adds clients without a reload: a key taken out of it stops
// working, a new one works, and a file that is broken leaves the last good
// clients in force.
func TestKeysFileReloads(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	path := filepath.Join(t.TempDir(), "keys.json")
	write := func(content string) {
		t.Helper()
		// a rename, as an editor or a config manager replaces a file
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"clients": {"team-a": {"key": "` + teamAKey + `", "aliases": ["chat-main"]}}}`)
	logPath := e.loadWithGatewayLog(defaultGateway + "clients {\n\tkeys_file " + path + "\n}\n")
	status := func(key string) int {
		resp, _ := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer "+key)
		return resp.StatusCode
	}
	if got := status(teamAKey); got != 200 {
		t.Fatalf("team-a from the keys file: %d", got)
	}

	// team-a revoked, team-b added
	write(`{"clients": {"team-b": {"key": "sha256:` + sha256Hex(teamBKey) + `"}}}`)
	waitFor(t, "the revoked key to stop working", func() bool { return status(teamAKey) == http.StatusUnauthorized })
	if got := status(teamBKey); got != 200 {
		t.Errorf("team-b after the change: %d", got)
	}

	// a broken file: team-b stays, the error is logged
	write(`{"clients": {"team-c": {"key": "sk-c"},}}`)
	waitFor(t, "the broken file's error", func() bool {
		return logLines(t, logPath, "keys file not loaded", "keys.json:1:") > 0
	})
	if got := status(teamBKey); got != 200 {
		t.Errorf("team-b with a broken keys file: %d", got)
	}
	if got := status("sk-c"); got != http.StatusUnauthorized {
		t.Errorf("a client of the broken file: %d", got)
	}
}

// A keys file that is broken at start is a config error naming the file
// and the line; a running gateway keeps serving.
func TestBrokenKeysFileIsAConfigError(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, []byte("{\n  \"clients\": {\n    \"team-a\": {\"key\": 42}\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("{SELF}", e.selfSrv.URL(), "{CLOUD}", e.cloudSrv.URL()).Replace(
		"{\n\tadmin localhost:2999\n}\nhttp://127.0.0.1:9080 {\n\thandle /v1/* {\n\t\thybrid_llm {\n" + defaultGateway +
			"clients {\n\tkeys_file " + path + "\n}\n\t\t}\n\t}\n}\n")
	code, body := adminPost(t, "/load", "text/caddyfile", cfg)
	if code == 200 || !strings.Contains(string(body), "keys.json:3:") {
		t.Fatalf("a broken keys file loaded, or the error does not name the line: %d %s", code, body)
	}
	if group, _ := routeOf(t); group != "self" {
		t.Errorf("the running config stopped serving: %s", group)
	}
}

// With `identity`, an authentication handler in front names the client
// (here basic_auth): the client's settings apply to that name, and a
// request that reached the gateway without an identity is refused.
func TestClientIdentityFromCaddy(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	// alice-pass, at bcrypt's lowest cost
	const hash = "$2a$04$xWpvySWPvvcDy8YCusmmC.bPCNqY1dzCbRLZ07iJoJwWxgSlhkn.q"
	block := strings.NewReplacer("{SELF}", e.selfSrv.URL(), "{CLOUD}", e.cloudSrv.URL()).Replace(defaultGateway +
		"clients {\n\tidentity {http.auth.user.id}\n\tclient alice {\n\t\taliases chat-main\n\t}\n}\n")
	cfg := "{\n\tadmin localhost:2999\n\tgrace_period 2s\n}\nhttp://127.0.0.1:9080 {\n\tlog {\n\t\toutput file " + e.logPath +
		"\n\t\tformat json\n\t}\n\troute /v1/* {\n\t\tbasic_auth /v1/chat/* {\n\t\t\talice " + hash + "\n\t\t\tbob " + hash +
		"\n\t\t}\n\t\thybrid_llm {\n" + block + "\n\t\t}\n\t}\n}\n"
	e.tester = loadRaw(t, cfg)
	waitProbed(t)

	req := func(user, model string) (*http.Response, []byte) {
		r, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(strings.Replace(chatBody, "chat-main", model, 1)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Request-Id", "identity-"+user+"-"+model)
		if user != "" {
			r.SetBasicAuth(user, "alice-pass")
		}
		return do(t, r)
	}
	if resp, body := req("alice", "chat-main"); resp.StatusCode != 200 {
		t.Fatalf("alice: %d %s", resp.StatusCode, body)
	}
	if got := e.accessLog("identity-alice-chat-main")["llm_client"]; got != "alice" {
		t.Errorf("llm_client %v", got)
	}
	// alice's settings hold: cloud-first is not hers
	resp, body := req("alice", "cloud-first")
	wantError(t, resp, body, http.StatusNotFound, "model_not_found")
	// bob has no settings here: every alias
	if resp, body := req("bob", "cloud-first"); resp.StatusCode != 200 {
		t.Errorf("bob: %d %s", resp.StatusCode, body)
	}
	if got := e.accessLog("identity-bob-cloud-first")["llm_client"]; got != "bob" {
		t.Errorf("bob's llm_client %v", got)
	}
	// the model list is outside basic_auth here: no identity, refused
	r, _ := http.NewRequest(http.MethodGet, gateway+"/v1/models", nil)
	resp, body = do(t, r)
	wantError(t, resp, body, http.StatusUnauthorized, "invalid_api_key")
}

// A client over its requests or tokens per minute gets 429
// rate_limit_exceeded with a Retry-After that tells when it may come
// back; a stream's tokens count like any others; other clients are not
// held back.
func TestClientLimits(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	// names of their own each run: limits last across reloads, and so
	// across runs of the test in one process
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	rpmClient, tpmClient := "rpm-"+run, "tpm-"+run
	e.load(defaultGateway + "clients {\n\tclient " + rpmClient + " " + hashed("sk-rpm-"+run) + " {\n\t\trpm 2\n\t}\n" +
		"\tclient " + tpmClient + " " + hashed("sk-tpm-"+run) + " {\n\t\ttpm 5\n\t}\n\tclient free " + hashed("sk-free-"+run) + "\n}\n")
	gw := e.gatewayName()
	limited := func(client, limit string) float64 {
		return metricValue(t, "caddy_hybrid_llm_client_limited_total", map[string]string{"gateway": gw, "client": client, "limit": limit})
	}

	for i := range 2 {
		if resp, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-rpm-"+run); resp.StatusCode != 200 {
			t.Fatalf("request %d within rpm: %d %s", i, resp.StatusCode, body)
		}
	}
	before := len(e.selfPosts()) + len(e.cloudPosts())
	resp, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-rpm-"+run)
	apiErr := wantError(t, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded")
	if apiErr.Error.Type != "requests" {
		t.Errorf("type %q, want requests", apiErr.Error.Type)
	}
	// 2 a minute: the next one is free 30 s after the first
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 30 {
		t.Errorf("Retry-After %q, want 1 to 30 seconds", resp.Header.Get("Retry-After"))
	}
	if n := len(e.selfPosts()) + len(e.cloudPosts()) - before; n != 0 {
		t.Errorf("a limited request was forwarded %d times", n)
	}
	if got := limited(rpmClient, "requests"); got != 1 {
		t.Errorf("client_limited_total{limit=requests} = %v, want 1", got)
	}

	// 5 tokens a minute: a stream of 5 completion tokens and its prompt
	// cross it, and the next request waits
	resp, body = post(t, "/v1/chat/completions", streamBody, "Authorization", "Bearer sk-tpm-"+run)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-tpm-"+run)
	apiErr = wantError(t, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded")
	if apiErr.Error.Type != "tokens" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over tpm: type %q, Retry-After %q", apiErr.Error.Type, resp.Header.Get("Retry-After"))
	}

	// the others are not held back
	for i := range 3 {
		if resp, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-free-"+run); resp.StatusCode != 200 {
			t.Fatalf("free client, request %d: %d %s", i, resp.StatusCode, body)
		}
	}

	// limits last across a reload
	e.load(defaultGateway + "clients {\n\tclient " + rpmClient + " " + hashed("sk-rpm-"+run) + " {\n\t\trpm 2\n\t}\n}\n")
	resp, body = post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-rpm-"+run)
	wantError(t, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded")
}

// Only a trusted client steers routing with a header: an untrusted
// client's routing header is removed before the rules and the upstream
// see it, and counted.
func TestOnlyTrustedClientsRouteByHeader(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := strings.Replace(defaultGateway, "\ttarget cloud "+cloudModel+"\n}\nalias cloud-first",
		"\ttarget cloud "+cloudModel+"\n\troute cloud {\n\t\theader X-Workload batch\n\t}\n}\nalias cloud-first", 1)
	if block == defaultGateway {
		t.Fatal("the default gateway changed shape")
	}
	e.load(block + "clients {\n\tclient ops " + hashed("sk-ops-key") + " {\n\t\ttrusted\n\t}\n\tclient app " + hashed("sk-app-key") + "\n}\n")
	gw := e.gatewayName()
	removed0 := metricValue(t, "caddy_hybrid_llm_client_routing_headers_removed_total", map[string]string{"gateway": gw, "client": "app"})

	resp, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-ops-key", "X-Workload", "batch")
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" || resp.Header.Get("X-Hybrid-Route") != "cloud" {
		t.Fatalf("trusted: %d from %q (route %q): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Route"), body)
	}

	before := len(e.selfPosts())
	resp, body = post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-app-key", "X-Workload", "batch")
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" || resp.Header.Get("X-Hybrid-Route") != "" {
		t.Fatalf("untrusted: %d from %q (route %q): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Route"), body)
	}
	if got := e.selfPosts(); len(got) != before+1 || got[len(got)-1].Header.Get("X-Workload") != "" {
		t.Errorf("the untrusted client's routing header reached the upstream")
	}
	if got := metricValue(t, "caddy_hybrid_llm_client_routing_headers_removed_total", map[string]string{"gateway": gw, "client": "app"}) - removed0; got != 1 {
		t.Errorf("routing headers removed grew by %v, want 1", got)
	}
}

// A client's max_tokens ceiling lowers what a request asks for (or sets
// it when the request asks for nothing) before any upstream sees it; with
// refuse, a request over it is refused 400; n over its ceiling is refused.
func TestClientCeilings(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway + "clients {\n\tclient small " + hashed("sk-small-key") + " {\n\t\tmax_tokens 3\n\t\tmax_n 1\n\t}\n" +
		"\tclient strict " + hashed("sk-strict-key") + " {\n\t\tmax_tokens 3 refuse\n\t}\n}\n")
	lastSent := func() string {
		p := e.selfPosts()
		return string(p[len(p)-1].Body)
	}
	for _, body := range []string{chatBody, strings.Replace(chatBody, `"max_tokens":`, `"ignored":`, 1)} {
		resp, answer := post(t, "/v1/chat/completions", body, "Authorization", "Bearer sk-small-key")
		if resp.StatusCode != 200 || !strings.Contains(answerUsage(answer), `"completion_tokens":3`) {
			t.Errorf("%s: %d %s", body, resp.StatusCode, answer)
		}
		if sent := lastSent(); !strings.Contains(sent, `"max_tokens":3`) && !strings.Contains(sent, `"max_completion_tokens":3`) {
			t.Errorf("the upstream got %s", sent)
		}
	}
	before := len(e.selfPosts())
	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, `"max_tokens":`, `"n":2,"max_tokens":`, 1), "Authorization", "Bearer sk-small-key")
	if apiErr := wantError(t, resp, body, http.StatusBadRequest, "invalid_value"); apiErr.Error.Param == nil || *apiErr.Error.Param != "n" {
		t.Errorf("n over the ceiling: %s", body)
	}
	resp, body = post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-strict-key")
	if apiErr := wantError(t, resp, body, http.StatusBadRequest, "invalid_value"); apiErr.Error.Param == nil || *apiErr.Error.Param != "max_tokens" {
		t.Errorf("max_tokens over a refusing ceiling: %s", body)
	}
	if n := len(e.selfPosts()) - before; n != 0 {
		t.Errorf("%d refused requests were forwarded", n)
	}
}

// answerUsage returns the usage object of a JSON answer, as text.
func answerUsage(answer []byte) string {
	var doc struct {
		Usage json.RawMessage `json:"usage"`
	}
	_ = json.Unmarshal(answer, &doc)
	return strings.ReplaceAll(string(doc.Usage), " ", "")
}

// pricedCloud gives the default gateway's cloud group prices high enough
// that one answer spends a budget of a cent.
func pricedCloud(t *testing.T) string {
	t.Helper()
	block := strings.Replace(defaultGateway, "\tkind openai\n", "\tkind openai\n\tcost {\n\t\tinput_per_million 2000\n\t\toutput_per_million 2000\n\t}\n", 1)
	if block == defaultGateway {
		t.Fatal("the default gateway changed shape")
	}
	return block
}

// clientDoc is a client as GET /hybrid_llm/clients shows it.
type clientDoc struct {
	Name          string   `json:"name"`
	CloudUSDToday float64  `json:"cloud_usd_today"`
	BudgetLeftUSD *float64 `json:"budget_left_usd"`
}

// clientsOf reads the clients of the one gateway of a clients document.
func clientsOf(t *testing.T, raw []byte) []clientDoc {
	t.Helper()
	var doc struct {
		Gateways []struct {
			Clients []clientDoc `json:"clients"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Gateways) != 1 {
		t.Fatalf("clients: %v %s", err, raw)
	}
	return doc.Gateways[0].Clients
}

// A client whose cloud budget is spent stays on self-hosted targets; with
// none left it gets 429 insufficient_quota. Other clients keep the cloud.
// What was spent is kept in Caddy's storage when the config stops.
func TestClientCloudBudget(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	thrifty := "thrifty-" + run
	e.load(pricedCloud(t) + "clients {\n\tclient " + thrifty + " " + hashed("sk-thrifty-"+run) + " {\n\t\tbudget_day_usd 0.01\n\t}\n" +
		"\tclient rich " + hashed("sk-rich-"+run) + "\n}\n")
	send := func(key string) (*http.Response, []byte) {
		return post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1), "Authorization", "Bearer "+key)
	}
	// the first answer, a stream, comes from the cloud and runs to its
	// end although it spends the budget
	resp, body := post(t, "/v1/chat/completions", strings.Replace(streamBody, "chat-main", "cloud-first", 1), "Authorization", "Bearer sk-thrifty-"+run)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" || !strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("within budget: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	resp, body = send("sk-thrifty-" + run)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" || resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:client_budget" {
		t.Fatalf("budget spent: %d from %q (%q): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	if resp, _ := send("sk-rich-" + run); resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Errorf("another client lost the cloud: %q", resp.Header.Get("X-Hybrid-Target"))
	}

	// the admin API and the metrics tell the clients apart, without keys
	raw := adminGet(t, "/hybrid_llm/clients?gateway="+e.gatewayName())
	if strings.Contains(string(raw), "sk-thrifty") || strings.Contains(string(raw), "sk-rich") {
		t.Errorf("the admin API shows a key: %s", raw)
	}
	clients := clientsOf(t, raw)
	if len(clients) != 2 {
		t.Fatalf("clients: %s", raw)
	}
	for _, c := range clients {
		switch c.Name {
		case thrifty:
			if c.CloudUSDToday < 0.01 || c.BudgetLeftUSD == nil || *c.BudgetLeftUSD != 0 {
				t.Errorf("thrifty: %+v", c)
			}
		case "rich":
			if c.CloudUSDToday <= 0 || c.BudgetLeftUSD != nil {
				t.Errorf("rich: %+v", c)
			}
		}
	}
	// the ledger splits the window's cost by client
	var ledger struct {
		Gateways []struct {
			Clients []struct {
				Client   string  `json:"client"`
				CloudUSD float64 `json:"cloud_usd"`
				Prompt   int64   `json:"prompt_tokens"`
			} `json:"clients"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/ledger?window=1h&gateway="+e.gatewayName()), &ledger); err != nil || len(ledger.Gateways) != 1 {
		t.Fatalf("ledger: %v", err)
	}
	perClient := map[string]float64{}
	for _, c := range ledger.Gateways[0].Clients {
		perClient[c.Client] = c.CloudUSD
	}
	if perClient[thrifty] < 0.01 || perClient["rich"] <= 0 {
		t.Errorf("the ledger per client: %+v", ledger.Gateways[0].Clients)
	}
	for _, name := range []string{"caddy_hybrid_llm_tokens_total", "caddy_hybrid_llm_cloud_cost_usd_total", "caddy_hybrid_llm_requests_total"} {
		if v := metricValue(t, name, map[string]string{"gateway": e.gatewayName(), "client": thrifty}); v <= 0 {
			t.Errorf("%s{client=%s} = %v", name, thrifty, v)
		}
	}

	// no self-hosted target either: the client's quota is the answer
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	before := len(e.cloudPosts())
	resp, body = send("sk-thrifty-" + run)
	apiErr := wantError(t, resp, body, http.StatusTooManyRequests, "insufficient_quota")
	if apiErr.Error.Type != "insufficient_quota" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("type %q, Retry-After %q", apiErr.Error.Type, resp.Header.Get("Retry-After"))
	}
	if n := len(e.cloudPosts()) - before; n != 0 {
		t.Errorf("the cloud got %d requests of a client without budget", n)
	}

	// a reload stops the config: the spend is in storage
	e.load(defaultGateway)
	path := filepath.Join(testStorage, "hybrid_llm", "spend", e.gatewayName()+".json")
	var doc struct {
		Clients map[string]struct {
			DayUSD float64 `json:"day_usd"`
		} `json:"clients"`
	}
	waitFor(t, "the spend in storage", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &doc) == nil && doc.Clients[thrifty].DayUSD >= 0.01
	})
}

// With a daily cloud spend cap reached, overflow and fallback to the cloud
// stop until the next UTC day: self-hosted targets keep serving, and a
// request that finds none gets 503 with Retry-After. A warning is logged
// when the spend passes the warning share.
func TestCloudSpendCap(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	// a gateway name of its own each run: the day's spend lasts
	logPath := e.loadWithGatewayLog("name cap-" + run + "\n" + pricedCloud(t) + "cloud_spend {\n\tdaily_usd 0.01\n\twarn_at 0.5\n}\n")
	cloudFirst := strings.Replace(chatBody, "chat-main", "cloud-first", 1)
	if resp, body := post(t, "/v1/chat/completions", cloudFirst); resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("under the cap: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	resp, body := post(t, "/v1/chat/completions", cloudFirst)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" || resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:spend_cap" {
		t.Fatalf("cap reached: %d from %q (%q): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	waitFor(t, "the warning", func() bool { return logLines(t, logPath, "cloud spend near the daily cap") == 1 })

	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	resp, body = post(t, "/v1/chat/completions", chatBody)
	wantError(t, resp, body, http.StatusServiceUnavailable, "cloud_spend_cap")
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
}

// A key revoked by a reload is refused from the new config on, while a
// stream it started before runs to its end.
func TestRevokedKeyLetsItsStreamFinish(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: 150 * time.Millisecond}, simulator.CloudConfig{})
	e.load(defaultGateway + "clients {\n\tclient team-a " + hashed("sk-revoked-key") + "\n\tclient team-b " + hashed("sk-kept-key") + "\n}\n")
	req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-revoked-key")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the stream is running
		t.Fatal(err)
	}

	e.load(defaultGateway + "clients {\n\tclient team-b " + hashed("sk-kept-key") + "\n}\n")
	r2, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-revoked-key")
	wantError(t, r2, body, http.StatusUnauthorized, "invalid_api_key")
	if r3, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-kept-key"); r3.StatusCode != 200 {
		t.Errorf("the kept key: %d %s", r3.StatusCode, body)
	}

	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Errorf("the revoked key's stream did not finish: %v %q", err, rest)
	}
}

// Client keys, good or bad, reach no upstream, metric, admin answer,
// error body, gateway log or access log record, wherever the client put
// them; Caddy's access log redacts Authorization, and the site's log
// filter deletes Api-Key and X-Api-Key.
func TestClientKeysNeverLeak(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	const good, bad = "sk-leak-check-good-key-123", "sk-leak-check-bad-key-456"
	logPath := e.loadWithGatewayLog(defaultGateway + "clients {\n\tclient team-a " + hashed(good) + " {\n\t\trpm 1000\n\t}\n}\n")
	var seen []string
	resp, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer "+good, "X-Request-Id", "leak-check")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for _, header := range [][]string{
		{"Authorization", "Bearer " + bad},
		{"Authorization", "Bearer " + good, "Api-Key", bad},
		{"X-Api-Key", good},
		{"Api_Key", good},
		{"X_Api_Key", bad},
	} {
		_, body = post(t, "/v1/chat/completions", chatBody, header...)
		seen = append(seen, string(body))
	}
	_, body = post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "nope", 1), "Api-Key", good)
	seen = append(seen, string(body))
	for _, q := range []string{"?api-key=" + good, "?api-version=1&API_KEY=" + bad, "?key=" + good} {
		_, body = post(t, "/v1/chat/completions"+q, chatBody)
		seen = append(seen, string(body))
	}
	// a route of the site other than the gateway's: logged, the key redacted
	if resp, _ := post(t, "/elsewhere?api-key="+good, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("elsewhere: %d", resp.StatusCode)
	}
	for _, path := range []string{"/metrics", "/config/", "/hybrid_llm/state", "/hybrid_llm/clients", "/hybrid_llm/ledger"} {
		seen = append(seen, string(adminGet(t, path)))
	}
	// the records of the requests above are written before this one's,
	// sent on the same connection once they were answered
	req, _ := http.NewRequest(http.MethodGet, gateway+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+good)
	req.Header.Set("X-Request-Id", "leak-check-last")
	if resp, body := do(t, req); resp.StatusCode != 200 {
		t.Fatalf("models: %d %s", resp.StatusCode, body)
	}
	e.accessLog("leak-check-last")
	accessLog, _ := os.ReadFile(e.logPath)
	seen = append(seen, string(accessLog))
	gwLog, _ := os.ReadFile(logPath)
	seen = append(seen, string(gwLog))
	for _, r := range append(e.selfPosts(), e.cloudPosts()...) {
		raw, _ := json.Marshal(r.Header)
		seen = append(seen, string(raw), string(r.Body))
	}
	for i, s := range seen {
		if strings.Contains(s, good) || strings.Contains(s, bad) {
			t.Errorf("a client key in output %d: %.300s", i, s)
		}
	}
	if n := strings.Count(string(accessLog), "\n"); n < 6 {
		t.Errorf("the access log has %d records", n)
	}
}

// A key sent where the gateway reads none (a query string, with or
// without clients; a header of another spelling, when the gateway reads
// keys) is refused with where to send it; Caddy would write it to the
// access log, so the request's record is skipped, and the gateway's
// warning shows the query without its values. Without clients another
// handler may read such a header: it is served, and logged redacted. A header spelt with an underscore (Api_Key) Caddy drops
// before any handler, after copying the request for its log: it never
// reaches the gateway, and the log filter redacts it.
func TestKeysWhereNoneIsReadAreRefusedUnlogged(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	const key = "sk-attacker-sent-0123456789"
	for _, withClients := range []bool{true, false} {
		block := defaultGateway
		if withClients {
			block += "clients {\n\tclient team-a " + hashed(key) + "\n}\n"
		}
		logPath := e.loadWithGatewayLog(block)
		var refused []string
		for _, tc := range []struct{ query, header, hint string }{
			{"?api-key=" + key, "", "query string"},
			{"?api-version=2024-10-21&Api_Key=" + key, "", "query string"},
			{"?access_token=" + key, "", "query string"},
			{"", "Apikey", "Apikey header"},
			{"", "X-Api-Token", "X-Api-Token header"},
		} {
			h := []string{"Authorization", "Bearer " + key}
			if tc.header != "" {
				h = []string{tc.header, key}
			}
			if tc.header != "" && !withClients {
				id := "served-" + tc.header
				resp, body := post(t, "/v1/chat/completions", chatBody, tc.header, key, "X-Request-Id", id)
				if resp.StatusCode != 200 {
					t.Errorf("no clients: %s: %d %s", tc.header, resp.StatusCode, body)
				}
				logged, _ := e.accessLog(id)["request"].(map[string]any)["headers"].(map[string]any)
				if v, _ := logged[tc.header].([]any); len(v) != 1 || v[0] != "REDACTED" {
					t.Errorf("no clients: %s logged as %v", tc.header, logged[tc.header])
				}
				e.self.ResetRequests()
				continue
			}
			resp, body := post(t, "/v1/chat/completions"+tc.query, chatBody, h...)
			e1 := wantError(t, resp, body, http.StatusUnauthorized, "invalid_api_key")
			if !strings.Contains(e1.Error.Message, tc.hint) || !strings.Contains(e1.Error.Message, "Authorization: Bearer <key>") {
				t.Errorf("%s%s: message %q", tc.query, tc.header, e1.Error.Message)
			}
			refused = append(refused, resp.Header.Get("X-Request-Id"))
		}
		if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 0 {
			t.Errorf("clients %v: upstreams got %d requests", withClients, n)
		}
		// the Azure SDK's way is served
		h := []string{"X-Request-Id", "served"}
		if withClients {
			h = append(h, "Api-Key", key)
		}
		if resp, body := post(t, "/v1/chat/completions?api-version=2024-10-21", chatBody, h...); resp.StatusCode != 200 {
			t.Fatalf("clients %v: api-version with an Api-Key: %d %s", withClients, resp.StatusCode, body)
		}
		// dropped by Caddy: refused as keyless with clients, served
		// without; logged, redacted
		for _, name := range []string{"Api_Key", "X_Api_Key"} {
			resp, body := post(t, "/v1/chat/completions", chatBody, name, key, "X-Request-Id", "underscore-"+name)
			if want := map[bool]int{true: 401, false: 200}[withClients]; resp.StatusCode != want {
				t.Errorf("clients %v: %s: %d %s", withClients, name, resp.StatusCode, body)
			}
			h, _ := e.accessLog("underscore-" + name)["request"].(map[string]any)["headers"].(map[string]any)
			canonical := http.CanonicalHeaderKey(name)
			if v, _ := h[canonical].([]any); len(v) != 1 || v[0] != "REDACTED" {
				t.Errorf("clients %v: %s logged as %v", withClients, canonical, h[canonical])
			}
		}
		// written after the refused requests' records would have been
		e.accessLog("served")
		accessLog, _ := os.ReadFile(e.logPath)
		gwLog, _ := os.ReadFile(logPath)
		for _, id := range refused {
			if strings.Contains(string(accessLog), id) {
				t.Errorf("clients %v: the access log has a record of %s", withClients, id)
			}
		}
		if strings.Contains(string(accessLog), key) || strings.Contains(string(gwLog), key) {
			t.Errorf("clients %v: the key is logged", withClients)
		}
		if logLines(t, logPath, "API key where none is read", refused[0], `"query":"api-key=REDACTED"`, `"remote_addr":"127.0.0.1:`) != 1 {
			t.Errorf("clients %v: no warning for %s: %s", withClients, refused[0], gwLog)
		}
		e.self.ResetRequests()
		_ = os.Truncate(e.logPath, 0)
	}
}

// A credential of any spelling (a header or query parameter whose name
// holds key, token, secret, auth..., a WebSocket protocol or a Referer
// that carries one) never reaches an upstream, nor the access log: with
// clients by key, an API key's header (apikey, apitoken,
// subscriptionkey) is refused 401 unlogged, as a query key is without
// clients; another credential's header, and any header without clients,
// is served, dropped before the upstream, and redacted in the log.
func TestCredentialsOfAnySpellingStayOut(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503}) // the cloud gets them all
	const key, marker = "sk-credentials-team-key-0123", "sk-marker-4f7c2a9e"
	apiKeys := []string{"X-Goog-Api-Key", "Ocp-Apim-Subscription-Key", "X-Litellm-Api-Key", "X-Portkey-Api-Key",
		"Anthropic-Api-Key", "X-Api-Key-Old", "X-Api-Token"}
	others := []string{"Helicone-Auth", "X-Secret-Key", "X-Auth-Key"}
	queries := []string{"?api_key[]=", "?api_key%5B%5D=", "?x=1;api_key=", "?subscription-key=", "?key+=", "?openai_key=",
		"?api_key.0=", "?apikey2=", "?password=", "?client_secret=", "?jwt=", "?api_key%00="}
	for _, withClients := range []bool{true, false} {
		block, auth := defaultGateway, []string{}
		if withClients {
			block += "clients {\n\tclient team-a " + hashed(key) + "\n}\n"
			auth = []string{"Authorization", "Bearer " + key}
		}
		logPath := e.loadWithGatewayLog(block)
		status := map[bool]int{true: http.StatusUnauthorized, false: http.StatusOK}[withClients]
		var served []string
		servedHeaders := map[string]string{} // name: request id
		try := func(what string, want int, req *http.Request) {
			t.Helper()
			for i := 0; i < len(auth); i += 2 {
				req.Header.Set(auth[i], auth[i+1])
			}
			id := fmt.Sprintf("cred-%v-%d", withClients, len(served))
			req.Header.Set("X-Request-Id", id)
			resp, body := do(t, req)
			if resp.StatusCode != want {
				t.Errorf("clients %v: %s: %d %.200s", withClients, what, resp.StatusCode, body)
			} else if want == http.StatusUnauthorized && !strings.Contains(string(body), "invalid_api_key") {
				t.Errorf("clients %v: %s: %s", withClients, what, body)
			}
			if want != http.StatusUnauthorized {
				served = append(served, resp.Header.Get("X-Request-Id"))
			}
		}
		chat := func(target string, header ...string) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, gateway+target, strings.NewReader(chatBody))
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			return req
		}
		for _, h := range apiKeys {
			if status == http.StatusOK {
				servedHeaders[h] = fmt.Sprintf("cred-%v-%d", withClients, len(served))
			}
			try(h, status, chat("/v1/chat/completions", h, marker))
		}
		for _, h := range others {
			servedHeaders[h] = fmt.Sprintf("cred-%v-%d", withClients, len(served))
			try(h, http.StatusOK, chat("/v1/chat/completions", h, marker))
		}
		try("Sec-Websocket-Protocol", status, chat("/v1/chat/completions", "Sec-Websocket-Protocol", "realtime, openai-insecure-api-key."+marker))
		try("Referer", http.StatusOK, chat("/v1/chat/completions", "Referer", "https://app.example/chat?x=1&api_key="+marker))
		try("Idempotency-Key", http.StatusOK, chat("/v1/chat/completions", "Idempotency-Key", "idem-1", "X-Stainless-Retry-Count", "0"))
		for _, q := range queries {
			try(q, http.StatusUnauthorized, chat("/v1/chat/completions"+q+marker))
		}
		try("escaped ?", http.StatusUnauthorized, chat("/v1/chat/completions%3Fapi_key="+marker))
		models, _ := http.NewRequest(http.MethodGet, gateway+"/v1/models?password="+marker, nil)
		try("models", http.StatusUnauthorized, models)
		elsewhere, _ := http.NewRequest(http.MethodGet, gateway+"/other?a=1;key="+marker, nil)
		try("elsewhere", http.StatusNotFound, elsewhere)
		try("api-version", http.StatusOK, chat("/v1/chat/completions?api-version=2024-10-21"))

		// written after the records before it
		e.accessLog(served[len(served)-1])
		accessLog, _ := os.ReadFile(e.logPath)
		if !strings.Contains(string(accessLog), `"uri":"/other?a=1;key=REDACTED"`) {
			t.Errorf("clients %v: elsewhere not logged redacted", withClients)
		}
		if n := len(servedHeaders); n != map[bool]int{true: len(others), false: len(apiKeys) + len(others)}[withClients] {
			t.Errorf("clients %v: %d credential headers served", withClients, n)
		}
		for h, id := range servedHeaders {
			got, _ := e.accessLog(id)["request"].(map[string]any)["headers"].(map[string]any)
			if v, _ := got[h].([]any); len(v) != 1 || v[0] != "REDACTED" {
				t.Errorf("clients %v: %s logged as %v", withClients, h, got[h])
			}
		}
		if strings.Contains(string(accessLog), marker) {
			t.Errorf("clients %v: a credential in the access log", withClients)
		}
		if gwLog, _ := os.ReadFile(logPath); strings.Contains(string(gwLog), marker) {
			t.Errorf("clients %v: a credential in the gateway's log", withClients)
		}
		for _, r := range append(e.selfPosts(), e.cloudPosts()...) {
			raw, _ := json.Marshal(r.Header)
			if strings.Contains(string(raw), marker) || strings.Contains(r.Path, marker) {
				t.Errorf("clients %v: a credential upstream: %s %s", withClients, r.Path, raw)
			}
			if r.Header.Get("X-Stainless-Retry-Count") != "" && r.Header.Get("Idempotency-Key") != "idem-1" {
				t.Errorf("clients %v: the client's Idempotency-Key did not go upstream: %s", withClients, raw)
			}
		}
		if n := len(e.cloudPosts()); n == 0 {
			t.Errorf("clients %v: the cloud got no request", withClients)
		}
		e.self.ResetRequests()
		e.cloud.ResetRequests()
		_ = os.Truncate(e.logPath, 0)
	}
}

// An identity proxy in front (Cloudflare Access, oauth2-proxy) adds its
// own credentials to every request it passes: they are not an API key,
// so a gateway that reads client keys serves such a request by its key,
// sends those headers to no upstream, and writes them to the access log
// only redacted.
func TestIdentityProxyCredentialsAreServed(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	const key = "sk-behind-a-proxy-0123456789"
	e.load(defaultGateway + "clients {\n\tclient team-a " + hashed(key) + "\n}\n")
	proxied := map[string]string{
		"Cf-Access-Jwt-Assertion":     "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjZi11c2VyIn0.cf-signature-7d1e",
		"X-Auth-Request-Access-Token": "oauth2-proxy-access-token-91b3",
		"X-Forwarded-Access-Token":    "forwarded-access-token-5c08",
	}
	h := []string{"Authorization", "Bearer " + key, "X-Request-Id", "behind-a-proxy"}
	for name, v := range proxied {
		h = append(h, name, v)
	}
	resp, body := post(t, "/v1/chat/completions", chatBody, h...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	posts := e.selfPosts()
	if len(posts) != 1 {
		t.Fatalf("the upstream got %d requests", len(posts))
	}
	for name := range proxied {
		if v := posts[0].Header.Values(name); v != nil {
			t.Errorf("%s reached the upstream: %q", name, v)
		}
	}
	logged, _ := e.accessLog(resp.Header.Get("X-Request-Id"))["request"].(map[string]any)["headers"].(map[string]any)
	for name := range proxied {
		if v, _ := logged[name].([]any); len(v) != 1 || v[0] != "REDACTED" {
			t.Errorf("%s logged as %v", name, logged[name])
		}
	}
	accessLog, _ := os.ReadFile(e.logPath)
	for name, v := range proxied {
		if strings.Contains(string(accessLog), v) {
			t.Errorf("the access log holds the %s", name)
		}
	}
}

// An identity that is not one placeholder would never be empty, and so
// would let every request in: it is a config error.
func TestIdentityMustBeAPlaceholder(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	for _, id := range []string{"http.auth.user.id", "{http.auth.user.id}-x"} {
		cfg := strings.NewReplacer("{SELF}", e.selfSrv.URL(), "{CLOUD}", e.cloudSrv.URL()).Replace(
			"{\n\tadmin localhost:2999\n}\nhttp://127.0.0.1:9080 {\n\thandle /v1/* {\n\t\thybrid_llm {\n" + defaultGateway +
				"clients {\n\tidentity " + id + "\n}\n\t\t}\n\t}\n}\n")
		if code, body := adminPost(t, "/load", "text/caddyfile", cfg); code == 200 || !strings.Contains(string(body), "one placeholder") {
			t.Errorf("identity %s: %d %s", id, code, body)
		}
	}
}
