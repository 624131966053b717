// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry/registrytest"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// A second gateway process beside one that owns its books (the same
// gateway name on the same data directory) or its admin address is
// refused as it starts, with the first one's pid and what to change;
// Caddy itself would start it, since it listens with SO_REUSEPORT, and
// the two would split the requests and keep one ledger. The same
// gateway under another name, or on a data directory of its own, runs.
func TestSecondProcessIsRefused(t *testing.T) {
	bin := caddyBinary(t)
	dir := t.TempDir()
	cfgFile := func(name, admin, listen string) string {
		return writeConfig(t, dir, "admin "+admin, "http://"+listen+" {\n\thybrid_llm {\n\t\tname "+name+
			"\n\t\tgroup cloud {\n\t\t\tkind openai\n\t\t\tproxy 127.0.0.1:1\n\t\t}\n\t\talias chat-main {\n\t\t\ttarget cloud m\n\t\t}\n\t}\n}\n")
	}
	start := func(data, cfg, admin string) *exec.Cmd {
		t.Helper()
		cmd, _ := startProcess(t, bin, data, cfg, admin)
		return cmd
	}
	refused := func(data, cfg string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd, out := caddyCommand(ctx, bin, data, cfg)
		if err := cmd.Run(); err == nil || ctx.Err() != nil {
			t.Fatalf("started beside the first gateway (%v):\n%s", err, out)
		}
		return out.String()
	}
	wantSaid := func(said string, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(said, p) {
				t.Errorf("the refusal does not say %q:\n%s", p, said)
			}
		}
	}

	data := filepath.Join(dir, "data")
	admin1, admin2, admin3 := registrytest.FreeAddr(t), registrytest.FreeAddr(t), registrytest.FreeAddr(t)
	first := start(data, cfgFile("gw", admin1, registrytest.FreeAddr(t)), admin1)
	pid := "pid " + strconv.Itoa(first.Process.Pid)

	// the same books: the gateway's name on the same data directory
	said := refused(data, cfgFile("gw", admin2, registrytest.FreeAddr(t)))
	wantSaid(said, "another process ("+pid+") runs gateway \\\"gw\\\" on the data directory "+filepath.Join(data, "caddy"),
		"another name", "another storage")

	// the same admin address, with books of its own
	said = refused(filepath.Join(dir, "other-data"), cfgFile("gw", admin1, registrytest.FreeAddr(t)))
	wantSaid(said, "another process ("+pid+") serves the admin address "+admin1, "another admin address")

	// another name on the same data directory has books of its own
	start(data, cfgFile("gw2", admin3, registrytest.FreeAddr(t)), admin3)
}

// Two replicas on one data directory, each with a storage of its own
// (which the refusal above suggests), have one Caddy instance ID; each
// still publishes its cloud spend under a key of its own, so both count
// the fleet's whole spend for budgets and the spend cap, not half each.
func TestReplicasOnOneDataDirectoryCountTheFleetSpend(t *testing.T) {
	bin := caddyBinary(t)
	te := registrytest.Start(t)
	cloud := simulator.NewCloud(simulator.CloudConfig{Models: []string{cloudModel}, APIKey: cloudKey})
	cloudSrv, err := simulator.Start("127.0.0.1:0", cloud)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloudSrv.Close() })
	dir := t.TempDir()
	data := filepath.Join(dir, "data") // one instance ID
	type replica struct {
		admin, listen, cfg string
		stop               func()
	}
	var replicas []*replica
	for i := range 2 {
		r := &replica{admin: registrytest.FreeAddr(t), listen: registrytest.FreeAddr(t)}
		cfg := writeConfig(t, dir, "admin "+r.admin+"\nstorage file_system {\n\troot "+filepath.Join(dir, fmt.Sprint("storage", i))+"\n}",
			"http://"+r.listen+" {\n\thybrid_llm {\n\t\tname fleet\n\t\tregistry etcd {\n\t\t\tendpoints "+te.URL+"\n\t\t}\n"+
				"\t\tgroup cloud {\n\t\t\tkind openai\n\t\t\tapi_key "+cloudKey+"\n\t\t\tcost {\n\t\t\t\tinput_per_million 2000\n\t\t\t\toutput_per_million 2000\n\t\t\t}\n\t\t\tproxy "+cloudSrv.URL()+"\n\t\t}\n"+
				"\t\tclients {\n\t\t\tclient team "+hashed("sk-team-fleet")+"\n\t\t}\n"+
				"\t\talias chat-main {\n\t\t\ttarget cloud "+cloudModel+"\n\t\t}\n\t}\n}\n")
		r.cfg = cfg
		_, r.stop = startProcess(t, bin, data, cfg, r.admin)
		waitListening(t, r.listen)
		replicas = append(replicas, r)
	}
	spentToday := func(r *replica) float64 {
		resp, err := http.Get("http://" + r.admin + "/hybrid_llm/clients?gateway=fleet")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		for _, c := range clientsOf(t, raw) {
			if c.Name == "team" {
				return c.CloudUSDToday
			}
		}
		return 0
	}
	send := func(r *replica) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.listen+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-team-fleet")
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", r.listen, resp.StatusCode, body)
		}
	}

	send(replicas[0])
	var one float64
	waitFor(t, "the first replica's spend", func() bool { one = spentToday(replicas[0]); return one > 0 })
	send(replicas[1])
	// the same request costs the same on either replica: each counts all
	// the fleet spent
	fleetCounts := func(requests int) {
		t.Helper()
		want := float64(requests) * one
		for i, r := range replicas {
			var got float64
			deadline := time.Now().Add(15 * time.Second)
			for got = spentToday(r); math.Abs(got-want) > 1e-9 && time.Now().Before(deadline); got = spentToday(r) {
				time.Sleep(50 * time.Millisecond)
			}
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("replica %d counts %v USD of the fleet's %v", i+1, got, want)
			}
		}
	}
	fleetCounts(2)
	resp, err := te.Client.Get(context.Background(), "/hybrid-llm/fleet/spend/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 2 {
		var keys []string
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
		t.Errorf("spend keys in etcd: %q, want one per replica", keys)
	}

	// a replica restarted counts what it spent before, once
	replicas[0].stop()
	_, replicas[0].stop = startProcess(t, bin, data, replicas[0].cfg, replicas[0].admin)
	waitListening(t, replicas[0].listen)
	fleetCounts(2)
	send(replicas[0])
	fleetCounts(3)
}

var (
	binaryOnce sync.Once
	binary     string
	binaryErr  error
)

// caddyBinary builds the caddy binary once per run of the tests.
func caddyBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the caddy binary")
	}
	binaryOnce.Do(func() {
		binary = filepath.Join(testStorage, "bin", "caddy")
		build := exec.Command("go", "build", "-o", binary, "./xcaddy/cmd/caddy")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binary
}

// writeConfig writes a Caddyfile of global options and a site.
func writeConfig(t *testing.T, dir, global, site string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "*.caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("{\n" + global + "\n}\n" + site); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// caddyCommand is caddy run with a Caddyfile, its data directory (and
// home) at data.
func caddyCommand(ctx context.Context, bin, data, cfg string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+data, "XDG_DATA_HOME="+data, "XDG_CONFIG_HOME="+data)
	out := new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out
}

// startProcess runs a gateway process until stop or the end of the
// test, and returns once its admin endpoint answers.
// waitListening waits until a started process's site accepts
// connections: its admin endpoint, which startProcess waits for, answers
// before Caddy's servers listen.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, "the site on "+addr+" to listen", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

func startProcess(t *testing.T, bin, data, cfg, admin string) (cmd *exec.Cmd, stop func()) {
	t.Helper()
	cmd, out := caddyCommand(context.Background(), bin, data, cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("the gateway on %s exited:\n%s", admin, out)
		default:
		}
		if resp, err := http.Get("http://" + admin + "/hybrid_llm/state"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, stop
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway on %s did not start:\n%s", admin, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
