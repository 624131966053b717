// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// VLLMVersion is what GET /version reports.
const VLLMVersion = "0.12.0"

// VLLMConfig configures a VLLM. Zero fields take the documented defaults.
type VLLMConfig struct {
	// ServedModelNames is like vllm serve --served-model-name (default
	// {"qwen2.5-7b-instruct"}). Requests may name any of them; responses
	// and the model_name metric label always use the first.
	ServedModelNames []string
	// MaxModelLen is the context window (default 32768), reported in
	// /v1/models. Estimated prompt tokens plus max_tokens above it is
	// answered with vLLM's 400 context-length error.
	MaxModelLen int
	// MaxNumSeqs is the number of requests an engine runs at once
	// (default 256); further requests wait in the engine's queue, in the
	// order SchedulingPolicy gives.
	MaxNumSeqs int
	// SchedulingPolicy is like vllm serve --scheduling-policy (default
	// "fcfs"; any value other than "priority" is taken as "fcfs"). With
	// "fcfs" an engine's queue is in arrival order, and a request whose
	// priority field is not 0 gets vLLM's 400 "Got priority N but Priority
	// scheduling is not enabled."; with "priority" it is ordered by the
	// request's integer priority field (chat, completions and embeddings;
	// default 0; vLLM's Messages API has none), lower first, then by
	// arrival. A running request is never preempted.
	SchedulingPolicy string
	// KVCacheTokens is each engine's KV-cache capacity in tokens (default
	// the larger of MaxNumSeqs × DefaultKVTokensPerSeq and MaxModelLen),
	// split into blocks of 16 tokens: vllm:cache_config_info's
	// num_gpu_blocks. It drives vllm:kv_cache_usage_perc and
	// vllm:num_preemptions_total, and sizes each engine's prefix cache
	// (PrefixCaching); it never delays or refuses a request.
	KVCacheTokens int
	// MaxQueued caps waiting+running over all engines; requests beyond it
	// get 503, like vLLM's --max-num-queued-reqs. 0 means unbounded.
	MaxQueued int
	// TTFT is the fixed part of the time from getting a slot to the
	// first token (default 0); PrefillPerToken adds to it.
	TTFT time.Duration
	// PrefillPerToken is the prefill time per prompt token the prefix
	// cache did not serve (every prompt token without PrefixCaching),
	// added to TTFT while the request holds its slot (default 0).
	PrefillPerToken time.Duration
	// ITL is the time between consecutive tokens (default 0).
	ITL time.Duration
	// OutputTokens is how many tokens a request without max_tokens (or
	// max_completion_tokens) generates (default 16). A request with
	// max_tokens generates exactly that many, capped at MaxGeneratedTokens.
	OutputTokens int
	// APIKey, if set, is required as "Authorization: Bearer <key>" on every
	// path under /v1; otherwise the answer is 401 {"error":"Unauthorized"}.
	APIKey string
	// Engines is the number of engine-label series in /metrics (default
	// 1), like data-parallel ranks: each engine has MaxNumSeqs slots and
	// its own queue.
	Engines int
	// DisableRecording turns off request recording (Requests stays empty),
	// for long or high-rate runs.
	DisableRecording bool
	// SSELineEnding ends the lines of event streams: "\n" (the default,
	// uvicorn's), "\r\n" or "\r", as the SSE spec allows.
	SSELineEnding string
	// PrefixCaching serves the start a prompt shares with those before it
	// on the same engine from that engine's prefix cache
	// (--enable-prefix-caching) and reports it, as
	// --enable-prompt-tokens-details does: usage.prompt_tokens_details.
	// cached_tokens in chat and completions (vLLM's Messages API reports
	// the whole prompt as input_tokens, without cache reads), and in
	// vllm:prefix_cache_queries_total and _hits_total. Each engine's cache
	// keeps the KVCacheTokens/16 most recently used blocks of 16 tokens.
	PrefixCaching bool
	// Clock returns the current time (default time.Now). It drives the
	// KV-cache model (how many tokens a running request has generated, and
	// the floor's climbs) and "created" timestamps, not the latencies: TTFT,
	// PrefillPerToken and ITL are waited for, and latency histograms
	// measured, in real time.
	Clock func() time.Time
}

// VLLM simulates a vLLM OpenAI-compatible API server (V1 engine).
//
// Endpoints: GET /health, /ping, /version, /metrics and /v1/models; POST
// /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/messages and
// /v1/messages/count_tokens.
//
// Each engine runs MaxNumSeqs requests at once; a request is assigned to
// an engine on arrival and waits in its queue (SchedulingPolicy) for a
// slot. With PrefixCaching each engine has a prefix cache of
// KVCacheTokens/16 blocks that evicts the least recently used: a prompt
// (the JSON of its system prompt, tools and messages, or prompt, or
// input) is taken in blocks of 64 bytes (16 tokens at EstimateTokens' 4
// characters a token), each hashed with all before it; the leading blocks
// the engine's cache holds are served from it, as their share of the
// prompt's tokens in steps of 16 and never the last token. A request's
// first token comes TTFT + PrefillPerToken × its uncached prompt tokens
// after it got its slot.
//
// Metrics: vllm:num_requests_running and vllm:num_requests_waiting follow
// the scheduler live. vllm:kv_cache_usage_perc is computed at each scrape
// from a model of vLLM's paged KV cache: each engine has KVCacheTokens/16
// blocks of 16 tokens, and each running request holds the blocks for its
// prompt tokens (EstimateTokens) plus the tokens it has generated so far
// (one per ITL of Clock after its first token), so usage grows with load
// and context length and falls as requests finish. It is clamped to 1; a
// request admitted when the free blocks cannot hold its prompt counts one
// vllm:num_preemptions_total (the simulator still runs it, undelayed).
// SetKVFloor and ClimbKV add an operator-set floor under the reported
// usage. vllm:time_to_first_token_seconds is measured from arrival, so it
// includes Stall, queue and prefill time.
type VLLM struct {
	cfg     VLLMConfig
	names   atomic.Pointer[servedNames]
	model   string
	created int64

	sched    *scheduler
	metrics  *vllmMetrics
	metricsH http.Handler
	healthy  atomic.Bool
	fail     injector
	rec      recorder
	kv       *kvCache
	prefix   []*prefixCache // per engine; nil without PrefixCaching
	priority bool           // SchedulingPolicy "priority"
}

// NewVLLM returns a VLLM for cfg.
func NewVLLM(cfg VLLMConfig) *VLLM {
	if len(cfg.ServedModelNames) == 0 {
		cfg.ServedModelNames = []string{"qwen2.5-7b-instruct"}
	}
	cfg.ServedModelNames = append([]string(nil), cfg.ServedModelNames...)
	if cfg.MaxModelLen <= 0 {
		cfg.MaxModelLen = 32768
	}
	if cfg.MaxNumSeqs <= 0 {
		cfg.MaxNumSeqs = 256
	}
	if cfg.OutputTokens <= 0 {
		cfg.OutputTokens = 16
	}
	if cfg.Engines <= 0 {
		cfg.Engines = 1
	}
	if cfg.KVCacheTokens <= 0 {
		cfg.KVCacheTokens = max(cfg.MaxNumSeqs*DefaultKVTokensPerSeq, cfg.MaxModelLen)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.SchedulingPolicy != policyPriority {
		cfg.SchedulingPolicy = policyFCFS
	}
	switch cfg.SSELineEnding {
	case "\n", "\r\n", "\r":
	default:
		cfg.SSELineEnding = "\n"
	}
	v := &VLLM{
		cfg:      cfg,
		model:    cfg.ServedModelNames[0],
		created:  cfg.Clock().Unix(),
		rec:      recorder{disabled: cfg.DisableRecording},
		kv:       newKVCache(cfg.Engines, cfg.KVCacheTokens, cfg.ITL, cfg.Clock),
		priority: cfg.SchedulingPolicy == policyPriority,
	}
	if cfg.PrefixCaching {
		v.prefix = make([]*prefixCache, cfg.Engines)
		for e := range v.prefix {
			v.prefix[e] = newPrefixCache(v.kv.blocks)
		}
	}
	v.SetServedModelNames(cfg.ServedModelNames...)
	v.metrics = newVLLMMetrics(v.model, cfg.Engines, v.kv.blocks, newKVCollector(v.kv, v.model))
	for e := range v.kv.engines {
		v.kv.engines[e].preempt = v.metrics.engines[e].preempts
	}
	v.metricsH = promhttp.HandlerFor(v.metrics.reg, promhttp.HandlerOpts{})
	v.sched = newScheduler(cfg.Engines, cfg.MaxNumSeqs, cfg.MaxQueued, func(e, running, waiting int) {
		em := &v.metrics.engines[e]
		em.running.Set(float64(running))
		em.waiting.Set(float64(waiting))
	})
	v.healthy.Store(true)
	v.fail.set(Failures{})
	return v
}

// vLLM's --scheduling-policy values.
const (
	policyFCFS     = "fcfs"
	policyPriority = "priority"
)

// servedNames are the model names requests may use, in order.
type servedNames struct {
	list []string
	set  map[string]struct{}
}

// SetServedModelNames changes the names requests may use and /v1/models
// lists, like a restart with another --served-model-name. Responses and
// the model_name metric label keep the first name of the config.
func (v *VLLM) SetServedModelNames(names ...string) {
	sn := &servedNames{list: append([]string(nil), names...), set: make(map[string]struct{}, len(names))}
	for _, n := range names {
		sn.set[n] = struct{}{}
	}
	v.names.Store(sn)
}

// Config returns the effective configuration, defaults applied.
func (v *VLLM) Config() VLLMConfig { return v.cfg }

// SetHealthy switches GET /health between 200 and 503 (empty body), the
// latter being vLLM's answer once its engine is dead. Other endpoints are
// unaffected.
func (v *VLLM) SetHealthy(ok bool) { v.healthy.Store(ok) }

// SetFailures replaces the failure injection and restarts its ErrorRate
// count.
func (v *VLLM) SetFailures(f Failures) { v.fail.set(f) }

// Failures returns the current failure injection.
func (v *VLLM) Failures() Failures { return v.fail.get() }

// Requests returns every request received under /v1 so far, in order.
func (v *VLLM) Requests() []RecordedRequest { return v.rec.list() }

// ResetRequests forgets the recorded requests.
func (v *VLLM) ResetRequests() { v.rec.reset() }

// Load returns the number of running and waiting requests right now.
func (v *VLLM) Load() (running, waiting int) { return v.sched.load() }

// SetKVFloor sets a floor under vllm:kv_cache_usage_perc, independent of
// traffic: every engine reports max(its modelled usage, usage), usage
// being clamped to 0..1. It ends any climb; 0 removes the floor. The floor
// only changes what is reported: it neither delays requests nor counts
// preemptions.
func (v *VLLM) SetKVFloor(usage float64) { v.kv.setFloor(usage) }

// ClimbKV moves the floor linearly from its current value to `to`
// (clamped to 0..1) over `over` of the simulator's Clock, then holds it
// there; over <= 0 sets it at once. The floor is computed from the clock
// whenever it is read, so nothing runs in the background. It may also
// descend.
func (v *VLLM) ClimbKV(to float64, over time.Duration) { v.kv.climb(to, over) }

// KVStatus returns the floor setting and each engine's KV-cache usage now.
func (v *VLLM) KVStatus() KVStatus { return v.kv.status() }

// ServeHTTP implements http.Handler.
func (v *VLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	if id := r.Header.Get("X-Request-Id"); id != "" {
		w.Header().Set("X-Request-Id", id)
	}
	path := r.URL.Path
	if !strings.HasPrefix(path, "/v1") {
		switch path {
		case "/health":
			if !allowMethod(w, r, http.MethodGet) {
				return
			}
			if v.healthy.Load() {
				w.WriteHeader(http.StatusOK)
			} else {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		case "/ping":
			if allowMethod(w, r, http.MethodGet, http.MethodPost) {
				w.WriteHeader(http.StatusOK)
			}
		case "/version":
			if allowMethod(w, r, http.MethodGet) {
				writeJSON(w, http.StatusOK, map[string]string{"version": VLLMVersion})
			}
		case "/metrics":
			v.metricsH.ServeHTTP(w, r)
		default:
			writeBody(w, http.StatusNotFound, []byte(`{"detail":"Not Found"}`))
		}
		return
	}

	body, err := readBody(r)
	v.rec.add(r, body)
	if err != nil {
		v.writeError(w, http.StatusBadRequest, "BadRequestError", "could not read request body", nil)
		return
	}
	ep, isInference := inferencePaths[path]
	fs := v.fail.state()
	if isInference && !fs.stall(r.Context()) {
		return
	}
	if v.cfg.APIKey != "" && !bearerMatches(r, v.cfg.APIKey) {
		writeBody(w, http.StatusUnauthorized, []byte(`{"error":"Unauthorized"}`))
		return
	}
	switch {
	case path == "/v1/models":
		if allowMethod(w, r, http.MethodGet) {
			v.serveModels(w)
		}
	case isInference:
		if allowMethod(w, r, http.MethodPost) {
			v.serveInference(w, r, ep, body, fs, arrival)
		}
	default:
		writeBody(w, http.StatusNotFound, []byte(`{"detail":"Not Found"}`))
	}
}

var inferencePaths = map[string]endpoint{
	"/v1/chat/completions":      epChat,
	"/v1/completions":           epCompletion,
	"/v1/embeddings":            epEmbedding,
	"/v1/messages":              epMessages,
	"/v1/messages/count_tokens": epCountTokens,
}

// allowMethod answers 405 the way FastAPI does unless r uses one of methods.
func allowMethod(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeBody(w, http.StatusMethodNotAllowed, []byte(`{"detail":"Method Not Allowed"}`))
	return false
}

// bearerMatches reports whether r carries "Authorization: Bearer <key>".
func bearerMatches(r *http.Request, key string) bool {
	got := r.Header.Get("Authorization")
	want := "Bearer " + key
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

type vllmModelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen int               `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

type modelList[T any] struct {
	Object string `json:"object"`
	Data   []T    `json:"data"`
}

func (v *VLLM) serveModels(w http.ResponseWriter) {
	list := modelList[vllmModelCard]{Object: "list"}
	for _, name := range v.names.Load().list {
		list.Data = append(list.Data, vllmModelCard{
			ID: name, Object: "model", Created: v.created, OwnedBy: "vllm",
			Root: "/models/" + v.model, MaxModelLen: v.cfg.MaxModelLen,
			Permission: []modelPermission{{
				ID: newID("modelperm-"), Object: "model_permission", Created: v.created,
				AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
			}},
		})
	}
	writeJSON(w, http.StatusOK, list)
}

// errorBody is the {"error":{…}} shape shared by vLLM (≥0.10) and OpenAI.
type errorBody struct {
	Error errorInfo `json:"error"`
}

type errorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

func ptr(s string) *string { return &s }

// writeError writes vLLM's ErrorResponse; code is the HTTP status.
func (v *VLLM) writeError(w http.ResponseWriter, status int, typ, msg string, param *string) {
	writeJSON(w, status, errorBody{Error: errorInfo{Message: msg, Type: typ, Param: param, Code: status}})
}

// writeErrorFor is writeError in the shape of the endpoint's API: on
// Anthropic's, vLLM's own types in Anthropic's envelope.
func (v *VLLM) writeErrorFor(ep endpoint, w http.ResponseWriter, status int, typ, msg string, param *string) {
	if ep.anthropic() {
		writeJSON(w, status, anthropicErrorBody(typ, msg))
		return
	}
	v.writeError(w, status, typ, msg, param)
}

// vllmErrorType derives vLLM's error type from a status: 503 ->
// "ServiceUnavailableError", 500 -> "InternalServerError".
func vllmErrorType(status int) string {
	t := strings.ReplaceAll(http.StatusText(status), " ", "")
	t = strings.ReplaceAll(t, "-", "")
	switch {
	case t == "":
		return "UnknownError"
	case strings.HasSuffix(t, "Error"):
		return t
	}
	return t + "Error"
}

func (v *VLLM) writeRequestError(w http.ResponseWriter, ep endpoint, e requestError) {
	switch e.kind {
	case errJSON:
		v.writeErrorFor(ep, w, http.StatusBadRequest, "BadRequestError", "JSON decode error", nil)
	case errMissing:
		v.writeErrorFor(ep, w, http.StatusBadRequest, "BadRequestError", "Field required: body."+e.field, nil)
	case errMaxTokens:
		v.writeErrorFor(ep, w, http.StatusBadRequest, "BadRequestError",
			fmt.Sprintf("max_tokens must be at least 1, got %d.", e.value), nil)
	}
}

// ContextLengthMessage is the text of vLLM's context-length error.
func ContextLengthMessage(maxModelLen, outputTokens, promptTokens int) string {
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d output tokens "+
		"and your prompt contains at least %d input tokens, for a total of at least %d tokens. Please reduce the "+
		"length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=%d)",
		maxModelLen, outputTokens, promptTokens, promptTokens+outputTokens, promptTokens)
}

func (v *VLLM) serveInference(w http.ResponseWriter, r *http.Request, ep endpoint, body []byte, fs *failureState, arrival time.Time) {
	req, rerr := parseRequest(body, ep)
	if rerr.kind != errNone {
		v.writeRequestError(w, ep, rerr)
		return
	}
	if req.hasModel {
		if _, ok := v.names.Load().set[req.model]; !ok {
			v.writeErrorFor(ep, w, http.StatusNotFound, "NotFoundError",
				"The model `"+req.model+"` does not exist.", nil)
			return
		}
	}
	prompt := EstimateTokens(body)
	if ep == epCountTokens {
		// vLLM renders the chat template and counts its tokens
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": prompt, "context_management": map[string]int{"original_input_tokens": prompt}})
		return
	}
	requested := 0
	if req.hasMaxTokens {
		requested = int(req.maxTokens)
	}
	if prompt+requested > v.cfg.MaxModelLen {
		v.writeErrorFor(ep, w, http.StatusBadRequest, "BadRequestError",
			ContextLengthMessage(v.cfg.MaxModelLen, requested, prompt), ptr("input_tokens"))
		return
	}
	if req.priority != 0 && !v.priority {
		v.writeErrorFor(ep, w, http.StatusBadRequest, "BadRequestError",
			fmt.Sprintf("Got priority %d but Priority scheduling is not enabled.", req.priority), nil)
		return
	}
	if fs.shouldFail() {
		status := fs.ErrorStatus
		msg := http.StatusText(status)
		switch status {
		case http.StatusInternalServerError:
			msg = "EngineCore encountered an issue. See stack trace (above) for the root cause."
		case http.StatusUnauthorized:
			// vLLM's --api-key middleware
			writeBody(w, status, []byte(`{"error":"Unauthorized"}`))
			return
		case http.StatusNotFound:
			// vLLM's only 404 on an inference path
			msg = "The model `" + req.model + "` does not exist."
		}
		v.writeErrorFor(ep, w, status, vllmErrorType(status), msg, nil)
		return
	}

	ctx := r.Context()
	engine, err := v.sched.acquire(ctx, req.priority)
	if errors.Is(err, errQueueFull) {
		v.writeErrorFor(ep, w, http.StatusServiceUnavailable, "ServiceUnavailableError",
			fmt.Sprintf("The server is at capacity: %d requests are queued or running (--max-num-queued-reqs). Please retry later.", v.cfg.MaxQueued), nil)
		return
	}
	if err != nil {
		return
	}
	defer v.sched.release(engine)
	em := &v.metrics.engines[engine]
	em.queue.Observe(time.Since(arrival).Seconds())

	tokens, finish := 0, "stop"
	if ep != epEmbedding {
		tokens, finish = outputTokens(&req, v.cfg.OutputTokens, prompt, v.cfg.MaxModelLen)
	}
	seq := v.kv.admit(engine, prompt, tokens)
	defer v.kv.free(seq)
	sent, ok := v.generate(ctx, w, &completion{
		d: dialectVLLM, ep: ep, id: newID(vllmIDPrefix[ep]), created: v.cfg.Clock().Unix(), model: v.model,
		promptTokens: prompt, cached: v.cachedTokens(engine, body, prompt), tokens: tokens, finish: finish,
		includeUsage: req.includeUsage, stream: req.stream, base64: req.base64, body: body, eol: v.cfg.SSELineEnding,
	}, fs, arrival, em, seq)
	em.genTokens.Add(float64(sent))
	if !ok {
		finish = "abort"
	}
	em.finished(finish)
	em.e2e.Observe(time.Since(arrival).Seconds())
}

// cachedTokens is how many of a prompt's tokens engine's prefix cache
// serves; -1 (not reported) without prefix caching.
func (v *VLLM) cachedTokens(engine int, body []byte, prompt int) int {
	if v.prefix == nil {
		return -1
	}
	return v.prefix[engine].cachedTokens(body, prompt, 0, vllmBlockSize)
}

// firstTokenWait is the time from getting a slot to the first token of a
// prompt of prompt tokens of which cached (-1: not reported) came from the
// prefix cache.
func (v *VLLM) firstTokenWait(prompt, cached int) time.Duration {
	return v.cfg.TTFT + v.cfg.PrefillPerToken*time.Duration(prompt-max(cached, 0))
}

var vllmIDPrefix = [...]string{epChat: "chatcmpl-", epCompletion: "cmpl-", epEmbedding: "embd-", epMessages: "chatcmpl-"}

// generate waits for the first token and writes the response.
func (v *VLLM) generate(ctx context.Context, w http.ResponseWriter, c *completion, fs *failureState, arrival time.Time, em *engineMetrics, seq *kvSeq) (int, bool) {
	var timer *time.Timer
	ok := pause(ctx, v.firstTokenWait(c.promptTokens, c.cached), &timer)
	stopTimer(timer)
	if !ok {
		return 0, false
	}
	v.kv.decode(seq)
	em.ttft.Observe(time.Since(arrival).Seconds())
	em.promptTokens.Add(float64(c.promptTokens))
	if c.cached >= 0 {
		em.cacheQueries.Add(float64(c.promptTokens))
		em.cacheHits.Add(float64(c.cached))
	}
	return c.respond(ctx, w, v.cfg.ITL, fs.cutAfter())
}
