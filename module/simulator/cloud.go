// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CloudConfig configures a Cloud. Zero fields take the documented defaults.
type CloudConfig struct {
	// Models are the served model names (default {"gpt-4o-mini"}).
	Models []string
	// APIKey is the required bearer key; empty disables authentication.
	APIKey string
	// RateLimit is the number of inference requests accepted per fixed
	// one-second window of Clock; the rest get 429 with Retry-After: 1.
	// 0 disables the limit.
	RateLimit int
	// Clock returns the current time (default time.Now). It drives the
	// rate-limit windows and "created" timestamps, not the latencies.
	Clock func() time.Time
	// TTFT is the time from the request passing validation to the first
	// token; ITL the time between tokens.
	TTFT, ITL time.Duration
	// OutputTokens is as for VLLMConfig (default 16).
	OutputTokens int
	// MaxModelLen is the context window (default 128000).
	MaxModelLen int
	// DisableRecording turns off request recording (Requests stays empty).
	DisableRecording bool
	// Compress gzips every response whose request's Accept-Encoding
	// allows it, event streams included (flushed event by event).
	Compress bool
	// SSELineEnding ends the lines of event streams: "\n" (the default),
	// "\r\n" or "\r", as the SSE spec allows.
	SSELineEnding string
	// PrefixCaching reports the start a prompt of 1,024 tokens or more
	// shares with those before it as cached, in steps of 128 tokens, as
	// OpenAI's prompt caching does (usage.prompt_tokens_details.
	// cached_tokens); without it, every prompt reports none. The cache
	// keeps the most recently used 64 MiB of prompts.
	PrefixCaching bool
}

// Cloud simulates a cloud OpenAI-compatible API: GET /v1/models and
// /v1/models/{id}; POST /v1/chat/completions, /v1/completions and
// /v1/embeddings, with OpenAI's response and error bodies.
type Cloud struct {
	cfg     CloudConfig
	names   map[string]struct{}
	created int64
	fail    injector
	rec     recorder

	prefix *prefixCache // one for the API, of maxPrefixBlocks

	rlMu     sync.Mutex
	rlWindow int64 // Unix second of the current window
	rlCount  int

	unhealthy atomic.Bool // GET /healthz answers 503
}

// NewCloud returns a Cloud for cfg.
func NewCloud(cfg CloudConfig) *Cloud {
	if len(cfg.Models) == 0 {
		cfg.Models = []string{"gpt-4o-mini"}
	}
	cfg.Models = append([]string(nil), cfg.Models...)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.OutputTokens <= 0 {
		cfg.OutputTokens = 16
	}
	if cfg.MaxModelLen <= 0 {
		cfg.MaxModelLen = 128000
	}
	switch cfg.SSELineEnding {
	case "\n", "\r\n", "\r":
	default:
		cfg.SSELineEnding = "\n"
	}
	c := &Cloud{
		cfg:     cfg,
		names:   make(map[string]struct{}, len(cfg.Models)),
		created: cfg.Clock().Unix(),
		rec:     recorder{disabled: cfg.DisableRecording},
		prefix:  newPrefixCache(maxPrefixBlocks),
	}
	for _, m := range cfg.Models {
		c.names[m] = struct{}{}
	}
	c.fail.set(Failures{})
	return c
}

// SetHealthy switches GET /healthz (a health check many clouds' and
// proxies' endpoints answer, without a key) between 200 {"status":"ok"}
// and 503. It does not change how requests are answered: use
// SetFailures for that.
func (c *Cloud) SetHealthy(ok bool) { c.unhealthy.Store(!ok) }

// Config returns the effective configuration, defaults applied.
func (c *Cloud) Config() CloudConfig { return c.cfg }

// SetFailures replaces the failure injection and restarts its ErrorRate
// count.
func (c *Cloud) SetFailures(f Failures) { c.fail.set(f) }

// Failures returns the current failure injection.
func (c *Cloud) Failures() Failures { return c.fail.get() }

// Requests returns every request received under /v1 so far, in order.
func (c *Cloud) Requests() []RecordedRequest { return c.rec.list() }

// ResetRequests forgets the recorded requests.
func (c *Cloud) ResetRequests() { c.rec.reset() }

// openAIError writes OpenAI's error body; code is a string or nil.
func openAIError(w http.ResponseWriter, status int, typ, msg string, param *string, code any) {
	writeJSON(w, status, errorBody{Error: errorInfo{Message: msg, Type: typ, Param: param, Code: code}})
}

// MaskKey hides an API key the way OpenAI's 401 message does: the first 3
// and last 4 characters around "***". Keys under 12 characters keep at most
// their first 3 characters and half their length, so no key is ever shown
// whole.
func MaskKey(key string) string {
	if len(key) >= 12 {
		return key[:3] + "***" + key[len(key)-4:]
	}
	return key[:min(3, len(key)/2)] + "***"
}

const (
	msgNoKey = "You didn't provide an API key. You need to provide your API key in an Authorization header " +
		"using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) " +
		"if you're accessing the API from your browser and are prompted for a username and password. " +
		"You can obtain an API key from https://platform.openai.com/account/api-keys."
	msgBadJSON = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your " +
		"HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. " +
		"If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)"
	msgServerError = "The server had an error while processing your request. Sorry about that!"
)

// checkAuth answers 401 unless r carries the configured key.
func (c *Cloud) checkAuth(w http.ResponseWriter, r *http.Request) bool {
	if c.cfg.APIKey == "" || bearerMatches(r, c.cfg.APIKey) {
		return true
	}
	got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got = strings.TrimSpace(got)
	if !found || got == "" {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", msgNoKey, nil, nil)
		return false
	}
	openAIError(w, http.StatusUnauthorized, "invalid_request_error",
		"Incorrect API key provided: "+MaskKey(got)+". You can find your API key at https://platform.openai.com/account/api-keys.",
		nil, "invalid_api_key")
	return false
}

// ServeHTTP implements http.Handler.
func (c *Cloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Compress && acceptsGzip(r) {
		gw := newGzipWriter(w)
		defer gw.close()
		w = gw
	}
	h := w.Header()
	if id := r.Header.Get("X-Request-Id"); id != "" {
		h.Set("X-Request-Id", id)
	} else {
		h.Set("X-Request-Id", newID("req_"))
	}
	path := r.URL.Path
	if path == "/healthz" && r.Method == http.MethodGet {
		if c.unhealthy.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	if !strings.HasPrefix(path, "/v1/") {
		c.invalidURL(w, r)
		return
	}
	body, err := readBody(r)
	c.rec.add(r, body)
	if err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", msgBadJSON, nil, nil)
		return
	}
	ep, isInference := inferencePaths[path]
	fs := c.fail.state()
	if isInference && !fs.stall(r.Context()) {
		return
	}
	if !c.checkAuth(w, r) {
		return
	}
	switch {
	case path == "/v1/models" && r.Method == http.MethodGet:
		list := modelList[cloudModel]{Object: "list"}
		for _, m := range c.cfg.Models {
			list.Data = append(list.Data, c.card(m))
		}
		writeJSON(w, http.StatusOK, list)
	case strings.HasPrefix(path, "/v1/models/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(path, "/v1/models/")
		if _, ok := c.names[id]; !ok {
			c.modelNotFound(w, id)
			return
		}
		writeJSON(w, http.StatusOK, c.card(id))
	case isInference && r.Method == http.MethodPost:
		c.serveInference(w, r, ep, body, fs)
	default:
		c.invalidURL(w, r)
	}
}

type cloudModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (c *Cloud) card(id string) cloudModel {
	return cloudModel{ID: id, Object: "model", Created: c.created, OwnedBy: "system"}
}

func (c *Cloud) invalidURL(w http.ResponseWriter, r *http.Request) {
	openAIError(w, http.StatusNotFound, "invalid_request_error",
		"Invalid URL ("+r.Method+" "+r.URL.Path+")", nil, nil)
}

func (c *Cloud) modelNotFound(w http.ResponseWriter, model string) {
	openAIError(w, http.StatusNotFound, "invalid_request_error",
		"The model `"+model+"` does not exist or you do not have access to it.", nil, "model_not_found")
}

// allow counts one request against the rate limit and reports whether it
// fits in the current window.
func (c *Cloud) allow() bool {
	if c.cfg.RateLimit <= 0 {
		return true
	}
	sec := c.cfg.Clock().Unix()
	c.rlMu.Lock()
	defer c.rlMu.Unlock()
	if sec != c.rlWindow {
		c.rlWindow, c.rlCount = sec, 0
	}
	if c.rlCount >= c.cfg.RateLimit {
		return false
	}
	c.rlCount++
	return true
}

func (c *Cloud) rateLimited(w http.ResponseWriter, model string) {
	w.Header().Set("Retry-After", "1")
	limit := c.cfg.RateLimit
	openAIError(w, http.StatusTooManyRequests, "requests", fmt.Sprintf(
		"Rate limit reached for %s in organization org-simulated on requests per second (RPS): Limit %d, Used %d, "+
			"Requested 1. Please try again in 1s. Visit https://platform.openai.com/account/rate-limits to learn more.",
		model, limit, limit), nil, "rate_limit_exceeded")
}

// injectedError writes the body OpenAI sends for status.
func (c *Cloud) injectedError(w http.ResponseWriter, status int, model string) {
	switch {
	case status == http.StatusTooManyRequests:
		c.rateLimited(w, model)
	case status == http.StatusInternalServerError:
		openAIError(w, status, "server_error", msgServerError, nil, nil)
	case status == http.StatusServiceUnavailable:
		openAIError(w, status, "server_error", "The server is overloaded or not ready yet.", nil, nil)
	case status >= 500:
		openAIError(w, status, "server_error", http.StatusText(status), nil, nil)
	case status == http.StatusUnauthorized:
		openAIError(w, status, "invalid_request_error",
			"Incorrect API key provided: sk-***pired. You can find your API key at https://platform.openai.com/account/api-keys.",
			nil, "invalid_api_key")
	case status == http.StatusNotFound:
		c.modelNotFound(w, model)
	default:
		openAIError(w, status, "invalid_request_error", http.StatusText(status), nil, nil)
	}
}

var contextParam = [...]string{epChat: "messages", epCompletion: "prompt", epEmbedding: "input"}

func (c *Cloud) serveInference(w http.ResponseWriter, r *http.Request, ep endpoint, body []byte, fs *failureState) {
	req, rerr := parseRequest(body, ep)
	switch rerr.kind {
	case errJSON:
		openAIError(w, http.StatusBadRequest, "invalid_request_error", msgBadJSON, nil, nil)
		return
	case errMissing:
		openAIError(w, http.StatusBadRequest, "invalid_request_error",
			"Missing required parameter: '"+rerr.field+"'.", ptr(rerr.field), "missing_required_parameter")
		return
	case errMaxTokens:
		openAIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf(
			"Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", rerr.field, rerr.value),
			ptr(rerr.field), "integer_below_min_value")
		return
	}
	if !req.hasModel {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "you must provide a model parameter", nil, nil)
		return
	}
	if _, ok := c.names[req.model]; !ok {
		c.modelNotFound(w, req.model)
		return
	}
	if c.cfg.RateLimit > 0 {
		w.Header().Set("X-Ratelimit-Limit-Requests", strconv.Itoa(c.cfg.RateLimit))
	}
	if !c.allow() {
		c.rateLimited(w, req.model)
		return
	}
	prompt := EstimateTokens(body)
	if msg := cloudContextLengthMessage(ep, c.cfg.MaxModelLen, prompt, req.maxTokens, req.hasMaxTokens); msg != "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", msg, ptr(contextParam[ep]), "context_length_exceeded")
		return
	}
	if fs.shouldFail() {
		c.injectedError(w, fs.ErrorStatus, req.model)
		return
	}

	tokens, finish := 0, "stop"
	if ep != epEmbedding {
		tokens, finish = outputTokens(&req, c.cfg.OutputTokens, prompt, c.cfg.MaxModelLen)
	}
	ctx := r.Context()
	var timer *time.Timer
	ok := pause(ctx, c.cfg.TTFT, &timer)
	stopTimer(timer)
	if !ok {
		return
	}
	cached := 0
	if c.cfg.PrefixCaching && ep != epEmbedding {
		cached = c.prefix.cachedTokens(body, prompt, 1024, 128)
	}
	comp := completion{
		d: dialectOpenAI, ep: ep, id: newID(cloudIDPrefix[ep]), created: c.cfg.Clock().Unix(), model: req.model,
		promptTokens: prompt, cached: cached, tokens: tokens, finish: finish,
		includeUsage: req.includeUsage, stream: req.stream, base64: req.base64, body: body,
		eol: c.cfg.SSELineEnding,
	}
	comp.respond(ctx, w, c.cfg.ITL, fs.cutAfter())
}

var cloudIDPrefix = [...]string{epChat: "chatcmpl-", epCompletion: "cmpl-", epEmbedding: ""}

// cloudContextLengthMessage returns OpenAI's context-length error text, or
// "" when the request fits: prompt tokens above maxModelLen give "…your
// messages resulted in M tokens…" (chat) or "…your prompt resulted in M
// tokens…" (completions, embeddings); prompt plus max_tokens above it gives
// "…you requested T tokens (P in the messages, M in the completion)…".
func cloudContextLengthMessage(ep endpoint, maxModelLen, prompt int, maxTokens int64, hasMaxTokens bool) string {
	what := "messages"
	if ep != epChat {
		what = "prompt"
	}
	if prompt > maxModelLen {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, your %s resulted in %d tokens. "+
			"Please reduce the length of the %s.", maxModelLen, what, prompt, what)
	}
	if ep != epEmbedding && hasMaxTokens && int64(prompt)+maxTokens > int64(maxModelLen) {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens "+
			"(%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
			maxModelLen, int64(prompt)+maxTokens, prompt, what, maxTokens, what)
	}
	return ""
}
