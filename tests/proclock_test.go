// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second gateway process beside one that owns its books (the same
// gateway name on the same data directory) or its admin address is
// refused as it starts, with the first one's pid and what to change;
// Caddy itself would start it, since it listens with SO_REUSEPORT, and
// the two would split the requests and keep one ledger. The same
// gateway under another name, or on a data directory of its own, runs.
func TestSecondProcessIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the caddy binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "caddy")
	build := exec.Command("go", "build", "-o", bin, "./xcaddy/cmd/caddy")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfgFile := func(name, admin, listen string) string {
		f := filepath.Join(dir, name+"-"+strings.ReplaceAll(admin, ":", "_")+".caddyfile")
		cfg := "{\n\tadmin " + admin + "\n}\nhttp://" + listen + " {\n\thybrid_llm {\n\t\tname " + name +
			"\n\t\tgroup cloud {\n\t\t\tkind openai\n\t\t\tproxy 127.0.0.1:1\n\t\t}\n\t\talias chat-main {\n\t\t\ttarget cloud m\n\t\t}\n\t}\n}\n"
		if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	command := func(ctx context.Context, data, cfg string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+data, "XDG_DATA_HOME="+data, "XDG_CONFIG_HOME="+data)
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		return cmd, out
	}
	// start runs a gateway until the test ends, once its admin answers
	start := func(data, cfg, admin string) *exec.Cmd {
		t.Helper()
		cmd, out := command(context.Background(), data, cfg)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
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
					return cmd
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the gateway on %s did not start:\n%s", admin, out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// refused runs a gateway that must exit at start, and returns what
	// it said
	refused := func(data, cfg string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd, out := command(ctx, data, cfg)
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
	admin1, admin2, admin3 := freeAddr(t), freeAddr(t), freeAddr(t)
	first := start(data, cfgFile("gw", admin1, freeAddr(t)), admin1)
	pid := "pid " + strconv.Itoa(first.Process.Pid)

	// the same books: the gateway's name on the same data directory
	said := refused(data, cfgFile("gw", admin2, freeAddr(t)))
	wantSaid(said, "another process ("+pid+") runs gateway \\\"gw\\\" on the data directory "+filepath.Join(data, "caddy"),
		"another name", "another storage")

	// the same admin address, with books of its own
	said = refused(filepath.Join(dir, "other-data"), cfgFile("gw", admin1, freeAddr(t)))
	wantSaid(said, "another process ("+pid+") serves the admin address "+admin1, "another admin address")

	// another name on the same data directory has books of its own
	start(data, cfgFile("gw2", admin3, freeAddr(t)), admin3)
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
