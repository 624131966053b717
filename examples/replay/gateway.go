// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/hybridllm/caddy-hybrid-llm"
	"github.com/hybridllm/caddy-hybrid-llm/examples/replay/trace"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const (
	selfModel  = "qwen2.5-7b-instruct"
	cloudModel = "gpt-4o-mini"
)

// setup is what a replay runs against: the gateway's URLs, the client
// key, and what stops it all.
type setup struct {
	gateway, admin string
	key            string
	stop           func()
}

// startAll starts a simulated vLLM with the model's slots (one GPU), a
// simulated cloud as fast, and the gateway in this process, a real Caddy
// with the module, from the Caddyfile at cfgPath. The Caddyfile reads its
// addresses, slots, prices and keys from the environment, as the
// quickstart does; Caddy's logs go to out/caddy.log and its storage (the
// ledger's days) to a directory of its own, so that nothing from an
// earlier run is in the ledger.
//
// A Caddyfile that prices the cloud per token (the quickstart) gets a
// price per completion token equal to the per-second price for a request
// of completion tokens, so that its dollars compare with the ideal's.
func startAll(cfgPath string, m trace.Model, completion int, gpus, gpuCost, cloudPerGPUSec float64, out string) (*setup, error) {
	slots := int(math.Round(m.SlotsPerGPU * gpus))
	vllm := simulator.NewVLLM(simulator.VLLMConfig{
		ServedModelNames: []string{selfModel}, MaxNumSeqs: slots,
		TTFT: m.TTFT, ITL: m.ITL, DisableRecording: true,
	})
	cloudKey := "sk-replay-cloud-" + randomHex(8)
	cloud := simulator.NewCloud(simulator.CloudConfig{
		Models: []string{cloudModel}, APIKey: cloudKey,
		TTFT: m.TTFT, ITL: m.ITL, DisableRecording: true,
	})
	selfSrv, err := simulator.Start("127.0.0.1:0", vllm)
	if err != nil {
		return nil, err
	}
	cloudSrv, err := simulator.Start("127.0.0.1:0", cloud)
	if err != nil {
		_ = selfSrv.Close()
		return nil, err
	}
	stopSims := func() { _ = selfSrv.Close(); _ = cloudSrv.Close() }
	listen, admin, err := freePort(), freePort(), error(nil)
	if listen == "" || admin == "" {
		stopSims()
		return nil, fmt.Errorf("no free loopback port")
	}
	clientKey := "sk-replay-client-" + randomHex(12)
	env := map[string]string{
		"HYBRID_PORT": port(listen), "HYBRID_ADMIN": admin,
		"SELF_UPSTREAMS": selfSrv.Addr(), "SELF_MODEL": selfModel,
		"SELF_MAX_NUM_SEQS": strconv.Itoa(slots),
		"SELF_GPUS":         fmtFloat(gpus), "SELF_GPU_COST_PER_MONTH": fmtFloat(gpuCost),
		"CLOUD_UPSTREAM": cloudSrv.URL(), "CLOUD_MODEL": cloudModel, "CLOUD_API_KEY": cloudKey,
		// a request-second is one slot of a GPU
		"CLOUD_PER_SECOND":         fmtFloat(cloudPerGPUSec / m.SlotsPerGPU),
		"CLOUD_INPUT_PER_MILLION":  "0",
		"CLOUD_OUTPUT_PER_MILLION": fmtFloat(cloudPerGPUSec / m.SlotsPerGPU * m.Service(completion).Seconds() / float64(completion) * 1e6),
		"HYBRID_CLIENT_KEYS":       "replay=" + clientKey,
	}
	restore := setEnv(env)
	stopSims = func() { _ = selfSrv.Close(); _ = cloudSrv.Close(); restore() }
	cfg, err := gatewayConfig(cfgPath, filepath.Join(out, "caddy.log"), filepath.Join(out, "storage"))
	if err == nil {
		err = loopbackOnly(cfg)
	}
	if err == nil {
		err = caddy.Load(cfg, true)
	}
	if err != nil {
		stopSims()
		return nil, fmt.Errorf("starting the gateway from %s: %v", cfgPath, err)
	}
	s := &setup{
		gateway: "http://" + listen, admin: "http://" + admin, key: clientKey,
		stop: func() { _ = caddy.Stop(); stopSims() },
	}
	if err := s.waitReady(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// gatewayConfig adapts the Caddyfile and gives it the replay's log file
// and storage.
func gatewayConfig(path, logFile, storage string) ([]byte, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(body, map[string]any{"filename": path})
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		return nil, err
	}
	cfg["storage"] = map[string]any{"module": "file_system", "root": storage}
	// every log to the file: the default one, and those the Caddyfile names
	// (an access log) without a writer of their own
	logging, _ := cfg["logging"].(map[string]any)
	if logging == nil {
		logging = map[string]any{}
	}
	logs, _ := logging["logs"].(map[string]any)
	if logs == nil {
		logs = map[string]any{}
	}
	writer := map[string]any{"output": "file", "filename": logFile}
	if _, ok := logs["default"]; !ok {
		logs["default"] = map[string]any{}
	}
	for _, l := range logs {
		if l, ok := l.(map[string]any); ok && l["writer"] == nil {
			l["writer"] = writer
		}
	}
	logging["logs"], cfg["logging"] = logs, logging
	return json.Marshal(cfg)
}

// waitReady waits until the gateway's self-hosted endpoints have been
// probed healthy.
func (s *setup) waitReady() error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := readState(s.admin); err == nil && st.probed() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the gateway at %s did not report its self-hosted endpoints healthy within 15s", s.admin)
}

// setEnv sets the variables the Caddyfile reads; what it returns puts
// back the ones it replaced.
func setEnv(env map[string]string) (restore func()) {
	old := map[string]*string{}
	for k, v := range env {
		if prev, ok := os.LookupEnv(k); ok {
			old[k] = &prev
		} else {
			old[k] = nil
		}
		_ = os.Setenv(k, v)
	}
	return func() {
		for k, v := range old {
			if v == nil {
				_ = os.Unsetenv(k)
			} else {
				_ = os.Setenv(k, *v)
			}
		}
	}
}

// loopbackOnly refuses a config whose proxies dial anything but loopback:
// a Caddyfile given with -config could name a real cloud, and the replay
// sends its load only to this machine.
func loopbackOnly(cfg []byte) error {
	var doc any
	if err := json.Unmarshal(cfg, &doc); err != nil {
		return err
	}
	repl := caddy.NewReplacer()
	var bad error
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "dial" && bad == nil {
					if err := checkLoopback(repl.ReplaceAll(s, "")); err != nil {
						bad = fmt.Errorf("an upstream dials %s: the replay sends traffic only to loopback addresses", s)
					}
				}
				if k == "dynamic_upstreams" && bad == nil {
					bad = fmt.Errorf("dynamic upstreams: the replay sends traffic only to upstreams it can check are on loopback")
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return bad
}

// checkTarget refuses any URL whose host is not loopback.
func checkTarget(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if err := checkLoopback(u.Host); err != nil {
		return fmt.Errorf("%s: the replay sends traffic only to loopback addresses", raw)
	}
	return nil
}

// checkLoopback is simulator.CheckLoopback for an address that may lack
// its port.
func checkLoopback(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "80")
	}
	return simulator.CheckLoopback(addr)
}

// port is the port of a host:port address.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer ln.Close()
	return ln.Addr().String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// getJSON decodes a GET's JSON answer into v.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

var adminClient = &http.Client{Timeout: 5 * time.Second}
