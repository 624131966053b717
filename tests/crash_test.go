// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry/registrytest"
)

// The prices of the crash tests' cloud, USD per million tokens.
const (
	crashInputPrice  = 5
	crashOutputPrice = 15
	crashKey         = "sk-team-crash"
)

// crashGateway is a gateway process of the crash tests: a priced cloud
// (a stand-in that answers with usage, and holds a request whose prompt
// says "hold" until the process goes), and a client with a budget.
type crashGateway struct {
	t                  *testing.T
	bin, dir, data     string
	admin, listen, cfg string
	prompts            atomic.Int64 // the stand-in's next prompt size
	held               atomic.Int64 // requests the stand-in holds
}

func newCrashGateway(t *testing.T, extra string) *crashGateway {
	t.Helper()
	c := &crashGateway{t: t, bin: caddyBinary(t), dir: t.TempDir()}
	c.data = filepath.Join(c.dir, "data")
	cloud := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "hold") {
			c.held.Add(1)
			defer c.held.Add(-1)
			<-r.Context().Done()
			return
		}
		p := 100 + c.prompts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":37,"total_tokens":%d}}`, p, p+37)
	})
	c.admin, c.listen = registrytest.FreeAddr(t), registrytest.FreeAddr(t)
	c.cfg = writeConfig(t, c.dir, "admin "+c.admin, "http://"+c.listen+" {\n\thybrid_llm {\n\t\tname crashgw\n"+
		"\t\tgroup cloud {\n\t\t\tkind openai\n\t\t\tmodel_check off\n\t\t\tcost {\n\t\t\t\tinput_per_million "+fmt.Sprint(crashInputPrice)+
		"\n\t\t\t\toutput_per_million "+fmt.Sprint(crashOutputPrice)+"\n\t\t\t}\n\t\t\tproxy "+cloud.URL()+"\n\t\t}\n"+
		"\t\tclients {\n\t\t\tclient team "+hashed(crashKey)+" {\n\t\t\t\tbudget_day_usd 100\n\t\t\t}\n\t\t}\n"+
		"\t\talias chat-main {\n\t\t\ttarget cloud m\n\t\t}\n"+extra+"\t}\n}\n")
	return c
}

// start runs the gateway process on the test's data directory.
func (c *crashGateway) start() (cmdKill func(), stop func()) {
	c.t.Helper()
	cmd, stop := startProcess(c.t, c.bin, c.data, c.cfg, c.admin)
	// the admin endpoint may answer before the config's gateway runs
	waitFor(c.t, "the gateway to run", func() bool {
		resp, err := http.Get("http://" + c.admin + "/hybrid_llm/clients?gateway=crashgw")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		conn, err := net.Dial("tcp", c.listen)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return func() {
		c.t.Helper()
		if err := cmd.Process.Kill(); err != nil {
			c.t.Fatal(err)
		}
		// gone once its admin address no longer answers
		waitFor(c.t, "the killed process to go", func() bool {
			resp, err := http.Get("http://" + c.admin + "/hybrid_llm/state")
			if err == nil {
				resp.Body.Close()
			}
			return err != nil
		})
	}, stop
}

// sendOK sends n requests, each of which must be answered 200, and
// returns what they cost.
func (c *crashGateway) sendOK(n int) (served float64) {
	c.t.Helper()
	for i := range n {
		status, usd, _ := c.send(fmt.Sprint("hello ", i))
		if status != http.StatusOK {
			c.t.Fatalf("request %d: %d", i, status)
		}
		served += usd
	}
	return served
}

// send makes a chat request as the client; it returns the status, and
// the answer's cost at the cloud's prices and its tokens.
func (c *crashGateway) send(content string) (status int, usd float64, tokens int64) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+c.listen+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat-main","messages":[{"role":"user","content":"`+content+`"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+crashKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var answer struct {
		Usage struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &answer)
	u := answer.Usage
	return resp.StatusCode, (float64(u.Prompt)*crashInputPrice + float64(u.Completion)*crashOutputPrice) / 1e6, u.Prompt + u.Completion
}

// books is what the gateway's books say of today: the spend book's, and
// the ledger's.
type books struct {
	spendTotal, spendTeam float64 // GET /hybrid_llm/clients
	ledgerUSD, ledgerTeam float64 // GET /hybrid_llm/ledger, today
	tokens, teamTokens    int64
	covered               float64
	unknown               json.RawMessage
}

func (b books) String() string {
	return fmt.Sprintf("spend book %.8f USD (team %.8f); ledger %.8f USD (team %.8f), %d tokens (team %d), covered %.1f s",
		b.spendTotal, b.spendTeam, b.ledgerUSD, b.ledgerTeam, b.tokens, b.teamTokens, b.covered)
}

func (c *crashGateway) books() books {
	c.t.Helper()
	get := func(path string, v any) {
		c.t.Helper()
		resp, err := http.Get("http://" + c.admin + path)
		if err != nil {
			c.t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, v); err != nil || resp.StatusCode != http.StatusOK {
			c.t.Fatalf("%s: %v %s", path, err, raw)
		}
	}
	var b books
	var cl struct {
		Gateways []struct {
			CloudUSDToday float64         `json:"cloud_usd_today"`
			Unknown       json.RawMessage `json:"spend_unknown"`
			Clients       []clientDoc     `json:"clients"`
		} `json:"gateways"`
	}
	get("/hybrid_llm/clients?gateway=crashgw", &cl)
	if len(cl.Gateways) != 1 {
		c.t.Fatalf("clients: %+v", cl)
	}
	b.spendTotal, b.unknown = cl.Gateways[0].CloudUSDToday, cl.Gateways[0].Unknown
	for _, cd := range cl.Gateways[0].Clients {
		if cd.Name == "team" {
			b.spendTeam = cd.CloudUSDToday
		}
	}
	var led struct {
		Gateways []struct {
			Covered float64        `json:"covered_seconds"`
			Tokens  map[string]int `json:"tokens"`
			Hybrid  struct {
				CloudUSD float64 `json:"cloud_usd"`
			} `json:"hybrid"`
			Clients []struct {
				Client     string  `json:"client"`
				Prompt     int64   `json:"prompt_tokens"`
				Completion int64   `json:"completion_tokens"`
				CloudUSD   float64 `json:"cloud_usd"`
			} `json:"clients"`
		} `json:"gateways"`
	}
	today := time.Now().UTC().Truncate(24 * time.Hour).Format(time.RFC3339)
	get("/hybrid_llm/ledger?gateway=crashgw&from="+today, &led)
	if len(led.Gateways) != 1 {
		c.t.Fatalf("ledger: %+v", led)
	}
	g := led.Gateways[0]
	b.ledgerUSD, b.covered = g.Hybrid.CloudUSD, g.Covered
	b.tokens = int64(g.Tokens["prompt"] + g.Tokens["completion"])
	for _, u := range g.Clients {
		if u.Client == "team" {
			b.ledgerTeam, b.teamTokens = u.CloudUSD, u.Prompt+u.Completion
		}
	}
	return b
}

// A process killed between a publication of its book and the journal's
// mark of it: the next one learns from the registry what the book there
// includes, and counts none of it again.
func TestCrashBetweenAPublicationAndItsMark(t *testing.T) {
	te := registrytest.Start(t)
	c := newCrashGateway(t, "\t\tregistry etcd {\n\t\t\tendpoints "+te.URL+"\n\t\t}\n")
	kill, _ := c.start()
	served := c.sendOK(4)
	waitFor(t, "the registry to hold it all", func() bool {
		resp, err := te.Client.Get(context.Background(), "/hybrid-llm/crashgw/spend/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		var b struct {
			Total struct {
				DayUSD float64 `json:"day_usd"`
			} `json:"total"`
		}
		return json.Unmarshal(resp.Kvs[0].Value, &b) == nil && near(b.Total.DayUSD, served)
	})
	kill()
	// as if killed before the marks were written
	segments, _ := filepath.Glob(filepath.Join(c.data, "caddy", "hybrid_llm", "journal", "crashgw", "*", "*.jsonl"))
	if len(segments) == 0 {
		t.Fatalf("no journal under %s", c.data)
	}
	for _, seg := range segments {
		raw, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, line := range strings.SplitAfter(string(raw), "\n") {
			if !strings.Contains(line, `"k":"p"`) {
				kept = append(kept, line)
			}
		}
		if err := os.WriteFile(seg, []byte(strings.Join(kept, "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.start()
	c.applied(te)
	if after := c.books(); !near(after.spendTeam, served) || !near(after.spendTotal, served) {
		t.Errorf("after the restart the fleet counts %.8f USD (team %.8f), %.8f served", after.spendTotal, after.spendTeam, served)
	}
}

// applied waits for the gateway to apply the registry as it is now: the
// books the processes before published are in its fleet's spend.
func (c *crashGateway) applied(te *registrytest.Etcd) {
	c.t.Helper()
	resp, err := te.Client.Get(context.Background(), "/hybrid-llm/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		c.t.Fatal(err)
	}
	rev := resp.Header.Revision
	waitFor(c.t, "the gateway to apply the registry", func() bool {
		r, err := http.Get("http://" + c.admin + "/hybrid_llm/registry?gateway=crashgw")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		var doc struct {
			Applied int64 `json:"applied_revision"`
		}
		return r.StatusCode == http.StatusOK && json.NewDecoder(r.Body).Decode(&doc) == nil && doc.Applied >= rev
	})
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

// A gateway killed (SIGKILL) with traffic in flight loses nothing of what
// it served: once restarted on the same data directory, its spend book
// and its ledger count every answer before the kill, at the cloud's
// prices, and agree; the ledger's covered time does not go back. Only the
// requests cut off by the kill, never answered, count nowhere.
func TestCrashLosesNoSpend(t *testing.T) {
	c := newCrashGateway(t, "")
	kill, _ := c.start()

	var served float64
	var tokens int64
	for i := range 12 {
		status, usd, n := c.send(fmt.Sprint("hello ", i))
		if status != http.StatusOK || usd <= 0 {
			t.Fatalf("request %d: %d, %v USD", i, status, usd)
		}
		served += usd
		tokens += n
	}
	// requests in flight at the kill: held by the cloud, never answered
	var inFlight sync.WaitGroup
	for range 3 {
		inFlight.Go(func() { c.send("hold") })
	}
	waitFor(t, "the requests in flight", func() bool { return c.held.Load() == 3 })
	var before books
	waitFor(t, "the books to count what was served", func() bool {
		before = c.books()
		return near(before.spendTeam, served) && before.tokens == tokens && before.covered >= 3
	})
	kill()
	inFlight.Wait()

	kill, _ = c.start()
	after := c.books()
	t.Logf("served before the kill: %.8f USD, %d tokens", served, tokens)
	t.Logf("before the kill: %v", before)
	t.Logf("after the restart: %v", after)
	if !near(after.spendTotal, served) || !near(after.spendTeam, served) {
		t.Errorf("the spend book counts %.8f USD (team %.8f) after the kill, %.8f served before it", after.spendTotal, after.spendTeam, served)
	}
	if !near(after.ledgerUSD, served) || !near(after.ledgerTeam, served) || after.tokens != tokens || after.teamTokens != tokens {
		t.Errorf("the ledger counts %.8f USD (team %.8f) and %d tokens (team %d) after the kill, %.8f USD and %d tokens served before it",
			after.ledgerUSD, after.ledgerTeam, after.tokens, after.teamTokens, served, tokens)
	}
	if after.covered < before.covered-1 {
		t.Errorf("the ledger covered %.1f s before the kill, %.1f s after it", before.covered, after.covered)
	}
	if !near(after.ledgerTeam, after.spendTeam) {
		t.Errorf("the ledger and the spend book disagree: %.8f and %.8f USD", after.ledgerTeam, after.spendTeam)
	}
	if len(after.unknown) > 0 {
		t.Errorf("after a kill the spend is unknown: %s", after.unknown)
	}

	// killed under steady traffic: what the books said a moment before
	// the kill is kept, and nothing is counted that no client received
	// (an answer is counted once its last byte is written: one whose
	// client had it all may be the kill's to lose)
	var mu sync.Mutex
	var received float64
	var answers int
	var done atomic.Bool
	var traffic sync.WaitGroup
	for range 4 {
		traffic.Go(func() {
			for !done.Load() {
				if status, usd, _ := c.send("steady"); status == http.StatusOK {
					mu.Lock()
					received += usd
					answers++
					mu.Unlock()
				}
			}
		})
	}
	waitFor(t, "steady traffic", func() bool { mu.Lock(); defer mu.Unlock(); return answers >= 40 })
	before = c.books()
	kill()
	done.Store(true)
	traffic.Wait()
	_, stop := c.start()
	after = c.books()
	t.Logf("killed under steady traffic, %d answers (%.8f USD) received in all: before the kill %v", answers, received, before)
	t.Logf("after the restart: %v", after)
	if after.spendTeam < before.spendTeam-1e-12 || after.spendTeam > served+received+1e-12 {
		t.Errorf("the spend book counts %.8f USD after the kill: %.8f a moment before it, %.8f received in all",
			after.spendTeam, before.spendTeam, served+received)
	}
	if !near(after.ledgerTeam, after.spendTeam) || !near(after.ledgerUSD, after.spendTotal) || after.tokens < before.tokens {
		t.Errorf("after the kill the ledger (%.8f USD, team %.8f) and the spend book (%.8f, team %.8f) disagree, or tokens went from %d to %d",
			after.ledgerUSD, after.ledgerTeam, after.spendTotal, after.spendTeam, before.tokens, after.tokens)
	}
	if after.covered < before.covered-1 {
		t.Errorf("the ledger covered %.1f s before the kill, %.1f s after it", before.covered, after.covered)
	}

	// and it goes on counting, and a graceful stop keeps it all too
	status, usd, n := c.send("after")
	if status != http.StatusOK {
		t.Fatalf("after the restart: %d", status)
	}
	waitFor(t, "the answer counted", func() bool { return near(c.books().spendTeam, after.spendTeam+usd) })
	stop()
	c.start()
	again := c.books()
	t.Logf("after a graceful stop: %v", again)
	if !near(again.spendTeam, after.spendTeam+usd) || !near(again.ledgerTeam, again.spendTeam) || again.tokens != after.tokens+n {
		t.Errorf("after a graceful stop: %v; want %.8f USD and %d tokens in both", again, after.spendTeam+usd, after.tokens+n)
	}
}

// A spend book in storage that cannot be read is set aside, never
// overwritten, and the cloud stays closed to the client with a budget,
// across a restart too, until an operator accepts counting on from what
// is known.
func TestUnreadableSpendKeepsCloudClosed(t *testing.T) {
	c := newCrashGateway(t, "")
	file := filepath.Join(c.data, "caddy", "hybrid_llm", "spend", "crashgw.json")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	const damaged = `{"total":{"day":"2026-`
	if err := os.WriteFile(file, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stop := c.start()
	closed := func(when string) {
		t.Helper()
		if status, _, _ := c.send("hello"); status != http.StatusServiceUnavailable {
			t.Errorf("%s: a client with a budget got %d from the cloud, want 503", when, status)
		}
		if b := c.books(); !strings.Contains(string(b.unknown), "set_aside_as") {
			t.Errorf("%s: GET /hybrid_llm/clients does not say the spend is unknown: %s", when, b.unknown)
		}
	}
	closed("at start")
	aside, _ := filepath.Glob(file + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("set aside: %q", aside)
	}
	if raw, _ := os.ReadFile(aside[0]); string(raw) != damaged {
		t.Errorf("what was set aside: %q", raw)
	}
	// the state survives a restart: the set-aside book is not forgotten
	stop()
	_, stop = c.start()
	closed("after a restart")

	resp, err := http.Post("http://"+c.admin+"/hybrid_llm/spend/accept", "application/json", strings.NewReader(`{"gateway":"crashgw"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"was_unknown":true`) {
		t.Fatalf("accept: %d %s", resp.StatusCode, raw)
	}
	if status, usd, _ := c.send("hello"); status != http.StatusOK {
		t.Fatalf("after the accept: %d", status)
	} else {
		waitFor(t, "the spend counted", func() bool { return near(c.books().spendTeam, usd) })
	}
	stop()
	c.start()
	if b := c.books(); len(b.unknown) > 0 {
		t.Errorf("after the accept and a restart, the spend is unknown: %s", b.unknown)
	}
	if raw, _ := os.ReadFile(aside[0]); string(raw) != damaged {
		t.Errorf("what was set aside changed: %q", raw)
	}
}

// A drain made through the admin API without a registry survives a
// restart, and so does the undrain that ends it.
func TestDrainSurvivesARestart(t *testing.T) {
	c := newCrashGateway(t, "")
	_, stop := c.start()
	action := func(path string) {
		t.Helper()
		resp, err := http.Post("http://"+c.admin+path, "application/json", strings.NewReader(`{"gateway":"crashgw","group":"cloud"}`))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Contains(string(raw), "not_stored") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
		}
	}
	want := func(when string, status int) {
		t.Helper()
		if got, _, _ := c.send("hello"); got != status {
			t.Errorf("%s: %d, want %d", when, got, status)
		}
	}
	action("/hybrid_llm/drain")
	want("drained", http.StatusServiceUnavailable)
	stop()
	_, stop = c.start()
	want("drained, after a restart", http.StatusServiceUnavailable)
	action("/hybrid_llm/undrain")
	want("undrained", http.StatusOK)
	stop()
	c.start()
	want("undrained, after a restart", http.StatusOK)
}

// With a registry the spend is the fleet's: each process publishes its
// book every 2 s. A process killed before it published its last answers
// loses none of them: the next one, on the same storage, counts what its
// journal holds beyond what was published into its own book.
func TestCrashLosesNoFleetSpend(t *testing.T) {
	te := registrytest.Start(t)
	c := newCrashGateway(t, "\t\tregistry etcd {\n\t\t\tendpoints "+te.URL+"\n\t\t}\n")
	kill, _ := c.start()
	served := c.sendOK(8)
	var before books
	waitFor(t, "the books to count what was served", func() bool { before = c.books(); return near(before.spendTeam, served) })
	// killed at once: the last answers are not published yet
	kill()
	kill, _ = c.start()
	c.applied(te) // the registry's watch brings the last process's book
	after := c.books()
	t.Logf("with a registry, served before the kill: %.8f USD; before it %v; after the restart %v", served, before, after)
	if !near(after.spendTeam, served) || !near(after.spendTotal, served) {
		t.Errorf("after the kill the fleet counts %.8f USD (team %.8f), %.8f served before it", after.spendTotal, after.spendTeam, served)
	}
	if !near(after.ledgerTeam, served) {
		t.Errorf("after the kill the ledger counts %.8f USD for the team, %.8f served", after.ledgerTeam, served)
	}

	// killed once all was published: nothing is counted twice
	for i := range 4 {
		status, usd, _ := c.send(fmt.Sprint("again ", i))
		if status != http.StatusOK {
			t.Fatalf("request %d: %d", i, status)
		}
		served += usd
	}
	waitFor(t, "the registry to hold it all", func() bool {
		resp, err := te.Client.Get(context.Background(), "/hybrid-llm/crashgw/spend/", clientv3.WithPrefix())
		if err != nil {
			return false
		}
		sum := 0.0
		for _, kv := range resp.Kvs {
			var b struct {
				Total struct {
					DayUSD float64 `json:"day_usd"`
				} `json:"total"`
			}
			_ = json.Unmarshal(kv.Value, &b)
			sum += b.Total.DayUSD
		}
		return near(sum, served)
	})
	kill()
	c.start()
	c.applied(te)
	if after = c.books(); !near(after.spendTeam, served) {
		t.Errorf("after a kill once all was published the fleet counts %.8f USD, %.8f served", after.spendTeam, served)
	}
}
