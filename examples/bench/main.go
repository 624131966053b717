// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command bench runs plain Caddy reverse_proxy and the hybrid_llm gateway
// side by side, on loopback, against the same vLLM simulators (zero
// latency for the request measures, a token every 250 ms for the streams,
// none at all for the idle streams) and the same load (vegeta), in
// alternation, and prints each measure as the hybrid/plain ratio. Both
// Caddys route the same paths; only the handler differs.
//
// A second pair measures the shipped quickstart, examples/Caddyfile as it
// is (its probes, breaker, overflow, costs, admin and access log), with
// its environment pointed at the simulators, against a plain Caddy with
// the same site: the same access log, routes and admin. Run it with
// examples/bench/run.sh, which builds the binaries first.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

const (
	simAddr     = "127.0.0.1:18001"
	idleSimAddr = "127.0.0.1:18002"
	// streams of 4 tokens 250 ms apart: a second each, so that 200
	// clients in a loop keep about 200 streams open without saturating
	// the machine
	streamSimAddr = "127.0.0.1:18003"
	model         = "qwen2.5-7b-instruct"
	cloudSimAddr  = "127.0.0.1:18004" // the quickstart's cloud group
	// the quickstart's client
	benchClientKey = "sk-bench-client-0123456789"
	// the mirror pair's upstreams: the main one, and its mirror ten
	// times slower
	mainSimAddr   = "127.0.0.1:18005"
	mirrorSimAddr = "127.0.0.1:18006"
)

type proxyUnderTest struct {
	name  string
	port  int
	admin int
	model string // what the client sends
	key   string // the client key it sends, if any
	cmd   *exec.Cmd
}

// header is what every request to the proxy carries.
func (p *proxyUnderTest) header() http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if p.key != "" {
		h.Set("Authorization", "Bearer "+p.key)
	}
	return h
}

func (p *proxyUnderTest) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(p.port) + path
}

func main() {
	bin := flag.String("bin", "bin", "folder with caddy and llmsim")
	dur := flag.Duration("duration", 2*time.Second, "length of each load run")
	rounds := flag.Int("rounds", 5, "rounds; each takes every measure of both proxies, back to back")
	idle := flag.Int("idle-streams", 5000, "idle streams for the memory measure (0 skips it)")
	quickstart := flag.String("quickstart", "examples/Caddyfile", "the quickstart Caddyfile to measure (empty skips it)")
	profiles := flag.String("profile", "", "folder for CPU profiles of each proxy during its throughput runs (from its admin's /debug/pprof)")
	mirror := flag.String("mirror", "", "a share such as 10%: measure the main requests' latency with a mirror of that share to a 10x slower target (empty skips it)")
	pinCPUs := flag.String("pin", "", "CPUs for the proxies under test, such as 1 or 8-15; the load and the simulators get the others (Linux; empty: no pinning)")
	instructions := flag.Int("instructions", 0, "instead of the timed measures: each proxy's instructions per request (user space) over that many requests, counted by valgrind's callgrind, which a shared machine does not disturb (needs valgrind)")
	flag.Parse()

	var pins *pinning
	if *pinCPUs != "" {
		var err error
		if pins, err = newPinning(*pinCPUs); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "pinned:", pins)
	}

	work, err := os.MkdirTemp("", "hybrid-bench")
	must(err)
	defer os.RemoveAll(work)

	var procs []*exec.Cmd
	stopAll := func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	defer stopAll()
	fail = func(msg string) {
		fmt.Fprintln(os.Stderr, "bench:", msg)
		stopAll()
		_ = os.RemoveAll(work)
		os.Exit(1)
	}
	for _, addr := range []string{simAddr, idleSimAddr, streamSimAddr, cloudSimAddr, "127.0.0.1:18101", "127.0.0.1:18102",
		"127.0.0.1:18103", "127.0.0.1:18104", "127.0.0.1:18201", "127.0.0.1:18202", "127.0.0.1:18203", "127.0.0.1:18204",
		mainSimAddr, mirrorSimAddr, "127.0.0.1:18105", "127.0.0.1:18106", "127.0.0.1:18205", "127.0.0.1:18206"} {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			fail(addr + " is in use: is an earlier run still going?")
		}
	}
	counted := map[*exec.Cmd]string{} // with -instructions: where callgrind counts each Caddy's instructions
	start := func(env []string, name string, args ...string) *exec.Cmd {
		c := exec.Command(filepath.Join(*bin, name), args...)
		if *instructions > 0 && name == "caddy" {
			out := filepath.Join(work, fmt.Sprintf("callgrind-%d", len(procs)))
			vg, argv, vgEnv := callgrind(c.Path, out, args)
			c = exec.Command(vg, argv...)
			env = append(env, vgEnv...)
			defer func() { counted[c] = out }()
		}
		// the output goes to a log, shown if the process does not come up
		out, err := os.Create(filepath.Join(work, fmt.Sprintf("%s-%d.log", name, len(procs))))
		must(err)
		c.Stdout, c.Stderr = out, out
		// a home of its own: two Caddys sharing one would race to create
		// the same local CA
		home := filepath.Join(work, fmt.Sprintf("home-%d", len(procs)))
		must(os.Mkdir(home, 0o700))
		c.Env = append(append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home), env...)
		if pins != nil && name == "caddy" {
			c.Env = append(c.Env, pins.proxyEnv()...)
		}
		must(c.Start())
		procs = append(procs, c)
		return c
	}
	start(nil, "llmsim", "vllm", "--listen", simAddr, "--served-model-name", model, "--ttft", "0", "--itl", "0",
		"--max-num-seqs", "100000", "--output-tokens", "16", "--quiet")
	start(nil, "llmsim", "vllm", "--listen", streamSimAddr, "--served-model-name", model, "--ttft", "0", "--itl", "250ms",
		"--max-num-seqs", "100000", "--quiet")
	start(nil, "llmsim", "vllm", "--listen", idleSimAddr, "--served-model-name", model, "--ttft", "0", "--itl", "1h",
		"--max-num-seqs", "100000", "--quiet")

	plain := &proxyUnderTest{name: "plain", port: 18101, admin: 18201, model: model}
	hybrid := &proxyUnderTest{name: "hybrid", port: 18102, admin: 18202, model: "chat-main"}
	// both Caddys route the same paths to the same simulators; only the
	// handler differs
	routes := []struct{ path, name, upstream string }{
		{"/idle", "idle", idleSimAddr}, {"/stream", "stream", streamSimAddr}, {"", "default", simAddr},
	}
	caddyfile := func(p *proxyUnderTest, handler func(name, upstream string) string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "{\n\tadmin 127.0.0.1:%d\n\tskip_install_trust\n}\nhttp://:%d {\n\tbind 127.0.0.1\n", p.admin, p.port)
		for _, r := range routes {
			if r.path == "" {
				b.WriteString("\thandle /v1/* {\n")
			} else {
				fmt.Fprintf(&b, "\thandle %s/* {\n\t\turi strip_prefix %s\n", r.path, r.path)
			}
			b.WriteString(handler(r.name, r.upstream))
			b.WriteString("\t}\n")
		}
		b.WriteString("}\n")
		return b.String()
	}
	configs := map[*proxyUnderTest]string{
		plain: caddyfile(plain, func(_, upstream string) string {
			return "\t\treverse_proxy " + upstream + "\n"
		}),
		hybrid: caddyfile(hybrid, func(name, upstream string) string {
			return fmt.Sprintf("\t\thybrid_llm {\n\t\t\tname %s\n\t\t\tgroup self {\n\t\t\t\tkind vllm\n\t\t\t\tproxy %s\n"+
				"\t\t\t}\n\t\t\talias chat-main {\n\t\t\t\ttarget self %s\n\t\t\t}\n\t\t}\n", name, upstream, model)
		}),
	}
	for p, cfg := range configs {
		path := filepath.Join(work, p.name+".caddyfile")
		must(os.WriteFile(path, []byte(cfg), 0o600))
		p.cmd = start(nil, "caddy", "run", "--config", path, "--adapter", "caddyfile")
	}
	all := []*proxyUnderTest{plain, hybrid}

	// the quickstart as shipped, and a plain Caddy with the same site: the
	// same access log (both to a file of their own), encode, routes and
	// admin
	var plainLog, quick *proxyUnderTest
	if *quickstart != "" {
		start(nil, "llmsim", "cloud", "--listen", cloudSimAddr, "--model", "gpt-4o-mini", "--api-key", "sk-bench", "--quiet")
		// both sides get the client key: the quickstart requires one,
		// plain Caddy forwards it (the same bytes either way)
		plainLog = &proxyUnderTest{name: "plain+log", port: 18104, admin: 18204, model: model, key: benchClientKey}
		quick = &proxyUnderTest{name: "quickstart", port: 18103, admin: 18203, model: "chat-main", key: benchClientKey}
		logs := func(p *proxyUnderTest) string { return filepath.Join(work, p.name+"-access.log") }
		// the quickstart's `log` writes to Caddy's default log; both sides
		// send theirs to a file
		global := func(p *proxyUnderTest) string {
			return fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tskip_install_trust\n\tlog default {\n\t\toutput file %s\n\t\tformat json\n\t}\n}\n", p.admin, logs(p))
		}
		qs, err := os.ReadFile(*quickstart)
		must(err)
		cfg := string(qs)
		i := strings.Index(cfg, "\n{\n")
		j := strings.Index(cfg, "\n}\n")
		if i < 0 || j < i {
			fail(*quickstart + ": no global options block")
		}
		// its global options, with the log sent to a file
		cfg = cfg[:i+1] + global(quick) + cfg[j+3:]
		qpath := filepath.Join(work, "quickstart.caddyfile")
		must(os.WriteFile(qpath, []byte(cfg), 0o600))
		quick.cmd = start([]string{
			"HYBRID_PORT=18103",
			"SELF_UPSTREAMS=" + simAddr, "SELF_MODEL=" + model,
			// the simulator's own --max-num-seqs: the red line is vLLM's
			"SELF_MAX_NUM_SEQS=100000",
			"CLOUD_UPSTREAM=http://" + cloudSimAddr, "CLOUD_API_KEY=sk-bench",
			"HYBRID_CLIENT_KEYS=bench=" + benchClientKey,
		}, "caddy", "run", "--config", qpath, "--adapter", "caddyfile")
		// the quickstart's log encoder on both sides: plain Caddy's keys
		// kept out of its log as the gateway's are
		plainCfg := global(plainLog) + fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tlog {\n\t\tformat hybrid_llm\n"+
			"\t}\n\tencode\n\thandle /v1/* {\n\t\treverse_proxy %s\n\t}\n"+
			"\thandle {\n\t\trespond \"not found: the API is under /v1/\" 404\n\t}\n}\n", plainLog.port, simAddr)
		ppath := filepath.Join(work, "plain-log.caddyfile")
		must(os.WriteFile(ppath, []byte(plainCfg), 0o600))
		plainLog.cmd = start(nil, "caddy", "run", "--config", ppath, "--adapter", "caddyfile")
		all = append(all, plainLog, quick)
	}
	// the same gateway with and without a mirror to a slower target
	var unmirrored, mirrored *proxyUnderTest
	if *mirror != "" {
		start(nil, "llmsim", "vllm", "--listen", mainSimAddr, "--served-model-name", model, "--ttft", "10ms", "--itl", "0",
			"--max-num-seqs", "100000", "--output-tokens", "16", "--quiet")
		start(nil, "llmsim", "cloud", "--listen", mirrorSimAddr, "--model", "gpt-4o-next", "--api-key", "sk-bench",
			"--ttft", "100ms", "--itl", "0", "--quiet")
		unmirrored = &proxyUnderTest{name: "gateway", port: 18105, admin: 18205, model: "chat-main"}
		mirrored = &proxyUnderTest{name: "gateway+mirror", port: 18106, admin: 18206, model: "chat-main"}
		for _, p := range []*proxyUnderTest{unmirrored, mirrored} {
			m := ""
			if p == mirrored {
				m = "\t\t\tmirror mirror gpt-4o-next {\n\t\t\t\tratio " + *mirror + "\n\t\t\t}\n"
			}
			cfg := fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tskip_install_trust\n}\nhttp://:%d {\n\tbind 127.0.0.1\n\thandle /v1/* {\n"+
				"\t\thybrid_llm {\n\t\t\tgroup self {\n\t\t\t\tkind vllm\n\t\t\t\tproxy %s\n\t\t\t}\n"+
				"\t\t\tgroup mirror {\n\t\t\t\tkind openai\n\t\t\t\tapi_key sk-bench\n\t\t\t\tproxy http://%s\n\t\t\t}\n"+
				"\t\t\talias chat-main {\n\t\t\t\ttarget self %s\n%s\t\t\t}\n\t\t}\n\t}\n}\n",
				p.admin, p.port, mainSimAddr, mirrorSimAddr, model, m)
			path := filepath.Join(work, p.name+".caddyfile")
			must(os.WriteFile(path, []byte(cfg), 0o600))
			p.cmd = start(nil, "caddy", "run", "--config", path, "--adapter", "caddyfile")
		}
		all = append(all, unmirrored, mirrored)
	}
	upWithin := 30 * time.Second
	if *instructions > 0 {
		upWithin = 3 * time.Minute // valgrind starts slowly
	}
	for _, p := range all {
		if !waitUp(p, upWithin) {
			b, _ := os.ReadFile(filepath.Join(work, fmt.Sprintf("caddy-%d.log", slices.Index(procs, p.cmd))))
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			fail(fmt.Sprintf("%s did not answer within %v; its log ends:\n%s", p.name, upWithin, strings.Join(lines[max(0, len(lines)-15):], "\n")))
		}
		if pins != nil {
			if err := pins.pin(p.cmd.Process.Pid); err != nil {
				fail(err.Error())
			}
		}
	}

	body := func(p *proxyUnderTest, stream bool) []byte {
		tokens := "16"
		if stream {
			tokens = "4" // a second at the stream simulator's pace
		}
		return []byte(`{"model":"` + p.model + `","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":` + tokens + `,"stream":` + strconv.FormatBool(stream) + `}`)
	}
	if *instructions > 0 {
		type pair struct {
			name          string
			plain, hybrid *proxyUnderTest
		}
		pairs := []pair{{"minimal config", plain, hybrid}}
		if quick != nil {
			pairs = append(pairs, pair{"quickstart (both with the access log)", plainLog, quick})
		}
		fmt.Println()
		fmt.Printf("%-40s %12s %12s %8s\n", fmt.Sprintf("instructions per request (%d requests)", *instructions), "plain", "hybrid", "ratio")
		for _, pr := range pairs {
			var v [2]float64
			for i, p := range []*proxyUnderTest{pr.plain, pr.hybrid} {
				var err error
				if v[i], err = instructionsPerRequest(p, counted[p.cmd], body(p, false), *instructions); err != nil {
					fail(err.Error())
				}
			}
			fmt.Printf("%-40s %12.0f %12.0f %8.3f\n", pr.name, v[0], v[1], v[1]/v[0])
		}
		return
	}

	// Each measure is taken of both proxies back to back, the order
	// swapped every round, so that the pair shares the machine's mood;
	// the table gives each side's median and the median of the per-round
	// ratios (differences for the added latency).
	type measure struct {
		name string
		run  func(p *proxyUnderTest) []float64 // one or more values
		pair [2]*proxyUnderTest                // the plain side and the hybrid side
		vals map[string][][]float64            // side ("plain", "hybrid") -> round -> values
	}
	latency := func(rate, workers int) func(p *proxyUnderTest) []float64 {
		return func(p *proxyUnderTest) []float64 {
			m := attack(p.url("/v1/chat/completions"), p.header(), body(p, false), rate, workers, *dur)
			return []float64{ms(m.Latencies.P50), ms(m.Latencies.P99)}
		}
	}
	// throughput, and the proxy's CPU time per request (user and system,
	// in µs): the cost of a request even on a machine the load shares
	round := 0
	throughput := func(p *proxyUnderTest) []float64 {
		var profiled sync.WaitGroup
		if *profiles != "" {
			profiled.Add(1)
			go func() {
				defer profiled.Done()
				profile(p, max(1, int(dur.Seconds())), filepath.Join(*profiles, fmt.Sprintf("%s-%d.pprof", p.name, round+1)))
			}()
		}
		defer profiled.Wait()
		cpu := procCPU(p.cmd.Process.Pid)
		m := attack(p.url("/v1/chat/completions"), p.header(), body(p, false), 0, 64, *dur)
		return []float64{m.Throughput, (procCPU(p.cmd.Process.Pid) - cpu).Seconds() * 1e6 / float64(m.Requests)}
	}
	minimal := [2]*proxyUnderTest{plain, hybrid}
	measures := []*measure{
		{name: "throughput", run: throughput, pair: minimal},
		{name: "latency@500", run: latency(500, 64), pair: minimal},
		{name: "latency@2000", run: latency(2000, 128), pair: minimal},
		{name: "ttfb", run: func(p *proxyUnderTest) []float64 {
			p50, p99 := streamsTTFB(p.url("/stream/v1/chat/completions"), body(p, true), 200, *dur)
			return []float64{p50, p99}
		}, pair: minimal},
	}
	if quick != nil {
		measures = append(measures,
			&measure{name: "qs-throughput", run: throughput, pair: [2]*proxyUnderTest{plainLog, quick}},
			&measure{name: "qs-latency@500", run: latency(500, 64), pair: [2]*proxyUnderTest{plainLog, quick}})
	}
	if mirrored != nil {
		measures = append(measures,
			&measure{name: "mirror-latency@500", run: latency(500, 64), pair: [2]*proxyUnderTest{unmirrored, mirrored}})
	}
	if *profiles != "" {
		must(os.MkdirAll(*profiles, 0o755))
	}
	for ; round < *rounds; round++ {
		for _, m := range measures {
			if m.vals == nil {
				m.vals = map[string][][]float64{}
			}
			for k := range 2 {
				side := (k + round) % 2 // the order swapped every round
				p := m.pair[side]
				v := m.run(p)
				name := [2]string{"plain", "hybrid"}[side]
				m.vals[name] = append(m.vals[name], v)
				fmt.Fprintf(os.Stderr, "round %d %-14s %-10s %v\n", round+1, m.name, p.name, v)
			}
		}
	}
	// side returns a proxy's median of value i of a measure; ratio and
	// diff, the median of the per-round hybrid/plain ratios or differences
	side := func(m *measure, name string, i int) float64 {
		var xs []float64
		for _, v := range m.vals[name] {
			xs = append(xs, v[i])
		}
		return median(xs)
	}
	paired := func(m *measure, i int, f func(h, p float64) float64) float64 {
		var xs []float64
		for r := range m.vals["plain"] {
			xs = append(xs, f(m.vals["hybrid"][r][i], m.vals["plain"][r][i]))
		}
		return median(xs)
	}
	ratio := func(h, p float64) float64 { return h / p }
	diff := func(h, p float64) float64 { return h - p }

	rssPeak := map[string]float64{}
	perStream := map[string]float64{}
	for _, p := range []*proxyUnderTest{plain, hybrid} {
		rssPeak[p.name] = procKB(p.cmd.Process.Pid, "VmHWM") / 1024
		if *idle > 0 {
			perStream[p.name] = idleStreams(p, body(p, true), *idle)
		}
	}

	fmt.Println()
	fmt.Printf("%-40s %12s %12s %8s\n", "measure (medians)", "plain", "hybrid", "ratio")
	row := func(name string, a, b, r float64) {
		fmt.Printf("%-40s %12.3f %12.3f %8.3f\n", name, a, b, r)
	}
	mrow := func(name string, m *measure, i int) {
		row(name, side(m, "plain", i), side(m, "hybrid", i), paired(m, i, ratio))
	}
	mrow("throughput, 64 connections (req/s)", measures[0], 0)
	mrow("CPU per request at full load (µs)", measures[0], 1)
	mrow("p50 latency at 500 req/s (ms)", measures[1], 0)
	mrow("p99 latency at 500 req/s (ms)", measures[1], 1)
	mrow("p50 latency at 2000 req/s (ms)", measures[2], 0)
	mrow("p99 latency at 2000 req/s (ms)", measures[2], 1)
	mrow("TTFB p50, 200 concurrent streams (ms)", measures[3], 0)
	mrow("TTFB p99, 200 concurrent streams (ms)", measures[3], 1)
	if quick != nil {
		mrow("quickstart: throughput, 64 conns (req/s)", measures[4], 0)
		mrow("quickstart: CPU per request (µs)", measures[4], 1)
		mrow("quickstart: p50 latency at 500 req/s (ms)", measures[5], 0)
		mrow("quickstart: p99 latency at 500 req/s (ms)", measures[5], 1)
	}
	if mirrored != nil {
		m := measures[len(measures)-1]
		fmt.Printf("%-40s %12s %12s %8s\n", "mirror "+*mirror+" to a 10x slower target", "without", "with", "ratio")
		mrow("  main p50 latency at 500 req/s (ms)", m, 0)
		mrow("  main p99 latency at 500 req/s (ms)", m, 1)
		fmt.Printf("  mirror copies (by outcome, and dropped): %s\n", mirrorCounts(mirrored))
	}
	row("peak RSS (MiB)", rssPeak["plain"], rssPeak["hybrid"], rssPeak["hybrid"]/rssPeak["plain"])
	if *idle > 0 {
		row(fmt.Sprintf("RSS per idle stream, %d streams (KiB)", *idle), perStream["plain"], perStream["hybrid"],
			perStream["hybrid"]/perStream["plain"])
	}
	fmt.Printf("\nadded p50 latency at 500 req/s: %+.3f ms; added TTFB p50: %+.3f ms (medians of the rounds' differences)\n",
		paired(measures[1], 0, diff), paired(measures[3], 0, diff))
	fmt.Printf("throughput hybrid/plain: minimal config %.3f", paired(measures[0], 0, ratio))
	if quick != nil {
		fmt.Printf(", quickstart as shipped (both with the access log) %.3f", paired(measures[4], 0, ratio))
	}
	fmt.Println()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// attack runs vegeta against url: at rate req/s, or as fast as the
// workers go when rate is 0.
func attack(url string, header http.Header, body []byte, rate, workers int, dur time.Duration) vegeta.Metrics {
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodPost, URL: url, Body: body, Header: header})
	opts := []func(*vegeta.Attacker){vegeta.Workers(uint64(workers)), vegeta.Connections(workers), vegeta.KeepAlive(true)}
	if rate == 0 {
		opts = append(opts, vegeta.MaxWorkers(uint64(workers)))
	}
	a := vegeta.NewAttacker(opts...)
	var m vegeta.Metrics
	for res := range a.Attack(tr, vegeta.Rate{Freq: rate, Per: time.Second}, dur, "bench") {
		m.Add(res)
	}
	m.Close()
	if m.Success < 0.999 {
		fmt.Fprintf(os.Stderr, "warning: %s: success %.4f (%v)\n", url, m.Success, m.Errors)
	}
	return m
}

// streamLength is how long a stream of the stream simulator lasts.
const streamLength = time.Second

// streamsTTFB keeps n streams open for dur: n clients each start a
// stream, read it to its end and start the next. It returns the median
// and the 99th percentile time to the first body byte, in ms.
func streamsTTFB(url string, body []byte, n int, dur time.Duration) (p50, p99 float64) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var ttfbs []float64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(dur)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// starts spread over a stream's length, not one burst
			time.Sleep(time.Until(start.Add(streamLength * time.Duration(i) / time.Duration(n))))
			for time.Now().Before(stop) {
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					return
				}
				br := bufio.NewReader(resp.Body)
				if _, err := br.ReadByte(); err == nil {
					d := time.Since(t0)
					mu.Lock()
					ttfbs = append(ttfbs, ms(d))
					mu.Unlock()
				}
				_, _ = io.Copy(io.Discard, br)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if len(ttfbs) == 0 {
		return 0, 0
	}
	sort.Float64s(ttfbs)
	return ttfbs[len(ttfbs)/2], ttfbs[len(ttfbs)*99/100]
}

// idleStreams holds n streams open through the proxy to a simulator that
// never sends a token, and returns the proxy's RSS growth per stream in KiB.
func idleStreams(p *proxyUnderTest, body []byte, n int) float64 {
	before := procKB(p.cmd.Process.Pid, "VmRSS")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0, DisableCompression: true}
	client := &http.Client{Transport: tr}
	var opened sync.WaitGroup
	var held sync.WaitGroup
	for range n {
		opened.Add(1)
		held.Add(1)
		go func() {
			defer held.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url("/idle/v1/chat/completions"), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			opened.Done()
			if err != nil {
				return
			}
			br := bufio.NewReader(resp.Body)
			_, _ = br.ReadString('\n') // the role event, then nothing
			<-ctx.Done()
			resp.Body.Close()
		}()
	}
	opened.Wait()
	time.Sleep(2 * time.Second) // let the proxy settle before sampling
	after := procKB(p.cmd.Process.Pid, "VmRSS")
	cancel()
	held.Wait()
	tr.CloseIdleConnections()
	return (after - before) / float64(n)
}

// profile saves a CPU profile of the proxy, taken for secs seconds by its
// admin endpoint.
func profile(p *proxyUnderTest, secs int, path string) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", p.admin, secs))
	if err != nil {
		fmt.Fprintln(os.Stderr, "warning: profile of", p.name+":", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	must(err)
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// procCPU returns the user and system CPU time a process used so far.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// the fields after the command name, which ends with ')'
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times:
// 100 on every Linux platform Go supports.
const clockTicks = 100

func procKB(pid int, field string) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseFloat(f[0], 64)
				return n
			}
		}
	}
	return 0
}

// waitUp reports whether the proxy answered a chat request within 30s.
func waitUp(p *proxyUnderTest, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodPost, p.url("/v1/chat/completions"),
			strings.NewReader(`{"model":"`+p.model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`))
		req.Header = p.header()
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// mirrorCounts sums the gateway's mirror copies by outcome, from its
// metrics.
func mirrorCounts(p *proxyUnderTest) string {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", p.admin))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(promodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return err.Error()
	}
	counts := map[string]float64{}
	for _, m := range families["caddy_hybrid_llm_mirror_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" {
				counts[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	for _, m := range families["caddy_hybrid_llm_mirror_dropped_total"].GetMetric() {
		counts["dropped"] += m.GetCounter().GetValue()
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// fail stops what the run started and exits.
var fail = func(msg string) {
	fmt.Fprintln(os.Stderr, "bench:", msg)
	os.Exit(1)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func must(err error) {
	if err != nil {
		fail(err.Error())
	}
}
