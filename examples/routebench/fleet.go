// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The addresses the run uses, all on loopback.
const (
	replicaPort = 19401 // the replicas: 19401 to 19404
	cloudAddr   = "127.0.0.1:19405"
	proxyPort   = 19411 // the proxies under test: 19411, 19412
	adminPort   = 19421 // their admin listeners: 19421, 19422
)

func replicaAddrs(n int) []string {
	var a []string
	for i := range n {
		a = append(a, "127.0.0.1:"+strconv.Itoa(replicaPort+i))
	}
	return a
}

// allAddrs are every address the run listens on or starts something on.
func allAddrs() []string {
	a := append(replicaAddrs(4), cloudAddr)
	for i := range 2 {
		a = append(a, "127.0.0.1:"+strconv.Itoa(proxyPort+i), "127.0.0.1:"+strconv.Itoa(adminPort+i))
	}
	return a
}

// fleet is a set of vLLM simulators (and a cloud one, for the burst), on
// loopback listeners, fresh for each row.
type fleet struct {
	vllms   []*simulator.VLLM
	servers []*simulator.Server
	cloud   *simulator.Cloud
	before  []cacheCounters // at mark
}

// cacheCounters are a replica's prefix-cache counters, in tokens.
type cacheCounters struct{ hits, queries float64 }

func startFleet(addrs []string, cfg simulator.VLLMConfig) (*fleet, error) {
	f := &fleet{}
	for _, a := range addrs {
		v := simulator.NewVLLM(cfg)
		s, err := simulator.Start(a, v)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("replica %s: %w", a, err)
		}
		f.vllms = append(f.vllms, v)
		f.servers = append(f.servers, s)
	}
	return f, nil
}

func (f *fleet) startCloud(cfg simulator.CloudConfig) error {
	c := simulator.NewCloud(cfg)
	s, err := simulator.Start(cloudAddr, c)
	if err != nil {
		return fmt.Errorf("cloud %s: %w", cloudAddr, err)
	}
	f.cloud = c
	f.servers = append(f.servers, s)
	return nil
}

func (f *fleet) close() {
	for _, s := range f.servers {
		_ = s.Close()
	}
	f.servers = nil
}

// mark forgets the requests so far (the readiness checks) and takes the
// counters the row's are measured from.
func (f *fleet) mark() {
	f.before = f.before[:0]
	for _, v := range f.vllms {
		v.ResetRequests()
		f.before = append(f.before, counters(v))
	}
	if f.cloud != nil {
		f.cloud.ResetRequests()
	}
}

// cache returns each replica's prefix-cache counters since mark.
func (f *fleet) cache() []cacheCounters {
	var cs []cacheCounters
	for i, v := range f.vllms {
		c := counters(v)
		cs = append(cs, cacheCounters{c.hits - f.before[i].hits, c.queries - f.before[i].queries})
	}
	return cs
}

// requests returns each replica's chat requests since mark.
func (f *fleet) requests() []int {
	var ns []int
	for _, v := range f.vllms {
		n := 0
		for _, r := range v.Requests() {
			if r.Method == http.MethodPost && r.Path == "/v1/chat/completions" {
				n++
			}
		}
		ns = append(ns, n)
	}
	return ns
}

// sticky returns the share of the conversations' later turns that went
// to the replica that served their turn before, from the requests the
// replicas recorded since mark (a conversation is known by its first user
// message, a turn by its number of messages).
func (f *fleet) sticky() float64 {
	type turn struct {
		conv string
		n    int64
	}
	where := map[turn]int{}
	for i, v := range f.vllms {
		for _, r := range v.Requests() {
			if r.Method == http.MethodPost && r.Path == "/v1/chat/completions" {
				m := gjson.GetManyBytes(r.Body, "messages.1.content", "messages.#")
				where[turn{m[0].String(), m[1].Int()}] = i
			}
		}
	}
	same, later := 0, 0
	for t, i := range where {
		if j, ok := where[turn{t.conv, t.n - 2}]; ok {
			later++
			if i == j {
				same++
			}
		}
	}
	if later == 0 {
		return math.NaN()
	}
	return float64(same) / float64(later)
}

// counters reads a replica's vllm:prefix_cache_hits_total and
// vllm:prefix_cache_queries_total, all engines summed, from its /metrics.
func counters(v *simulator.VLLM) cacheCounters {
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(promodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		return cacheCounters{}
	}
	sum := func(name string) float64 {
		t := 0.0
		for _, m := range families[name].GetMetric() {
			t += m.GetCounter().GetValue()
		}
		return t
	}
	return cacheCounters{sum("vllm:prefix_cache_hits_total"), sum("vllm:prefix_cache_queries_total")}
}

// caddy is one Caddy process under test.
type caddy struct {
	name   string
	port   int
	admin  int
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed once the process ended
}

func (c *caddy) url() string {
	return "http://127.0.0.1:" + strconv.Itoa(c.port) + "/v1/chat/completions"
}

// runner starts Caddy processes from bin and keeps what they write in
// work.
type runner struct {
	bin, work string
	n         int
	running   []*caddy
}

// adapt reports whether bin/caddy adapts the Caddyfile, and its error.
func (r *runner) adapt(name, cfg string) error {
	path := filepath.Join(r.work, name+".caddyfile")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(r.bin, "caddy"), "adapt", "--config", path, "--adapter", "caddyfile").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, lastLines(string(out), 5))
	}
	return nil
}

// start runs a Caddy with cfg (a Caddyfile) and env added to its
// environment.
func (r *runner) start(name string, port, admin int, cfg string, env ...string) (*caddy, error) {
	r.n++
	path := filepath.Join(r.work, fmt.Sprintf("%s-%d.caddyfile", name, r.n))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	c := &caddy{name: name, port: port, admin: admin, log: filepath.Join(r.work, fmt.Sprintf("%s-%d.log", name, r.n))}
	out, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	c.cmd = exec.Command(filepath.Join(r.bin, "caddy"), "run", "--config", path, "--adapter", "caddyfile")
	c.cmd.Stdout, c.cmd.Stderr = out, out
	// a home of its own: its storage (the gateway's spend, journal) and
	// Caddy's local CA stay in the run's temp dir
	home := filepath.Join(r.work, fmt.Sprintf("home-%d", r.n))
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	c.cmd.Env = append(append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home), env...)
	dieWithParent(c.cmd)
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	c.exited = make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	r.running = append(r.running, c)
	return c, nil
}

// stop kills every Caddy started and not stopped yet.
func (r *runner) stop() {
	for _, c := range r.running {
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	r.running = nil
}

// waitUp waits until c answers a chat request with 200, at most within.
func waitUp(c *caddy, model, key string, within time.Duration) error {
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: 5 * time.Second}
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodPost, c.url(),
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited:
			deadline = time.Time{} // it stopped: no use waiting
		case <-time.After(100 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(c.log)
	return fmt.Errorf("%s did not answer within %v; its log ends:\n%s", c.name, within, lastLines(string(b), 15))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// portsFree fails when something already listens on one of addrs.
func portsFree(addrs []string) error {
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, 200*time.Millisecond); err == nil {
			c.Close()
			return fmt.Errorf("%s is in use: is an earlier run still going?", a)
		}
	}
	return nil
}
