// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// v1OnlyCloud is a cloud API as real clouds (and third parties'
// simulators, such as llm-d-inference-sim) are: it serves /v1/... with its
// key, and nothing else, so GET /healthz, /health or /metrics is a 404.
// It lists one model and answers chat completions in the OpenAI shape.
type v1OnlyCloud struct {
	srv        *simulator.Server
	model, key string

	mu     sync.Mutex
	chats  int      // chat completions answered
	others int      // every other request
	wrong  []string // requests answered 404 or 401: "GET /healthz 404"
}

func newV1OnlyCloud(t *testing.T, model, key string) *v1OnlyCloud {
	t.Helper()
	c := &v1OnlyCloud{model: model, key: key}
	c.srv = standIn(t, c.serve)
	return c
}

func (c *v1OnlyCloud) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	chat := r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions"
	c.mu.Lock()
	if !chat {
		c.others++
	}
	c.mu.Unlock()
	fail := func(status int, msg, code string) {
		c.mu.Lock()
		c.wrong = append(c.wrong, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, status))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
	}
	if !strings.HasPrefix(r.URL.Path, "/v1/") {
		fail(http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+c.key {
		fail(http.StatusUnauthorized, "Incorrect API key provided.", "invalid_api_key")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","created":1700000000,"owned_by":"stand-in"}]}`, c.model)
	case chat:
		var req struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &req) != nil || req.Model != c.model {
			fail(http.StatusNotFound, "The model `"+req.Model+"` does not exist or you do not have access to it.", "model_not_found")
			return
		}
		c.mu.Lock()
		c.chats++
		c.mu.Unlock()
		fmt.Fprintf(w, `{"id":"chatcmpl-stand-in","object":"chat.completion","created":1700000000,"model":%q,`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there."},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, c.model)
	default:
		fail(http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "")
	}
}

func (c *v1OnlyCloud) counts() (chats, others int, wrong []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chats, c.others, slices.Clone(c.wrong)
}

// exampleCloud is a cloud an example reads from the environment.
type exampleCloud struct{ upstream, model, key string }

// exampleSend is a batch of requests to an example and the targets that
// must answer them: each of them at least once, no other.
type exampleSend struct {
	alias  string
	n      int
	header []string
	body   string // instead of a plain chat request to alias
	want   []string
}

// exampleKeys are the clients the tests give every example.
const exampleKeys = "e2e=sk-example-client-0123456789 tester=sk-example-tester-0123456789"

// Every example as shipped runs against upstreams that answer only what
// real ones answer: vLLM stand-ins (vLLM serves /health and /metrics
// itself) and clouds that 404 every path but /v1/*. Requests get 200s
// from the targets the example means, the weighted clouds each their
// share, not the last resort; no cloud is ever asked for a path it lacks
// or asked without its key (health checks included).
func TestExamplesRunAgainstRealUpstreams(t *testing.T) {
	const chat = `{"model":"%s","messages":[{"role":"user","content":"Say hello"}],"max_tokens":8}`
	for _, tc := range []struct {
		file    string
		vllm    map[string][2]string // upstreams variable: model variable, model
		clouds  map[string]exampleCloud
		env     map[string]string
		checked []string // clouds with active health checks
		sends   []exampleSend
	}{{
		file:   "../examples/Caddyfile",
		vllm:   map[string][2]string{"SELF_UPSTREAMS": {"SELF_MODEL", selfModel}},
		clouds: map[string]exampleCloud{"cloud": {"CLOUD_UPSTREAM", "CLOUD_MODEL", "CLOUD_API_KEY"}},
		sends:  []exampleSend{{alias: "chat-main", n: 4, want: []string{"self"}}},
	}, {
		file:   "../examples/Caddyfile.full",
		vllm:   map[string][2]string{"SELF_UPSTREAMS": {"SELF_MODEL", selfModel}},
		clouds: map[string]exampleCloud{"cloud": {"CLOUD_UPSTREAM", "CLOUD_MODEL", "CLOUD_API_KEY"}},
		sends: []exampleSend{
			{alias: "chat-main", n: 4, want: []string{"self"}},
			{alias: "chat-main", n: 2, want: []string{"cloud"}, // route cloud { field tools }
				body: `{"model":"chat-main","messages":[{"role":"user","content":"Weather?"}],"max_tokens":8,` +
					`"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]}`},
			{alias: "chat-spread", n: 20, want: []string{"self", "cloud"}},
			{alias: "chat-tiers", n: 2, want: []string{"self"}},
		},
	}, {
		file:   "../examples/cluster/Caddyfile",
		vllm:   map[string][2]string{"SELF_UPSTREAMS": {"SELF_MODEL", selfModel}},
		clouds: map[string]exampleCloud{"cloud": {"CLOUD_UPSTREAM", "CLOUD_MODEL", "CLOUD_API_KEY"}},
		// no etcd: the gateway serves on its own
		env:   map[string]string{"ETCD_ENDPOINTS": "http://" + closedAddr(t)},
		sends: []exampleSend{{alias: "chat-main", n: 4, want: []string{"self"}}},
	}, {
		file: "../examples/degradation/Caddyfile",
		vllm: map[string][2]string{"BIG_UPSTREAMS": {"BIG_MODEL", "llama-70b"},
			"MEDIUM_UPSTREAMS": {"MEDIUM_MODEL", "llama-13b"}, "SMALL_UPSTREAMS": {"SMALL_MODEL", "llama-7b"}},
		sends: []exampleSend{{alias: "chat-main", n: 4, want: []string{"big"}}},
	}, {
		file: "../examples/multicloud/Caddyfile",
		clouds: map[string]exampleCloud{
			"cloud-a": {"CLOUD_A_UPSTREAM", "CLOUD_A_MODEL", "CLOUD_A_API_KEY"},
			"cloud-b": {"CLOUD_B_UPSTREAM", "CLOUD_B_MODEL", "CLOUD_B_API_KEY"},
			"cloud-c": {"CLOUD_C_UPSTREAM", "CLOUD_C_MODEL", "CLOUD_C_API_KEY"},
			"mirror":  {"MIRROR_UPSTREAM", "MIRROR_MODEL", "MIRROR_API_KEY"},
			"canary":  {"CANARY_UPSTREAM", "CANARY_MODEL", "CANARY_API_KEY"},
		},
		checked: []string{"cloud-a", "cloud-b"},
		sends: []exampleSend{
			{alias: "chat-main", n: 40, want: []string{"cloud-a", "cloud-b"}},
			{alias: "chat-main", n: 1, header: []string{"X-Route-Tag", "canary", "Authorization", "Bearer sk-example-tester-0123456789"},
				want: []string{"canary"}},
		},
	}, {
		file:   "../examples/replay/Caddyfile",
		vllm:   map[string][2]string{"SELF_UPSTREAMS": {"SELF_MODEL", selfModel}},
		clouds: map[string]exampleCloud{"cloud": {"CLOUD_UPSTREAM", "CLOUD_MODEL", "CLOUD_API_KEY"}},
		sends:  []exampleSend{{alias: "chat-main", n: 4, want: []string{"self"}}},
	}} {
		t.Run(strings.TrimPrefix(tc.file, "../examples/"), func(t *testing.T) {
			for k, v := range map[string]string{
				"HYBRID_PORT": "9080", "HYBRID_BIND": "127.0.0.1", "HYBRID_ADMIN": "localhost:2999",
				"HYBRID_CLIENT_KEYS": exampleKeys, "HYBRID_CLIENT_KEYS_FILE": "",
			} {
				t.Setenv(k, v)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for upstreams, model := range tc.vllm {
				_, srv := startVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{model[1]}})
				t.Setenv(upstreams, srv.Addr())
				t.Setenv(model[0], model[1])
			}
			clouds := map[string]*v1OnlyCloud{}
			for name, ev := range tc.clouds {
				c := newV1OnlyCloud(t, "model-of-"+name, "sk-key-of-"+name+"-0123456789")
				clouds[name] = c
				t.Setenv(ev.upstream, c.srv.URL())
				t.Setenv(ev.model, c.model)
				t.Setenv(ev.key, c.key)
			}
			cfg, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			caddytest.NewTester(t).InitServer(withTestStorage(string(cfg)), "caddyfile")
			client.CloseIdleConnections()
			waitProbed(t)
			// as many health checks as take a cloud out (health_fails 2),
			// besides the model check's GET /v1/models: a cloud the checks
			// fail is out by now
			for _, name := range tc.checked {
				waitFor(t, name+"'s health checks", func() bool {
					_, others, _ := clouds[name].counts()
					return others >= 3
				})
			}

			for _, s := range tc.sends {
				got := map[string]int{}
				for range s.n {
					header := append([]string{"Authorization", "Bearer sk-example-client-0123456789"}, s.header...)
					req := s.body
					if req == "" {
						req = fmt.Sprintf(chat, s.alias)
					}
					resp, body := post(t, "/v1/chat/completions", req, header...)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s %v: %d %s", s.alias, s.header, resp.StatusCode, body)
					}
					got[resp.Header.Get("X-Hybrid-Target")]++
				}
				for target := range got {
					if !slices.Contains(s.want, target) {
						t.Errorf("%s %v: answered by %v, want only %v", s.alias, s.header, got, s.want)
					}
				}
				for _, target := range s.want {
					if got[target] == 0 {
						t.Errorf("%s %v: answered by %v, want each of %v", s.alias, s.header, got, s.want)
					}
				}
			}
			for name, c := range clouds {
				if _, _, wrong := c.counts(); len(wrong) > 0 {
					t.Errorf("%s was asked what a real cloud does not answer: %v", name, wrong)
				}
			}
		})
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	srv := standIn(t, func(http.ResponseWriter, *http.Request) {})
	addr := srv.Addr()
	_ = srv.Close()
	return addr
}

// Every example's header names every variable the example reads, and
// says that each upstream key it reads is required.
func TestExampleHeadersNameTheirVariables(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/Caddyfile")
	files = append([]string{"../examples/Caddyfile", "../examples/Caddyfile.full"}, files...)
	uses := regexp.MustCompile(`\{(?:\$|env\.)([A-Z][A-Z0-9_]*)`)
	key := regexp.MustCompile(`api_key \{env\.([A-Z][A-Z0-9_]*)\}`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var header, rest []string
		inHeader := true
		for _, line := range strings.Split(string(raw), "\n") {
			if inHeader && strings.HasPrefix(line, "#") {
				header = append(header, line)
				continue
			}
			inHeader = false
			if l := strings.TrimSpace(line); !strings.HasPrefix(l, "#") {
				rest = append(rest, line)
			}
		}
		head, body := strings.Join(header, "\n"), strings.Join(rest, "\n")
		for _, m := range uses.FindAllStringSubmatch(body, -1) {
			if !regexp.MustCompile(`\b` + m[1] + `\b`).MatchString(head) {
				t.Errorf("%s reads %s, which its header does not name", f, m[1])
			}
		}
		for _, m := range key.FindAllStringSubmatch(body, -1) {
			// the header's entry for the key: from its line to the next entry
			entry := ""
			for i, line := range header {
				if regexp.MustCompile(`\b` + m[1] + `\b`).MatchString(line) {
					entry = line
					for _, more := range header[i+1:] {
						if !strings.HasPrefix(more, "#    ") && !strings.HasPrefix(more, "#\t") {
							break
						}
						entry += " " + more
					}
					break
				}
			}
			if !strings.Contains(entry, "required") {
				t.Errorf("%s: the header does not say that %s is required: %q", f, m[1], entry)
			}
		}
	}
}

// The shipped Caddyfiles bound the time a request takes to arrive (its
// head 10s, the whole of it 30s), so that a body sent a byte a second
// does not hold a connection forever; they set no write or idle timeout,
// which would cut a long stream.
func TestShippedCaddyfilesTimeTheRequestRead(t *testing.T) {
	for _, f := range []string{"../examples/Caddyfile", "../examples/Caddyfile.full", "../examples/multicloud/Caddyfile", "../examples/degradation/Caddyfile"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(raw, map[string]any{"filename": f})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var cfg struct {
			Apps struct {
				HTTP struct {
					Servers map[string]map[string]any `json:"servers"`
				} `json:"http"`
			} `json:"apps"`
		}
		if err := json.Unmarshal(adapted, &cfg); err != nil || len(cfg.Apps.HTTP.Servers) == 0 {
			t.Fatalf("%s: %v %s", f, err, adapted)
		}
		for name, srv := range cfg.Apps.HTTP.Servers {
			if srv["read_timeout"] != float64(30*time.Second) || srv["read_header_timeout"] != float64(10*time.Second) {
				t.Errorf("%s %s: read_timeout %v, read_header_timeout %v", f, name, srv["read_timeout"], srv["read_header_timeout"])
			}
			if srv["write_timeout"] != nil || srv["idle_timeout"] != nil {
				t.Errorf("%s %s: write_timeout %v, idle_timeout %v", f, name, srv["write_timeout"], srv["idle_timeout"])
			}
		}
	}
}
