// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package command

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // the caddyfile adapter, for --config
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/spf13/cobra"
)

// hybridCommand builds `caddy hybrid-llm` as Caddy's command line does.
func hybridCommand(t *testing.T) *cobra.Command {
	t.Helper()
	def, ok := caddycmd.Commands()["hybrid-llm"]
	if !ok {
		t.Fatal("the hybrid-llm command is not registered")
	}
	cmd := &cobra.Command{Use: def.Name + " " + def.Usage, Short: def.Short, Long: def.Long}
	def.CobraFunc(cmd)
	return cmd
}

// exitCode is the status Caddy's main exits with for a command's error.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if v := reflect.ValueOf(err); v.Kind() == reflect.Pointer {
		if f := v.Elem().FieldByName("ExitCode"); f.IsValid() {
			return int(f.Int())
		}
	}
	return 1
}

// A mistyped or missing subcommand is a usage error: the usage goes to
// stderr, nothing to stdout, and the exit status is 2.
func TestCommandUnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{{"stat"}, {}} {
		cmd := hybridCommand(t)
		var stdout, stderr bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SetArgs(args)
		err := cmd.Execute()
		if code := exitCode(err); code != 2 {
			t.Errorf("%q: exit status %d (%v), want 2", args, code, err)
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), "Available Commands:") {
			t.Errorf("%q: stdout %q, stderr %q: want the usage on stderr only", args, stdout.String(), stderr.String())
		}
		if len(args) > 0 && (err == nil || !strings.Contains(err.Error(), `unknown subcommand "stat"`)) {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// `help`, -h and --help print the usage on stdout and exit 0, with no
// error; `help <subcommand>` prints that subcommand's.
func TestCommandHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "drill"}} {
		cmd := hybridCommand(t)
		var stdout, stderr bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SetArgs(args)
		err := cmd.Execute()
		if err != nil || exitCode(err) != 0 {
			t.Errorf("%q: %v, want exit status 0", args, err)
		}
		want := "Available Commands:"
		if len(args) == 2 {
			want = "--alias"
		}
		if !strings.Contains(stdout.String(), want) || stderr.Len() != 0 {
			t.Errorf("%q: stdout %q, stderr %q: want the usage on stdout only", args, stdout.String(), stderr.String())
		}
	}
}

// The usage line names every subcommand.
func TestCommandUsageListsSubcommands(t *testing.T) {
	cmd := hybridCommand(t)
	line := strings.Fields(caddycmd.Commands()["hybrid-llm"].Usage)[0]
	listed := strings.Split(line, "|")
	for _, sub := range cmd.Commands() {
		if !slices.Contains(listed, sub.Name()) {
			t.Errorf("the usage %q does not list %q", line, sub.Name())
		}
	}
}

// With --config, the CLI talks to the admin address that config names
// (a Caddyfile or JSON), and state's first line says which admin API and
// which Caddy process answered, and its gateways.
func TestCommandConfigAddressAndWhoAnswered(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hybrid_llm/state" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(adminapi.StateDoc{Process: &adminapi.ProcessState{PID: 4242, Host: "gw-host", Version: "v2.11.9"},
			Gateways: []adminapi.GatewayState{{Name: "prod"}}})
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	addr := ln.Addr().String()
	dir := t.TempDir()
	files := map[string]string{
		"Caddyfile":  "{\n\tadmin " + addr + "\n}\n",
		"caddy.json": `{"admin":{"listen":"` + addr + `"}}`,
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := hybridCommand(t)
		var stdout, stderr bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SetArgs([]string{"state", "--config", path})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%s: %v (%s)", name, err, stderr.String())
		}
		first, _, _ := strings.Cut(stdout.String(), "\n")
		if want := "admin API " + addr + " (Caddy v2.11.9, pid 4242 on gw-host): gateway prod"; first != want {
			t.Errorf("%s: first line %q, want %q", name, first, want)
		}
	}

	// an admin API without the gateway's routes says so
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	cmd := hybridCommand(t)
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	cmd.SetArgs([]string{"state", "--address", other.Listener.Addr().String()})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "has no hybrid_llm routes") {
		t.Errorf("another Caddy's admin API: %v", err)
	}
}

// The drill's table has a line per endpoint and shows "-" for what did
// not happen: an endpoint that could not be reached has no status and no
// latency. A target with one dead endpoint of two fails.
func TestDrillTable(t *testing.T) {
	var out bytes.Buffer
	failed, failedEndpoints, err := writeDrill(&out, []adminapi.DrillResult{
		{Group: "self", Model: "qwen", DrillAnswer: adminapi.DrillAnswer{Error: "127.0.0.1:8002: connection_refused"}, Endpoints: []adminapi.DrillEndpoint{
			{Address: "127.0.0.1:8001", DrillAnswer: adminapi.DrillAnswer{Reachable: true, Status: 200, OK: true, LatencyMS: 41.6, AnsweredModel: "qwen"}},
			{Address: "127.0.0.1:8002", DrillAnswer: adminapi.DrillAnswer{Error: "connection_refused"}},
		}},
		{Group: "cloud", Model: "gpt-4o-mini", DrillAnswer: adminapi.DrillAnswer{Reachable: true, Status: 200, OK: true, LatencyMS: 80, AnsweredModel: "gpt-4o-mini"},
			Endpoints: []adminapi.DrillEndpoint{{Address: "api.cloud.example:443", DrillAnswer: adminapi.DrillAnswer{Reachable: true, Status: 200, OK: true, LatencyMS: 80, AnsweredModel: "gpt-4o-mini"}}}},
	})
	if err != nil || failed != 1 || failedEndpoints != 1 {
		t.Fatalf("failed %d targets, %d endpoints, %v", failed, failedEndpoints, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table: %q", out.String())
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[2] != "127.0.0.1:8001" || f[3] != "ok" || f[4] != "200" || f[5] != "42ms" || f[6] != "qwen" {
		t.Errorf("the live endpoint: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) < 8 || f[2] != "127.0.0.1:8002" || f[3] != "FAILED" || f[4] != "-" || f[5] != "-" || f[6] != "-" || f[7] != "connection_refused" {
		t.Errorf("the dead endpoint: %q", lines[2])
	}
	if f := strings.Fields(lines[3]); len(f) < 4 || f[0] != "cloud" || f[3] != "ok" {
		t.Errorf("the cloud: %q", lines[3])
	}
}

// The ledger's amounts keep three significant digits below a dollar: a
// short window's costs must not all print as 0.00.
func TestUSD(t *testing.T) {
	for v, want := range map[float64]string{0: "0.00", 1234.567: "1234.57", 1: "1.00", 0.5: "0.500", 0.002134: "0.00213", 0.0000412: "0.0000412", -0.25: "-0.250"} {
		if got := usd(v); got != want {
			t.Errorf("usd(%v) = %q, want %q", v, got, want)
		}
	}
}
