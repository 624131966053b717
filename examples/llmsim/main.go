// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command llmsim runs a simulated vLLM server or a simulated cloud
// OpenAI-compatible API on a loopback address, for demos and load tests.
//
//	llmsim vllm  --listen 127.0.0.1:8001 --served-model-name qwen2.5-7b-instruct --max-num-seqs 4 --ttft 50ms --itl 20ms
//	llmsim cloud --listen 127.0.0.1:8002 --model gpt-4o-mini --api-key sk-demo --rate-limit 5
//
// Both also accept failure-injection flags (--error-rate, --error-status,
// --stall, --cut-after) and serve the runtime control endpoints
// POST /_sim/health and GET/POST /_sim/failures (see simulator.WithControl);
// vllm also serves GET/POST /_sim/kv, which sets a floor under
// vllm:kv_cache_usage_perc or makes it climb, for example
//
//	curl -d '{"climb_to":0.95,"over":"30s"}' http://127.0.0.1:8001/_sim/kv
//
// vllm's --kv-cache-tokens sets the KV-cache capacity per engine that its
// modelled usage (prompt plus generated tokens of the running requests) is
// measured against, and with --prefix-caching the size of each engine's
// prefix cache (the least recently used blocks of 16 tokens go first).
// vllm's --prefill-per-token adds that time per prompt token the prefix
// cache did not serve to --ttft; --scheduling-policy priority orders each
// engine's queue by the requests' priority field (lower first), while
// fcfs, the default, refuses a priority other than 0 with vLLM's 400.
// With --ttft 0 --itl 0 (and no --prefill-per-token) the simulators
// answer without any delay.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: llmsim vllm|cloud [flags]
run "llmsim vllm -h" or "llmsim cloud -h" for the flags of each`

// run runs the command with args (without the program name) until ctx ends
// and returns the exit status: 0 on success, 1 on a runtime error, 2 on a
// usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "vllm":
		return runVLLM(ctx, args[1:], stdout, stderr)
	case "cloud":
		return runCloud(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "llmsim: unknown simulator %q\n%s\n", args[0], usage)
		return 2
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, v)
	return nil
}

// common holds the flags both simulators take.
type common struct {
	listen       string
	ttft, itl    time.Duration
	outputTokens int
	apiKey       string
	quiet        bool
	prefix       bool
	failures     simulator.Failures
}

func (c *common) register(fs *flag.FlagSet, listen string, ttft, itl time.Duration) {
	fs.StringVar(&c.listen, "listen", listen, "loopback `host:port` to listen on")
	fs.DurationVar(&c.ttft, "ttft", ttft, "time to first token")
	fs.DurationVar(&c.itl, "itl", itl, "inter-token latency")
	fs.IntVar(&c.outputTokens, "output-tokens", 16, "tokens generated when a request sets no max_tokens")
	fs.StringVar(&c.apiKey, "api-key", "", "required bearer key (empty: no authentication)")
	fs.BoolVar(&c.quiet, "quiet", false, "do not log each request")
	fs.BoolVar(&c.prefix, "prefix-caching", false, "report the start a prompt shares with those before it as cached tokens")
	fs.Float64Var(&c.failures.ErrorRate, "error-rate", 0, "fraction [0,1] of requests answered with --error-status (every k-th, deterministic)")
	fs.IntVar(&c.failures.ErrorStatus, "error-status", 500, "status of injected errors")
	fs.DurationVar(&c.failures.Stall, "stall", 0, "delay before any response header")
	fs.IntVar(&c.failures.CutAfterChunks, "cut-after", 0, "abort streamed responses after this many SSE events (0: never)")
}

// parse parses args; a non-negative status means "exit with it".
func parse(fs *flag.FlagSet, args []string, c *common) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "llmsim: unexpected arguments: %q\n", fs.Args())
		return 2
	}
	if err := simulator.CheckLoopback(c.listen); err != nil {
		fmt.Fprintf(fs.Output(), "llmsim: refusing to listen: %v (only loopback addresses are allowed)\n", err)
		return 2
	}
	if err := c.failures.Validate(); err != nil {
		fmt.Fprintf(fs.Output(), "llmsim: %v\n", err)
		return 2
	}
	return -1
}

func runVLLM(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("llmsim vllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, "127.0.0.1:8001", 50*time.Millisecond, 20*time.Millisecond)
	var names stringList
	fs.Var(&names, "served-model-name", "served model `name` (repeatable; the first names responses and metrics; default qwen2.5-7b-instruct)")
	maxModelLen := fs.Int("max-model-len", 32768, "context length in tokens")
	maxNumSeqs := fs.Int("max-num-seqs", 256, "requests running at once per engine")
	kvCacheTokens := fs.Int("kv-cache-tokens", 0, "KV-cache capacity per engine in `tokens` (blocks of 16), against which vllm:kv_cache_usage_perc\n"+
		"counts the running requests' prompt and generated tokens and which sizes the prefix cache\n"+
		"(0: the larger of max-num-seqs × 2048 and max-model-len)")
	prefill := fs.Duration("prefill-per-token", 0, "prefill time per prompt token not served by the prefix cache, added to --ttft")
	policy := fs.String("scheduling-policy", "fcfs", "`policy` ordering each engine's queue: fcfs (arrival; a request's priority other than 0\n"+
		"gets 400) or priority (the request's priority field, lower first, then arrival)")
	maxQueued := fs.Int("max-queued", 0, "cap on waiting+running requests, beyond it 503 (0: unbounded)")
	engines := fs.Int("engines", 1, "number of engines (engine label series in /metrics)")
	if code := parse(fs, args, &c); code >= 0 {
		return code
	}
	if *policy != "fcfs" && *policy != "priority" {
		fmt.Fprintf(stderr, "llmsim vllm: -scheduling-policy must be fcfs or priority, not %q\n", *policy)
		return 2
	}
	sim := simulator.NewVLLM(simulator.VLLMConfig{
		ServedModelNames: names,
		MaxModelLen:      *maxModelLen,
		MaxNumSeqs:       *maxNumSeqs,
		KVCacheTokens:    *kvCacheTokens,
		MaxQueued:        *maxQueued,
		SchedulingPolicy: *policy,
		TTFT:             c.ttft,
		PrefillPerToken:  *prefill,
		ITL:              c.itl,
		OutputTokens:     c.outputTokens,
		APIKey:           c.apiKey,
		Engines:          *engines,
		PrefixCaching:    c.prefix,
		DisableRecording: true,
	})
	sim.SetFailures(c.failures)
	return serve(ctx, "vllm", sim.Config().ServedModelNames, sim, &c, stdout, stderr)
}

func runCloud(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("llmsim cloud", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, "127.0.0.1:8002", 80*time.Millisecond, 10*time.Millisecond)
	var models stringList
	fs.Var(&models, "model", "served model `name` (repeatable; default gpt-4o-mini)")
	rateLimit := fs.Int("rate-limit", 0, "requests per second, beyond it 429 (0: no limit)")
	maxModelLen := fs.Int("max-model-len", 128000, "context length in tokens")
	compress := fs.Bool("compress", false, "gzip every response the client's Accept-Encoding allows")
	lineEnding := fs.String("sse-line-ending", "lf", "line ending of event streams: `lf`, crlf or cr")
	if code := parse(fs, args, &c); code >= 0 {
		return code
	}
	eol, ok := map[string]string{"lf": "\n", "crlf": "\r\n", "cr": "\r"}[*lineEnding]
	if !ok {
		fmt.Fprintf(stderr, "llmsim cloud: -sse-line-ending must be lf, crlf or cr, not %q\n", *lineEnding)
		return 2
	}
	sim := simulator.NewCloud(simulator.CloudConfig{
		Compress:         *compress,
		SSELineEnding:    eol,
		Models:           models,
		APIKey:           c.apiKey,
		RateLimit:        *rateLimit,
		TTFT:             c.ttft,
		ITL:              c.itl,
		OutputTokens:     c.outputTokens,
		MaxModelLen:      *maxModelLen,
		PrefixCaching:    c.prefix,
		DisableRecording: true,
	})
	sim.SetFailures(c.failures)
	return serve(ctx, "cloud", sim.Config().Models, sim, &c, stdout, stderr)
}

// serve runs h until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, kind string, names []string, h http.Handler, c *common, stdout, stderr io.Writer) int {
	h = simulator.WithControl(h)
	if !c.quiet {
		h = accessLog(h, log.New(stderr, "", log.LstdFlags|log.Lmicroseconds))
	}
	srv, err := simulator.Start(c.listen, h)
	if err != nil {
		fmt.Fprintf(stderr, "llmsim: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "llmsim %s listening on %s serving %v\n", kind, srv.URL(), names)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return 0
}

// statusWriter remembers the response status; Unwrap lets
// http.ResponseController reach the underlying Flusher and Hijacker.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// maxLoggedBody bounds how much of a body accessLog buffers to find the
// model; larger bodies are passed through with the model unlogged.
const maxLoggedBody = 1 << 20

// accessLog logs one line per request: method, path, model, status and
// duration. Headers (so the Authorization header) are never logged.
func accessLog(h http.Handler, l *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		model := "-"
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength <= maxLoggedBody {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxLoggedBody+1))
			rest := r.Body
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(b), rest), rest}
			if err == nil && len(b) <= maxLoggedBody {
				if m := gjson.GetBytes(b, "model"); m.Type == gjson.String {
					model = m.Str
				}
			}
		}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		l.Printf("%s %s model=%q status=%d dur=%s", r.Method, r.URL.Path, model, sw.status, time.Since(start).Round(time.Microsecond))
	})
}
