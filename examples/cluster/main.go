// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command cluster plays several gateways sharing one registry, on
// loopback: one etcd, a simulated vLLM and cloud, and three Caddy
// processes running examples/cluster/Caddyfile. It shows each replica's
// share of the red line, a drain reaching all three (with the measured
// delay), the shared red line holding under a burst (the simulated
// vLLM's requests, running and waiting, never above max_num_seqs +
// max_queue), etcd killed (traffic goes on) and back (the watch resyncs),
// and a replica killed (its lease expires, the others' shares grow).
// Run it with examples/cluster/demo.sh, which builds the binaries.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const (
	etcdClient = "127.0.0.1:23791"
	etcdPeer   = "127.0.0.1:23801"
	vllmAddr   = "127.0.0.1:9191"
	vllm2Addr  = "127.0.0.1:9193" // the vLLM the registry adds
	cloudAddr  = "127.0.0.1:9192"
	clientKey  = "sk-cluster-client-0123456789"
	cloudKey   = "sk-cluster-cloud-0123456789"
	maxSeqs    = 4
	maxQueue   = 1
	replicas   = 3
)

type gateway struct {
	n      int
	listen string
	admin  string
	cmd    *exec.Cmd
}

func main() {
	bin := flag.String("bin", "bin", "where caddy is")
	etcdBin := flag.String("etcd", "etcd", "the etcd binary (Debian: apt-get install etcd-server)")
	state := flag.String("state", ".cluster", "where the logs and etcd's data go")
	flag.Parse()
	if err := run(*bin, *etcdBin, *state); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	fmt.Println("\ncluster demo passed")
}

func run(bin, etcdBin, state string) error {
	etcdPath, err := exec.LookPath(etcdBin)
	if err != nil {
		return fmt.Errorf("no etcd binary (%v): apt-get install etcd-server, or -etcd PATH", err)
	}
	_ = os.RemoveAll(state)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			if p.Process != nil {
				_ = p.Process.Kill()
				_, _ = p.Process.Wait()
			}
		}
	}()

	// one etcd
	etcd := startEtcd(etcdPath, state)
	if err := etcd.Start(); err != nil {
		return err
	}
	procs = append(procs, etcd)
	if err := waitHTTP("http://"+etcdClient+"/health", 15*time.Second); err != nil {
		return fmt.Errorf("etcd: %v (see %s/etcd.log)", err, state)
	}

	// the upstreams, in this process: one vLLM of 4 slots, 300 ms a request
	vllm := simulator.NewVLLM(simulator.VLLMConfig{MaxNumSeqs: maxSeqs, TTFT: 300 * time.Millisecond, ITL: 10 * time.Millisecond, DisableRecording: true})
	vs, err := simulator.Start(vllmAddr, vllm)
	if err != nil {
		return err
	}
	defer vs.Close()
	cs, err := simulator.Start(cloudAddr, simulator.NewCloud(simulator.CloudConfig{APIKey: cloudKey, TTFT: 50 * time.Millisecond, DisableRecording: true}))
	if err != nil {
		return err
	}
	defer cs.Close()
	vllm2 := simulator.NewVLLM(simulator.VLLMConfig{MaxNumSeqs: maxSeqs, TTFT: 300 * time.Millisecond, ITL: 10 * time.Millisecond})
	vs2, err := simulator.Start(vllm2Addr, vllm2)
	if err != nil {
		return err
	}
	defer vs2.Close()

	// three gateways on one registry
	gws := make([]*gateway, replicas)
	for i := range gws {
		g := &gateway{n: i + 1, listen: fmt.Sprintf("127.0.0.1:918%d", i+1), admin: fmt.Sprintf("127.0.0.1:219%d", i+1)}
		g.cmd = exec.Command(filepath.Join(bin, "caddy"), "run", "--config", "examples/cluster/Caddyfile")
		g.cmd.Env = append(os.Environ(),
			"ETCD_ENDPOINTS=http://"+etcdClient, "HYBRID_PORT="+strings.TrimPrefix(g.listen, "127.0.0.1:"), "HYBRID_ADMIN="+g.admin,
			"SELF_UPSTREAMS="+vllmAddr, fmt.Sprintf("SELF_MAX_NUM_SEQS=%d", maxSeqs), fmt.Sprintf("SELF_MAX_QUEUE=%d", maxQueue),
			"CLOUD_UPSTREAM=http://"+cloudAddr, "CLOUD_API_KEY="+cloudKey, "HYBRID_CLIENT_KEYS=demo="+clientKey,
			"XDG_DATA_HOME="+filepath.Join(state, fmt.Sprint("gw", g.n)), "XDG_CONFIG_HOME="+filepath.Join(state, fmt.Sprint("gw", g.n)))
		log, err := os.Create(filepath.Join(state, fmt.Sprintf("gw%d.log", g.n)))
		if err != nil {
			return err
		}
		g.cmd.Stdout, g.cmd.Stderr = log, log
		if err := g.cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, g.cmd)
		gws[i] = g
	}
	fmt.Printf("# 1. one etcd (%s), three gateways (%s, %s, %s), one vLLM of %d slots with a queue of %d (%s)\n",
		etcdClient, gws[0].listen, gws[1].listen, gws[2].listen, maxSeqs, maxQueue, vllmAddr)
	if err := waitAll(gws, "every gateway sees three members", 20*time.Second, func(s *gwState) bool { return s.members() == replicas }); err != nil {
		return err
	}
	total := 0
	for _, g := range gws {
		s, _ := readState(g.admin)
		fmt.Printf("   gateway %d (member %s): red line %d of %d\n", g.n, s.member(), s.redLine(), maxSeqs+maxQueue)
		total += int(s.redLine())
	}
	fmt.Printf("   together %d: the endpoint's max_num_seqs + max_queue, never more\n", total)
	if total != maxSeqs+maxQueue {
		return fmt.Errorf("the red lines add up to %d", total)
	}

	fmt.Println("\n# 2. a drain through gateway 1's admin API reaches all three")
	began := time.Now()
	if err := post(gws[0].admin+"/hybrid_llm/drain", `{"group":"self"}`); err != nil {
		return err
	}
	if err := eachSees(gws, began, "drained", func(s *gwState) bool { return s.selfDrained() }); err != nil {
		return err
	}
	if err := post(gws[0].admin+"/hybrid_llm/undrain", `{"group":"self"}`); err != nil {
		return err
	}
	if err := waitAll(gws, "undrained", 5*time.Second, func(s *gwState) bool { return !s.selfDrained() }); err != nil {
		return err
	}

	fmt.Println("\n# 3. a second vLLM, listed in the registry through gateway 3's admin API, joins all three without a reload")
	began = time.Now()
	if err := post(gws[2].admin+"/hybrid_llm/registry", `{"key":"groups/self","value":{"endpoints":[{"address":"`+vllm2Addr+`"}]}}`); err != nil {
		return err
	}
	if err := eachSees(gws, began, vllm2Addr+" probed and up", func(s *gwState) bool { return s.endpointUp(vllm2Addr) }); err != nil {
		return err
	}
	where, failed := burst(gws, 12)
	served := 0
	for _, r := range vllm2.Requests() {
		if r.Method == http.MethodPost {
			served++
		}
	}
	fmt.Printf("   12 requests: answered by %v, failed %d; %d of them by the added vLLM\n", where, failed, served)
	if failed > 0 || served == 0 {
		return fmt.Errorf("the added vLLM served %d, %d failed", served, failed)
	}
	began = time.Now()
	if err := post(gws[2].admin+"/hybrid_llm/registry", `{"key":"groups/self","delete":true}`); err != nil {
		return err
	}
	if err := eachSees(gws, began, "removed", func(s *gwState) bool { return !s.endpointUp(vllm2Addr) }); err != nil {
		return err
	}

	fmt.Println("\n# 4. a burst of 45 requests at once, 15 through each gateway: the vLLM never holds more than its slots and queue")
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			running, waiting := vllm.Load()
			if n := int64(running + waiting); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	where, failed = burst(gws, 45)
	close(stop)
	<-sampled
	fmt.Printf("   answered by %v, failed %d; the vLLM's requests at most %d (running + waiting), its limit %d\n", where, failed, peak.Load(), maxSeqs+maxQueue)
	if peak.Load() > maxSeqs+maxQueue || failed > 0 || where["self"] == 0 {
		return fmt.Errorf("the shared red line did not hold: peak %d, %v, %d failed", peak.Load(), where, failed)
	}

	fmt.Println("\n# 5. etcd is killed: traffic goes on")
	_ = etcd.Process.Kill()
	_, _ = etcd.Process.Wait()
	where, failed = burst(gws, 9)
	fmt.Printf("   answered by %v, failed %d\n", where, failed)
	if failed > 0 {
		return fmt.Errorf("%d requests failed with etcd down", failed)
	}
	if err := post(gws[1].admin+"/hybrid_llm/drain", `{"group":"self"}`); err == nil {
		return errors.New("a drain succeeded with etcd down")
	} else {
		fmt.Printf("   a drain meanwhile: %v\n", err)
	}
	etcd = startEtcd(etcdPath, state)
	if err := etcd.Start(); err != nil {
		return err
	}
	procs = append(procs, etcd)
	if err := waitHTTP("http://"+etcdClient+"/health", 15*time.Second); err != nil {
		return fmt.Errorf("etcd again: %v", err)
	}
	back := time.Now()
	if err := waitAll(gws, "in touch with etcd again", 15*time.Second, func(s *gwState) bool { return s.heardSince(back) }); err != nil {
		return err
	}
	fmt.Printf("   etcd is back (the same data): every gateway heard from it within %s; a drain through gateway 2\n", time.Since(back).Round(100*time.Millisecond))
	began = time.Now()
	if err := post(gws[1].admin+"/hybrid_llm/drain", `{"group":"self"}`); err != nil {
		return err
	}
	if err := eachSees(gws, began, "drained", func(s *gwState) bool { return s.selfDrained() }); err != nil {
		return err
	}
	if err := post(gws[1].admin+"/hybrid_llm/undrain", `{"group":"self"}`); err != nil {
		return err
	}

	fmt.Println("\n# 6. gateway 3 is killed (no goodbye): its lease expires, the other two share the red line")
	_ = gws[2].cmd.Process.Signal(syscall.SIGKILL)
	_, _ = gws[2].cmd.Process.Wait()
	began = time.Now()
	if err := waitAll(gws[:2], "two members", 15*time.Second, func(s *gwState) bool { return s.members() == 2 }); err != nil {
		return err
	}
	total = 0
	for _, g := range gws[:2] {
		s, _ := readState(g.admin)
		total += int(s.redLine())
		fmt.Printf("   gateway %d: red line %d\n", g.n, s.redLine())
	}
	fmt.Printf("   %s after the kill (the lease is 5 s); together %d\n", time.Since(began).Round(100*time.Millisecond), total)
	if total != maxSeqs+maxQueue {
		return fmt.Errorf("the red lines add up to %d", total)
	}
	return nil
}

func startEtcd(path, state string) *exec.Cmd {
	cmd := exec.Command(path, "--name", "cluster", "--data-dir", filepath.Join(state, "etcd"),
		"--listen-client-urls", "http://"+etcdClient, "--advertise-client-urls", "http://"+etcdClient,
		"--listen-peer-urls", "http://"+etcdPeer, "--initial-advertise-peer-urls", "http://"+etcdPeer,
		"--initial-cluster", "cluster=http://"+etcdPeer)
	log, _ := os.OpenFile(filepath.Join(state, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	cmd.Stdout, cmd.Stderr = log, log
	return cmd
}

// burst sends n requests at once, spread over the gateways, and counts
// where they were answered.
func burst(gws []*gateway, n int) (map[string]int, int) {
	var mu sync.Mutex
	where, failed := map[string]int{}, 0
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func(g *gateway) {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, "http://"+g.listen+"/v1/chat/completions",
				strings.NewReader(`{"model":"chat-main","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+clientKey)
			resp, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed++
				return
			}
			where[resp.Header.Get("X-Hybrid-Target")]++
		}(gws[i%len(gws)])
	}
	wg.Wait()
	return where, failed
}

// eachSees waits for each gateway to see the change, and prints when.
func eachSees(gws []*gateway, began time.Time, what string, ok func(*gwState) bool) error {
	for _, g := range gws {
		for {
			if s, err := readState(g.admin); err == nil && ok(s) {
				fmt.Printf("   gateway %d: %s after %s\n", g.n, what, time.Since(began).Round(100*time.Microsecond))
				break
			}
			if time.Since(began) > 5*time.Second {
				return fmt.Errorf("gateway %d: not %s within 5s", g.n, what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

func waitAll(gws []*gateway, what string, within time.Duration, ok func(*gwState) bool) error {
	deadline := time.Now().Add(within)
	for _, g := range gws {
		for {
			if s, err := readState(g.admin); err == nil && ok(s) {
				break
			}
			if g.cmd.ProcessState != nil || time.Now().After(deadline) {
				return fmt.Errorf("gateway %d: not %s within %s (see its log)", g.n, what, within)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func waitHTTP(url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := client.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within %s", url, within)
}

func post(url, body string) error {
	resp, err := client.Post("http://"+strings.TrimPrefix(url, "http://"), "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// gwState is the part of a gateway's state the demo reads.
type gwState struct {
	Gateways []struct {
		Registry *struct {
			Member      string     `json:"member"`
			Members     int        `json:"members"`
			LastContact *time.Time `json:"last_contact"`
		} `json:"registry"`
		Groups []struct {
			Name      string `json:"name"`
			Drained   bool   `json:"drained"`
			Endpoints []struct {
				Address string `json:"address"`
				Health  string `json:"health"`
				RedLine int64  `json:"red_line"`
			} `json:"endpoints"`
		} `json:"groups"`
	} `json:"gateways"`
}

func readState(admin string) (*gwState, error) {
	resp, err := client.Get("http://" + admin + "/hybrid_llm/state")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s gwState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, err
	}
	if len(s.Gateways) != 1 || s.Gateways[0].Registry == nil {
		return nil, errors.New("no gateway with a registry")
	}
	return &s, nil
}

func (s *gwState) members() int { return s.Gateways[0].Registry.Members }

func (s *gwState) heardSince(t time.Time) bool {
	at := s.Gateways[0].Registry.LastContact
	return at != nil && at.After(t)
}

func (s *gwState) member() string { return s.Gateways[0].Registry.Member }

func (s *gwState) self() (drained bool, redLine int64) {
	for _, g := range s.Gateways[0].Groups {
		if g.Name == "self" && len(g.Endpoints) > 0 {
			return g.Drained, g.Endpoints[0].RedLine
		}
	}
	return false, 0
}

func (s *gwState) selfDrained() bool { d, _ := s.self(); return d }
func (s *gwState) redLine() int64    { _, r := s.self(); return r }

func (s *gwState) endpointUp(addr string) bool {
	for _, g := range s.Gateways[0].Groups {
		for _, ep := range g.Endpoints {
			if g.Name == "self" && ep.Address == addr {
				return ep.Health == "up"
			}
		}
	}
	return false
}
