// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command routebench measures routing quality: how much of a multi-turn
// chat workload vLLM's prefix cache serves, and the time to first token
// the clients see, when the same workload goes through different proxies
// to the same fleet of 4 simulated vLLM replicas. Run it with
//
//	bash examples/routebench/run.sh [-seed 1] [-rows gateway,round_robin] [-burst=false]
//
// which builds bin/caddy first (from ./xcaddy/cmd/caddy). Everything runs
// on loopback (ports 127.0.0.1:19401 to 19422), the simulators in this
// process, each Caddy as `caddy run` of a Caddyfile written to a temp dir;
// a run takes about a minute and stops by itself. -max-load, -kv-share,
// -max-num-seqs, -ttft, -prefill, -itl and -max-tokens change the setup.
//
// The workload (its texts deterministic given -seed): 48 conversations
// of 6 turns sharing one system prompt of about 300 words; each
// conversation opens with its own user message of 50 to 100 words, and
// each later turn sends the whole conversation so far (the answers as
// returned) plus a new user message of 30 to 80 words. 8 clients send one
// request at a time each; a free client takes a ready conversation (one
// whose last turn was answered) at random, from a seeded source, so all
// 48 conversations are live at once, as 48 users reading and typing
// while 8 requests are in flight (the hard case for a cache: the whole
// working set is in use), and a conversation's turns reach the proxy
// from different clients and connections. (-owned instead gives each
// client its own 6 conversations, taken in turn: then a client's requests,
// and its conversations with them, follow it to the replica it just
// left, which plain least_conn turns into an accidental affinity.) Every
// request is a streamed chat completion with max_tokens 128 that asks for
// its usage chunk; TTFT is the time to the first content chunk, the
// prompt and cached tokens come from the usage chunk.
//
// The replicas: PrefixCaching, 4 slots each (MaxNumSeqs), a TTFT of 15 ms
// plus 100 µs per prompt token not in the cache (an uncached 2,000-token
// prompt: about 215 ms), 2 ms between tokens, and a prefix cache
// (KVCacheTokens) of a quarter of the workload's working set: the
// distinct 16-token blocks of all conversations' final prompts, printed.
// The fleet holds the working set only if each conversation stays on one
// replica.
// The simulator's time between tokens does not grow with the batch, as a
// real engine's does, so an uneven spread of requests costs less here
// than on GPUs.
//
// The rows, each with fresh simulators (empty caches) and the same seed:
//
//   - gateway: hybrid_llm over the 4 replicas with affinity { max_load
//     1.25 }, max_num_seqs 4, max_queue 4, metrics probed every 100 ms
//   - round_robin, least_conn: plain Caddy reverse_proxy with that
//     lb_policy
//   - gateway_no_affinity: the gateway without affinity (least load)
//   - two_gateways: two gateway processes with the first row's config,
//     each request sent to one of them at random (seeded)
//   - bound: one replica with 4 times the cache and the slots behind plain
//     Caddy: the hit rate a fleet-wide cache would reach (a reference, as
//     the upper bound; the cache that never evicts, printed
//     first, is the workload's true ceiling)
//
// For each: requests, errors, the fleet hit rate (cached tokens over
// prompt tokens, from the clients' usage, and from the replicas'
// vllm:prefix_cache_hits_total and _queries_total), TTFT p50 and p95,
// the requests each replica served (from the simulators), max/min of
// those, and the share of the conversations' later turns that went to the
// replica of their turn before. The workload's own limits are printed
// first: the hit rate of one cache that never evicts (no routing does
// better) and that of the shared system prompt alone (what any routing
// gets). The goals checked: the gateway's hit rate at least 0.85 × bound
// and 2 × round_robin, its TTFT p50 at most half round_robin's, max/min
// at most 1.5, no errors, and two gateways within 5 points of one.
//
// -burst (on by default) then measures priority classes: the gateway with
// a second target, a fast cloud, and clients of classes interactive and
// batch, on replicas that schedule by vLLM's priority. Interactive
// conversations at concurrency 4 alone, then with a batch client at
// concurrency 32 (over the fleet's 16 slots), the same through the
// gateway without classes (every client standard: the figures before
// them), then with a sheddable batch client instead: interactive TTFT p95 loaded against unloaded (goal:
// at most 1.5×), where batch went (self, cloud, 429) and the 503s (goal:
// none).
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const (
	vllmModel  = "qwen2.5-7b-instruct"
	cloudModel = "gpt-4o-mini"
	alias      = "chat-main"
)

// params are the run's settings.
type params struct {
	seed         uint64
	convs, turns int
	concurrency  int
	maxTokens    int
	replicas     int
	maxNumSeqs   int
	ttft         time.Duration
	prefill      time.Duration
	itl          time.Duration
	kvTokens     int    // each replica's KVCacheTokens
	maxLoad      string // the gateway's affinity max_load
	owned        bool   // each client owns its conversations
}

func (p *params) vllmConfig(policy string) simulator.VLLMConfig {
	return simulator.VLLMConfig{
		ServedModelNames: []string{vllmModel},
		MaxNumSeqs:       p.maxNumSeqs,
		KVCacheTokens:    p.kvTokens,
		TTFT:             p.ttft,
		PrefillPerToken:  p.prefill,
		ITL:              p.itl,
		PrefixCaching:    true,
		SchedulingPolicy: policy,
	}
}

// rowSpec is one way of routing the workload.
type rowSpec struct {
	key, title string
	bound      bool                                     // one replica of 4 times the cache and slots
	configs    func(p *params, addrs []string) []string // one Caddyfile per process
	model      string                                   // what the clients send
}

var rows = []rowSpec{
	{key: "gateway", title: "gateway", model: alias, configs: func(p *params, a []string) []string {
		return []string{gatewayConfig(0, p, a, true)}
	}},
	{key: "round_robin", title: "round_robin", model: vllmModel, configs: func(p *params, a []string) []string {
		return []string{plainConfig(0, a, "round_robin")}
	}},
	{key: "least_conn", title: "least_conn", model: vllmModel, configs: func(p *params, a []string) []string {
		return []string{plainConfig(0, a, "least_conn")}
	}},
	{key: "gateway_no_affinity", title: "gateway, affinity off", model: alias, configs: func(p *params, a []string) []string {
		return []string{gatewayConfig(0, p, a, false)}
	}},
	{key: "two_gateways", title: "two gateways", model: alias, configs: func(p *params, a []string) []string {
		return []string{gatewayConfig(0, p, a, true), gatewayConfig(1, p, a, true)}
	}},
	{key: "bound", title: "4× cache (bound)", bound: true, model: vllmModel, configs: func(p *params, a []string) []string {
		return []string{plainConfig(0, a, "")}
	}},
}

func siteHead(i int) string {
	return fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tskip_install_trust\n}\nhttp://:%d {\n\tbind 127.0.0.1\n\thandle /v1/* {\n",
		adminPort+i, proxyPort+i)
}

// gatewayConfig is the gateway of process i (its port and admin port).
func gatewayConfig(i int, p *params, addrs []string, affinity bool) string {
	aff := ""
	if affinity {
		aff = "\t\t\t\taffinity {\n\t\t\t\t\tmax_load " + p.maxLoad + "\n\t\t\t\t}\n"
	}
	return siteHead(i) + fmt.Sprintf("\t\thybrid_llm {\n\t\t\tgroup self {\n\t\t\t\tkind vllm\n\t\t\t\tproxy %s\n"+
		"\t\t\t\tmax_num_seqs %d\n\t\t\t\tmax_queue 4\n%s\t\t\t\tprobe {\n\t\t\t\t\tmetrics_interval 100ms\n\t\t\t\t}\n\t\t\t}\n"+
		"\t\t\talias %s {\n\t\t\t\ttarget self %s\n\t\t\t}\n\t\t}\n\t}\n}\n",
		strings.Join(addrs, " "), p.maxNumSeqs, aff, alias, vllmModel)
}

// plainConfig is plain Caddy's reverse_proxy with the lb_policy (none:
// Caddy's default).
func plainConfig(i int, addrs []string, policy string) string {
	lb := ""
	if policy != "" {
		lb = " {\n\t\t\tlb_policy " + policy + "\n\t\t}"
	}
	return siteHead(i) + fmt.Sprintf("\t\treverse_proxy %s%s\n\t}\n}\n", strings.Join(addrs, " "), lb)
}

// rowResult is what a row measured.
type rowResult struct {
	spec       rowSpec
	requests   int
	errors     int
	firstErr   string
	hit        float64 // from the clients' usage
	simHit     float64 // from the replicas' counters
	p50, p95   float64
	perReplica []int
	sticky     float64 // later turns on their previous turn's replica
	wall       time.Duration
}

func (r *rowResult) spread() float64 {
	if len(r.perReplica) == 0 {
		return math.NaN()
	}
	lo, hi := slices.Min(r.perReplica), slices.Max(r.perReplica)
	if lo == 0 {
		return math.Inf(1)
	}
	return float64(hi) / float64(lo)
}

func main() {
	seed := flag.Uint64("seed", 1, "the workload's seed (texts; and the two gateways' picks)")
	rowList := flag.String("rows", "", "rows to run, comma-separated, of gateway,round_robin,least_conn,gateway_no_affinity,two_gateways,bound (default all)")
	convs := flag.Int("conversations", 48, "conversations")
	turns := flag.Int("turns", 6, "turns of each conversation")
	conc := flag.Int("concurrency", 8, "clients, each sending one request at a time")
	bin := flag.String("bin", "bin", "folder with caddy")
	burst := flag.Bool("burst", true, "measure the priority burst after the rows")
	maxTokens := flag.Int("max-tokens", 128, "max_tokens of every request")
	kvShare := flag.Float64("kv-share", 0.25, "each replica's prefix cache, as a share of the workload's working set")
	maxNumSeqs := flag.Int("max-num-seqs", 4, "each replica's slots (MaxNumSeqs), and the gateway's max_num_seqs")
	ttft := flag.Duration("ttft", 15*time.Millisecond, "each replica's TTFT overhead")
	prefill := flag.Duration("prefill", 100*time.Microsecond, "each replica's prefill time per uncached prompt token")
	itl := flag.Duration("itl", 2*time.Millisecond, "each replica's inter-token latency")
	maxLoad := flag.String("max-load", "1.25", "the gateways' affinity max_load")
	owned := flag.Bool("owned", false, "each client owns conversations/concurrency conversations and takes their turns in order, instead of taking any ready conversation at random")
	flag.Parse()

	p := &params{seed: *seed, convs: *convs, turns: *turns, concurrency: *conc, maxTokens: *maxTokens,
		replicas: 4, maxNumSeqs: *maxNumSeqs, ttft: *ttft, prefill: *prefill, itl: *itl, maxLoad: *maxLoad, owned: *owned}
	if ml, err := strconv.ParseFloat(p.maxLoad, 64); p.convs < 1 || p.turns < 1 || p.concurrency < 1 || p.maxTokens < 1 ||
		p.maxNumSeqs < 1 || *kvShare <= 0 || err != nil || ml < 1 {
		fmt.Fprintln(os.Stderr, "routebench: -conversations, -turns, -concurrency, -max-tokens, -max-num-seqs and -kv-share must be positive, -max-load a number of at least 1")
		os.Exit(2)
	}
	selected := rows
	if *rowList != "" {
		selected = nil
		for _, k := range strings.Split(*rowList, ",") {
			i := slices.IndexFunc(rows, func(r rowSpec) bool { return r.key == strings.TrimSpace(k) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "routebench: unknown row %q\n", k)
				os.Exit(2)
			}
			selected = append(selected, rows[i])
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := run(ctx, p, *kvShare, *bin, selected, *burst)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, p *params, kvShare float64, bin string, selected []rowSpec, burst bool) int {
	if err := portsFree(allAddrs()); err != nil {
		fmt.Fprintln(os.Stderr, "routebench:", err)
		return 1
	}
	work, err := os.MkdirTemp("", "routebench")
	if err != nil {
		fmt.Fprintln(os.Stderr, "routebench:", err)
		return 1
	}
	defer os.RemoveAll(work)
	r := &runner{bin: bin, work: work}
	defer r.stop()

	w := newWorkload(p.seed, p.convs, p.turns)
	blocks, ideal, system := w.workingSet(vllmModel, p.maxTokens)
	p.kvTokens = int(math.Ceil(float64(blocks)*kvShare)) * 16
	fmt.Printf("workload: %d conversations × %d turns, concurrency %d, max_tokens %d, seed %d\n",
		p.convs, p.turns, p.concurrency, p.maxTokens, p.seed)
	fmt.Printf("working set: %d blocks of 16 tokens (64 prompt bytes), %d tokens; each replica's cache: %d tokens (%.2f of it)\n",
		blocks, blocks*16, p.kvTokens, kvShare)
	fmt.Printf("hit rate of one cache that never evicts: %.3f; of the shared system prompt alone (any routing, once each replica saw it): %.3f\n",
		ideal, system)
	fmt.Printf("replicas: 4 × (max_num_seqs %d, TTFT %v + %v per uncached prompt token, ITL %v, prefix caching)\n\n",
		p.maxNumSeqs, p.ttft, p.prefill, p.itl)

	var results []*rowResult
	for _, spec := range selected {
		if ctx.Err() != nil {
			return 1
		}
		res, err := runRow(ctx, r, p, w, spec)
		r.stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "routebench: %s: %v\n", spec.key, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "%-22s %d requests, %d errors, hit rate %.3f, TTFT p50 %.1f ms, in %v\n",
			spec.key, res.requests, res.errors, res.hit, res.p50, res.wall.Round(10*time.Millisecond))
		if res.firstErr != "" {
			fmt.Fprintf(os.Stderr, "%-22s first error: %s\n", "", res.firstErr)
		}
		results = append(results, res)
	}
	printTable(results)
	printGoals(results, ideal)

	if burst && ctx.Err() == nil {
		if err := runBurst(ctx, r, p, w); err != nil {
			fmt.Fprintln(os.Stderr, "routebench: burst:", err)
			return 1
		}
	}
	return 0
}

// runRow runs the workload through one row's proxies, on fresh replicas.
func runRow(ctx context.Context, r *runner, p *params, w *workload, spec rowSpec) (*rowResult, error) {
	addrs := replicaAddrs(p.replicas)
	cfg := p.vllmConfig("")
	if spec.bound {
		addrs = addrs[:1]
		cfg.KVCacheTokens *= p.replicas
		cfg.MaxNumSeqs *= p.replicas
	}
	f, err := startFleet(addrs, cfg)
	if err != nil {
		return nil, err
	}
	defer f.close()
	var urls []string
	for i, c := range spec.configs(p, addrs) {
		cd, err := r.start(spec.key, proxyPort+i, adminPort+i, c)
		if err != nil {
			return nil, err
		}
		urls = append(urls, cd.url())
	}
	for _, c := range r.running {
		if err := waitUp(c, spec.model, "", 30*time.Second); err != nil {
			return nil, err
		}
	}
	// the gateways' probes have read every replica's metrics by now
	time.Sleep(300 * time.Millisecond)
	f.mark()
	w.reset()
	start := time.Now()
	res := runWorkload(ctx, w, urls, "", spec.model, p)
	out := &rowResult{spec: spec, wall: time.Since(start), perReplica: f.requests(), sticky: f.sticky()}
	var prompt, cached int
	var ttfts []time.Duration
	for _, x := range res {
		out.requests++
		if x.err != nil {
			out.errors++
			if out.firstErr == "" {
				out.firstErr = x.err.Error()
			}
			continue
		}
		prompt += x.prompt
		cached += x.cached
		ttfts = append(ttfts, x.ttft)
	}
	if prompt > 0 {
		out.hit = float64(cached) / float64(prompt)
	}
	var hits, queries float64
	for _, c := range f.cache() {
		hits += c.hits
		queries += c.queries
	}
	if queries > 0 {
		out.simHit = hits / queries
	}
	out.p50, out.p95 = percentile(ttfts, 50), percentile(ttfts, 95)
	return out, nil
}

// runWorkload sends w's turns through urls (one picked at random for each
// request when there are several, from each client's own seeded source)
// with p.concurrency clients, one request at a time each. A conversation
// has at most one request in flight; with p.owned, client i owns
// conversations i, i+concurrency, ... and advances them in turn; else a
// free client takes a ready conversation (one whose turn before was
// answered) at random, from a seeded source. It returns every request's
// result.
func runWorkload(ctx context.Context, w *workload, urls []string, key, model string, p *params) []result {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	client := newHTTPClient(p.concurrency)
	defer client.CloseIdleConnections()

	var (
		mu       sync.Mutex
		changed  = sync.NewCond(&mu)
		results  []result
		ready    = slices.Clone(w.convs)
		turn     = map[*conversation]int{}
		inFlight int
		rng      = rand.New(rand.NewPCG(p.seed, 0x7265616479))
	)
	// take returns a ready conversation and its turn, nil when none is
	// left
	take := func() (*conversation, int) {
		mu.Lock()
		defer mu.Unlock()
		for len(ready) == 0 && inFlight > 0 && ctx.Err() == nil {
			changed.Wait()
		}
		if len(ready) == 0 || ctx.Err() != nil {
			return nil, 0
		}
		k := rng.IntN(len(ready))
		c := ready[k]
		ready = slices.Delete(ready, k, k+1)
		inFlight++
		return c, turn[c]
	}
	done := func(c *conversation, x result) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, x)
		turn[c]++
		if !p.owned {
			inFlight--
			if turn[c] < w.turns {
				ready = append(ready, c)
			}
			changed.Broadcast()
		}
	}
	var wg sync.WaitGroup
	for i := range p.concurrency {
		pick := rand.New(rand.NewPCG(p.seed, uint64(i)))
		next := take
		if p.owned {
			// client i's conversations, turn by turn
			var own []*conversation
			for j := i; j < len(w.convs); j += p.concurrency {
				own = append(own, w.convs[j])
			}
			k := 0
			next = func() (*conversation, int) {
				if k == len(own)*w.turns || ctx.Err() != nil {
					return nil, 0
				}
				k++
				return own[(k-1)%len(own)], (k - 1) / len(own)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, t := next()
				if c == nil {
					return
				}
				url := urls[0]
				if len(urls) > 1 {
					url = urls[pick.IntN(len(urls))]
				}
				x := chat(ctx, client, url, key, requestBody(model, c.next(t), p.maxTokens))
				// an answer that failed goes on as an empty one
				c.answered(t, x.answer)
				done(c, x)
			}
		}()
	}
	wg.Wait()
	return results
}

func printTable(results []*rowResult) {
	if len(results) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("| row | requests | errors | fleet hit rate | hit rate (vLLM counters) | TTFT p50 (ms) | TTFT p95 (ms) | requests per replica | max/min | turns on the previous turn's replica |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
	for _, r := range results {
		var per []string
		for _, n := range r.perReplica {
			per = append(per, strconv.Itoa(n))
		}
		fmt.Printf("| %s | %d | %d | %.3f | %.3f | %.1f | %.1f | %s | %.2f | %.2f |\n", r.spec.title, r.requests, r.errors,
			r.hit, r.simHit, r.p50, r.p95, strings.Join(per, "/"), r.spread(), r.sticky)
	}
}

// printGoals checks the goals; ideal is the hit rate of a cache that
// never evicts, which no routing exceeds.
func printGoals(results []*rowResult, ideal float64) {
	by := map[string]*rowResult{}
	for _, r := range results {
		by[r.spec.key] = r
	}
	gw := by["gateway"]
	var lines []string
	check := func(ok bool, format string, args ...any) {
		mark := "ok    "
		if !ok {
			mark = "MISSED"
		}
		lines = append(lines, fmt.Sprintf("- %s %s", mark, fmt.Sprintf(format, args...)))
	}
	if gw != nil {
		if b := by["bound"]; b != nil {
			check(gw.hit >= 0.85*b.hit, "gateway hit rate %.3f ≥ 0.85 × bound %.3f (%.3f)", gw.hit, b.hit, 0.85*b.hit)
		}
		if rr := by["round_robin"]; rr != nil {
			note := ""
			if ideal < 2*rr.hit {
				note = fmt.Sprintf(": out of any router's reach, a cache that never evicts gets %.3f", ideal)
			}
			check(gw.hit >= 2*rr.hit, "gateway hit rate %.3f ≥ 2 × round_robin %.3f (%.3f)%s", gw.hit, rr.hit, 2*rr.hit, note)
			note = ""
			if b := by["bound"]; b != nil && b.p50 > 0.5*rr.p50 {
				note = fmt.Sprintf(": out of any router's reach, the bound's is %.1f ms", b.p50)
			}
			check(gw.p50 <= 0.5*rr.p50, "gateway TTFT p50 %.1f ms ≤ 0.5 × round_robin %.1f ms (%.1f)%s", gw.p50, rr.p50, 0.5*rr.p50, note)
		}
		check(gw.spread() <= 1.5, "gateway requests per replica max/min %.2f ≤ 1.5", gw.spread())
		if two := by["two_gateways"]; two != nil {
			check(math.Abs(two.hit-gw.hit) <= 0.05, "two gateways' hit rate %.3f within 5 points of one's %.3f", two.hit, gw.hit)
		}
	}
	errs := 0
	for _, r := range results {
		errs += r.errors
	}
	check(errs == 0, "no errors (%d)", errs)
	fmt.Println()
	fmt.Println("goals:")
	for _, l := range lines {
		fmt.Println(l)
	}
}
