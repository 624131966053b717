// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

const (
	defaultModelCheckInterval = 5 * time.Minute
	modelCheckTimeout         = 15 * time.Second
)

// modelCheckMinGap is the least time between a check and one woken by a
// request the API answered with model_not_found.
const modelCheckMinGap = 10 * time.Second

// ModelCheck is the last result of an openai group's model name check.
// Targets whose model name the API does not list are skipped (reason
// misconfigured) until a check finds it listed again; before the first
// check none is, and a failed check keeps the last answer, as a vLLM
// endpoint's failed /v1/models probe does.
type ModelCheck struct {
	mu        sync.Mutex
	checkedAt time.Time
	missing   []string // configured names the API does not list
	err       string   // why the check could not be made

	unlisted atomic.Pointer[[]string] // missing, for routing; nil when none
	wake     chan struct{}            // check now; nil without checks
	clock    clock.Clock              // the group's
}

// Lacks reports whether the last check found the model name unlisted.
func (mc *ModelCheck) Lacks(model string) bool {
	m := mc.unlisted.Load()
	return m != nil && slices.Contains(*m, model)
}

// WakeNow asks for a check now, unless one ran very recently.
func (mc *ModelCheck) WakeNow() {
	if mc.wake == nil {
		return
	}
	mc.mu.Lock()
	recent := !mc.checkedAt.IsZero() && mc.clock.Now().Sub(mc.checkedAt) < modelCheckMinGap
	mc.mu.Unlock()
	if recent {
		return
	}
	select {
	case mc.wake <- struct{}{}:
	default:
	}
}

// Result returns the last check's time, the missing names and the error.
func (mc *ModelCheck) Result() (time.Time, []string, string) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.checkedAt, slices.Clone(mc.missing), mc.err
}

// StartModelCheck checks the target model names of an openai group now
// and then every interval, until the config is unloaded: a wrong cloud
// model name shows up on an ordinary day, not on the day of the fallback.
func (grp *Group) StartModelCheck(ctx caddy.Context) {
	if grp.Run.CheckOff || len(grp.Run.Expect) == 0 {
		return
	}
	interval := grp.Run.checkEvery
	if interval == 0 {
		interval = defaultModelCheckInterval
	}
	logger := ctx.Logger().With(zap.String("group", grp.Run.Name))
	wake := make(chan struct{}, 1)
	grp.Check.wake = wake
	loop.Loop{Name: "model check", Every: interval, Wake: wake, When: loop.AtStart, Logger: logger}.
		Go(ctx, nil, func(ctx context.Context) { grp.checkModels(ctx, logger) })
}

// checkModels asks the group's API for its models, through the group's
// own proxy (its transport, TLS, headers and api_key), and compares.
func (grp *Group) checkModels(ctx context.Context, logger *zap.Logger) {
	ctx, cancel := context.WithTimeout(ctx, modelCheckTimeout)
	defer cancel()
	path := "/v1/models"
	if grp.Kind == KindAnthropic {
		path += "?limit=1000" // Anthropic's API pages its list by 20
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return
	}
	req.RemoteAddr = "127.0.0.1:0"
	req.Host = "localhost"
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, &caddyhttp.Server{})
	w := &BufferWriter{header: make(http.Header)}
	status := func() (status int) {
		defer func() {
			if rec := recover(); rec != nil {
				if rec != http.ErrAbortHandler { //nolint:errorlint // sentinel compared as the stdlib does
					panic(rec)
				}
				status = -1
			}
		}()
		if err := grp.Run.Serve.ServeHTTP(w, req, terminal); err != nil {
			return 0
		}
		return w.status
	}()

	var missing []string
	reason := ""
	switch {
	case status != http.StatusOK:
		reason = "the model list could not be fetched"
		if status > 0 {
			reason += ": status " + strconv.Itoa(status)
		}
	case !gjson.ValidBytes(w.buf.Bytes()):
		reason = "the model list is not JSON"
	case len(gjson.GetBytes(w.buf.Bytes(), "data.#.id").Array()) == 0:
		// another shape, or an empty list: nothing to judge the names by
		reason = "the model list has no data[].id"
	default:
		missing = grp.unlisted(w.buf.Bytes())
	}

	grp.Check.mu.Lock()
	prev := grp.Check.missing
	if reason != "" {
		missing = prev
	}
	grp.Check.checkedAt, grp.Check.missing, grp.Check.err = grp.Run.Clock.Now(), missing, reason
	if len(missing) > 0 {
		grp.Check.unlisted.Store(&missing)
	} else {
		grp.Check.unlisted.Store(nil)
	}
	grp.Check.mu.Unlock()

	switch {
	case reason != "":
		logger.Warn("could not check the model names of the group", zap.String("reason", reason))
	case len(missing) > 0 && !slices.Equal(prev, missing):
		logger.Error("the group's API does not list configured model names: targets with these names are skipped (misconfigured)",
			zap.Strings("missing", missing), zap.Strings("configured", grp.Run.Expect))
	case len(missing) == 0 && len(prev) > 0:
		logger.Info("the group's API lists all configured model names again")
	}
}

// BufferWriter collects a small response (up to 4 MiB) in memory.
type BufferWriter struct {
	header http.Header
	status int
	buf    bytes.Buffer
	slot   *Slot // a drill's, for the selection policy
}

// NewBufferWriter is a BufferWriter that carries slot (nil: none) to
// the selection policy.
func NewBufferWriter(slot *Slot) *BufferWriter {
	return &BufferWriter{header: make(http.Header), slot: slot}
}

// Status is the response's status; 0 until one is written.
func (w *BufferWriter) Status() int { return w.status }

// Body is the response's body so far.
func (w *BufferWriter) Body() []byte { return w.buf.Bytes() }

func (w *BufferWriter) HeldSlot() *Slot { return w.slot }

func (w *BufferWriter) Header() http.Header { return w.header }

func (w *BufferWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *BufferWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.buf.Len()+len(p) > 4<<20 {
		return 0, http.ErrContentLength
	}
	return w.buf.Write(p)
}

// terminal is the next handler of a group's proxy: there is none.
var terminal = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// unlisted are the names the aliases send to the group that a model
// list does not hold.
func (grp *Group) unlisted(list []byte) []string {
	listed := make(map[string]bool)
	gjson.GetBytes(list, "data.#.id").ForEach(func(_, id gjson.Result) bool {
		listed[id.String()] = true
		if grp.Kind == KindAnthropic {
			// Anthropic lists dated ids; a name without its date is an
			// alias of the latest (claude-sonnet-4-5 of
			// claude-sonnet-4-5-20250929)
			listed[undated(id.String())] = true
		}
		return true
	})
	var missing []string
	for _, m := range grp.Run.Expect {
		if !listed[m] {
			missing = append(missing, m)
		}
	}
	return missing
}

// undated is a model id without its trailing -YYYYMMDD, if it has one.
func undated(id string) string {
	i := strings.LastIndexByte(id, '-')
	if i < 0 || len(id)-i-1 != 8 {
		return id
	}
	for _, c := range id[i+1:] {
		if c < '0' || c > '9' {
			return id
		}
	}
	return id[:i]
}
