// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/lograte"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// The request core's own tests: a front provisioned part by part in a
// bare context (no Caddy runs, nothing listens), each group's attempts
// served by a stand-in handler in place of its reverse_proxy, requests
// handed to a route directly. They pin the order of targets, the
// fallback, the commit point of an answer and the shape of the errors a
// client gets.

// upstreamFunc is a stand-in for a group's reverse_proxy.
type upstreamFunc func(w http.ResponseWriter, r *http.Request) error

func (f upstreamFunc) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	return f(w, r)
}

// seen records the model each stand-in was asked for, in order, and the
// requests' paths, bodies and headers.
type seen struct {
	mu      sync.Mutex
	calls   []string // group:model
	paths   []string
	bodies  []string
	headers []http.Header
}

func (s *seen) record(group string, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body)) // for the stand-in
	s.mu.Lock()
	s.calls = append(s.calls, group+":"+gjson.GetBytes(body, "model").String())
	s.paths, s.bodies, s.headers = append(s.paths, r.URL.Path), append(s.bodies, string(body)), append(s.headers, r.Header.Clone())
	s.mu.Unlock()
}

// coreFront is the front of a gateway of cloud groups a, b and c (in
// that order in alias chat-main, their models gpt-a, gpt-b and gpt-c)
// whose attempts the given stand-ins serve, provisioned part by part as
// the gateway provisions them.
func coreFront(t *testing.T, rec *seen, upstreams map[string]upstreamFunc) *Front {
	t.Helper()
	return coreFrontOf(t, rec, upstreams, nil)
}

// coreFrontOf is coreFront with the APIs some groups serve.
func coreFrontOf(t *testing.T, rec *seen, upstreams map[string]upstreamFunc, apis map[string]string) *Front {
	t.Helper()
	group := func(name string) string {
		g := `"` + name + `":{"kind":"openai","model_check":"off",`
		if a := apis[name]; a != "" {
			g += `"apis":` + a + `,`
		}
		return g + `"proxy":{"upstreams":[{"dial":"127.0.0.1:1"}]}}`
	}
	groups := `{` + group("a") + `,` + group("b") + `,` + group("c") + `}`
	aliases := `{"chat-main":{"targets":[{"group":"a","model":"gpt-a"},{"group":"b","model":"gpt-b"},{"group":"c","model":"gpt-c"}]}}`
	storage := `{"module":"file_system","root":` + strconvQuote(t.TempDir()) + `}`
	base, err := caddy.ProvisionContext(&caddy.Config{Admin: &caddy.AdminConfig{Disabled: true}, StorageRaw: json.RawMessage(storage)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(base)
	t.Cleanup(cancel)
	f := newFront(Front{Name: "core", Clock: clock.System, Logger: zap.NewNop(), MirrorLog: zap.NewNop(), BadUsage: new(lograte.Every), Life: ctx})
	f.MaxBodySize, f.RouteHeadersOn = 1<<20, true
	var grps map[string]*upstream.Group
	if err := json.Unmarshal([]byte(groups), &grps); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(aliases), &f.Aliases); err != nil {
		t.Fatal(err)
	}
	for name, grp := range grps {
		grp.AcquireShared(reload.Key(t.Name(), name))
		grp.Run.Clock = f.Clock
		if err := grp.Provision(ctx, name, f.MaxBodySize); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(grp.Cleanup)
		up := upstreams[name]
		grp.Run.Serve = upstreamFunc(func(w http.ResponseWriter, r *http.Request) error {
			rec.record(name, r)
			if up == nil {
				t.Errorf("group %s was not to be tried", name)
				return nil
			}
			return up(w, r)
		})
	}
	s := routing.AliasSetup{Gateway: f.Name, Groups: grps, ResponseModel: "alias", Clock: f.Clock, Logger: f.Logger, Used: map[string]bool{}}
	if err := s.Provision("chat-main", f.Aliases["chat-main"]); err != nil {
		t.Fatal(err)
	}
	f.Pass, _ = NewHeaderPass(nil)
	routing.EquipTargets(kitOf(f), f.Aliases)
	return f
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// ask sends one chat request through the core, as the gateway hands it
// over.
func ask(t *testing.T, f *Front, body string) *httptest.ResponseRecorder {
	t.Helper()
	return askAt(t, f, "/v1/chat/completions", body)
}

// askAt sends one request to an endpoint through the core, with headers
// given as name, value pairs.
func askAt(t *testing.T, f *Front, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
	w := httptest.NewRecorder()
	rt := new(Route)
	id, clientID := RequestID(w, r, rt.Heads())
	if err := rt.Start(f, w, r, id, clientID, nil).Serve(); err != nil {
		t.Fatal(err)
	}
	return w
}

func answerJSON(w http.ResponseWriter, model string) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := io.WriteString(w, `{"id":"x","object":"chat.completion","model":"`+model+`","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	return err
}

func fail(status int, body string) upstreamFunc {
	return func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, err := io.WriteString(w, body)
		return err
	}
}

const chatBody = `{"model":"chat-main","messages":[{"role":"user","content":"hi"}]}`

// Targets are tried in the alias's order, each asked for its own model,
// and a failure before any answer moves the request on: the client gets
// the first answer, its model the alias's, and the headers name the
// target that served it.
func TestCoreTriesTargetsInOrderUntilOneAnswers(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{
		"a": fail(http.StatusServiceUnavailable, `{"error":{"message":"overloaded","type":"server_error"}}`),
		"b": fail(http.StatusInternalServerError, `{"error":{"message":"boom","type":"server_error"}}`),
		"c": func(w http.ResponseWriter, _ *http.Request) error { return answerJSON(w, "gpt-c-2025-01-01") },
	})
	w := ask(t, g, chatBody)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got := strings.Join(rec.calls, " "); got != "a:gpt-a b:gpt-b c:gpt-c" {
		t.Errorf("tried %s", got)
	}
	if m := gjson.Get(w.Body.String(), "model").String(); m != "chat-main" {
		t.Errorf("the answer's model %q, want the alias", m)
	}
	if h := w.Header(); h.Get("X-Hybrid-Target") != "c" || h.Get("X-Hybrid-Fallback-Reason") != "a:http_503, b:http_500" {
		t.Errorf("headers %v", h)
	}
}

// A client error that is no context-length error and no missing model is
// the answer: passed on, not retried elsewhere, the served model's name
// replaced by the alias.
func TestCoreAClientErrorIsTheAnswer(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{
		"a": fail(http.StatusBadRequest, `{"error":{"message":"gpt-a does not support this tool","type":"invalid_request_error","param":"tools","code":null}}`),
	})
	w := ask(t, g, chatBody)
	if w.Code != http.StatusBadRequest || len(rec.calls) != 1 {
		t.Fatalf("status %d after %v", w.Code, rec.calls)
	}
	msg := gjson.Get(w.Body.String(), "error.message").String()
	if strings.Contains(msg, "gpt-a") || !strings.Contains(msg, "chat-main") {
		t.Errorf("message %q: the served model must not reach the client", msg)
	}
}

// A missing model moves the request on, as a failure does.
func TestCoreAMissingModelMovesOn(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{
		"a": fail(http.StatusNotFound, `{"error":{"message":"The model gpt-a does not exist","type":"invalid_request_error","code":"model_not_found"}}`),
		"b": func(w http.ResponseWriter, _ *http.Request) error { return answerJSON(w, "gpt-b") },
	})
	if w := ask(t, g, chatBody); w.Code != http.StatusOK || strings.Join(rec.calls, " ") != "a:gpt-a b:gpt-b" {
		t.Fatalf("status %d after %v", w.Code, rec.calls)
	}
}

// When every target fails, the client gets one error in OpenAI's shape
// that names the alias, never a target's model or an upstream's text.
func TestCoreEveryTargetFailedIsOneError(t *testing.T) {
	rec := new(seen)
	secret := fail(http.StatusServiceUnavailable, `{"error":{"message":"gpt-secret-deployment is overloaded","type":"server_error"}}`)
	g := coreFront(t, rec, map[string]upstreamFunc{"a": secret, "b": secret, "c": secret})
	w := ask(t, g, chatBody)
	if w.Code < 500 || len(rec.calls) != 3 {
		t.Fatalf("status %d after %v", w.Code, rec.calls)
	}
	body := w.Body.String()
	if typ := gjson.Get(body, "error.type").String(); typ == "" || !gjson.Valid(body) {
		t.Fatalf("not an OpenAI error: %s", body)
	}
	if strings.Contains(body, "gpt-") || strings.Contains(body, "secret") {
		t.Errorf("an upstream's name reached the client: %s", body)
	}
}

// An answer commits at its first byte: a stream that fails after it is
// not sent anywhere else (the client has part of an answer already); it
// ends with an error event, never as if it had ended cleanly.
func TestCoreAStreamCommitsAtItsFirstByte(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{
		"a": func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the upstream's connection broke
		},
	})
	w := ask(t, g, `{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusOK || len(rec.calls) != 1 {
		t.Fatalf("status %d after %v", w.Code, rec.calls)
	}
	body := w.Body.String()
	if !strings.Contains(body, `"Hel"`) || !strings.Contains(body, `"error"`) || strings.Contains(body, "[DONE]") {
		t.Errorf("the stream as the client got it: %q", body)
	}
	if strings.Contains(body, "gpt-a") {
		t.Errorf("the served model reached the client: %q", body)
	}
}

// A body that is no JSON object, or has no model, is refused in OpenAI's
// shape before any target is tried.
func TestCoreBadInputGoesNowhere(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, nil)
	for body, want := range map[string]struct {
		status int
		code   string
	}{
		`{"model":"chat-main","messages":[`:        {http.StatusBadRequest, "invalid_json"},
		`{"messages":[]}`:                          {http.StatusNotFound, "model_not_found"},
		`{"model":"gpt-a","messages":[]}`:          {http.StatusNotFound, "model_not_found"}, // a target's model is no alias
		`{"model":"chat-main","stream":"yes"}`:     {http.StatusBadRequest, "invalid_type"},
		`{"model":"chat-main","model":"gpt-a"}`:    {http.StatusBadRequest, "invalid_json"},
		`{"model":"chat-main","max_tokens":"500"}`: {http.StatusBadRequest, "invalid_type"},
	} {
		w := ask(t, g, body)
		if w.Code != want.status || gjson.Get(w.Body.String(), "error.code").String() != want.code {
			t.Errorf("%s: %d %s, want %d %s", body, w.Code, w.Body, want.status, want.code)
		}
	}
	if len(rec.calls) != 0 {
		t.Errorf("forwarded: %v", rec.calls)
	}
}

// loggedGate records what the core asks of it, and refuses with why.
type loggedGate struct {
	name string
	why  routing.Reason
	log  *[]string
}

func (g loggedGate) Judge(*routing.Passage, *routing.Target) routing.Reason {
	*g.log = append(*g.log, "judge "+g.name)
	return g.why
}

func (g loggedGate) Admit(*routing.Passage, *routing.Target) routing.Reason {
	*g.log = append(*g.log, "admit "+g.name)
	return g.why
}

func (g loggedGate) Release(*routing.Passage, *routing.Target) {
	*g.log = append(*g.log, "release "+g.name)
}

// A target a gate refuses is not tried: the request goes on to the next
// one, and the gate's reason is the target's in the fallback header. A
// gate that took something for a target a later gate refused gives it
// back before the request moves on.
func TestCoreAGateRefusalPassesTheTargetOver(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{
		"b": func(w http.ResponseWriter, _ *http.Request) error { return answerJSON(w, "gpt-b") },
	})
	var log []string
	a := g.Aliases["chat-main"].Targets[0]
	a.Run.Gates = append(a.Run.Gates, loggedGate{"taker", "", &log}, loggedGate{"refuser", because.BreakerOpen, &log})
	w := ask(t, g, chatBody)
	if w.Code != http.StatusOK || strings.Join(rec.calls, " ") != "b:gpt-b" {
		t.Fatalf("status %d after %v", w.Code, rec.calls)
	}
	if r := w.Header().Get("X-Hybrid-Fallback-Reason"); r != "a:breaker_open" {
		t.Errorf("fallback reason %q", r)
	}
	if want := []string{"admit taker", "admit refuser", "release taker"}; !slices.Equal(log, want) {
		t.Errorf("the gates were asked %q, want %q", log, want)
	}
}

// fakeObserver records the attempts it sees begin and end.
type fakeObserver struct {
	name string
	log  *[]string
}

func (f fakeObserver) AttemptBegan(ctx context.Context, a *routing.AttemptRecord) context.Context {
	*f.log = append(*f.log, fmt.Sprintf("%s began %s #%d", f.name, a.Target.Group, a.Number))
	return ctx
}

func (f fakeObserver) AttemptEnded(a *routing.AttemptRecord) {
	how := "answered"
	switch {
	case a.Failed != nil:
		how = "failed " + string(a.Failed.Reason)
	case a.Result.Verdict == routing.VerdictFailure:
		how = "broke off"
	}
	*f.log = append(*f.log, fmt.Sprintf("%s ended %s #%d %d %s", f.name, a.Target.Group, a.Number, a.Status, how))
}

// Each attempt is seen to begin and end by its target's observers, the
// ends last first, with how it ended: a failure before the first byte
// with its reason and the upstream's status, an answer as answered.
func TestCoreObserversSeeEachAttempt(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{
		"a": fail(http.StatusServiceUnavailable, `{"error":{"message":"overloaded","type":"server_error"}}`),
		"b": func(w http.ResponseWriter, _ *http.Request) error { return answerJSON(w, "gpt-b") },
	})
	var log []string
	for _, tgt := range g.Aliases["chat-main"].Targets[:2] {
		tgt.Run.Observers = append(tgt.Run.Observers, fakeObserver{"outer", &log}, fakeObserver{"inner", &log})
	}
	if w := ask(t, g, chatBody); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	want := []string{
		"outer began a #1", "inner began a #1", "inner ended a #1 503 failed http_503", "outer ended a #1 503 failed http_503",
		"outer began b #2", "inner began b #2", "inner ended b #2 0 answered", "outer ended b #2 0 answered",
	}
	if !slices.Equal(log, want) {
		t.Errorf("observed\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

// An answer broken off after its first byte still ends its attempt for
// the observers: a stream with its error event, and an answer that is no
// stream, which the gateway can only abort (a panic through the
// handler).
func TestCoreObserversSeeAnAnswerBrokenOff(t *testing.T) {
	for _, tc := range []struct{ name, contentType, first string }{
		{"stream", "text/event-stream", "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-a\",\"choices\":[]}\n\n"},
		{"json", "application/json", `{"id":"x","object":"chat.completion",`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := coreFront(t, new(seen), map[string]upstreamFunc{
				"a": func(w http.ResponseWriter, _ *http.Request) error {
					w.Header().Set("Content-Type", tc.contentType)
					_, _ = io.WriteString(w, tc.first)
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler) // the upstream's connection broke
				},
			})
			var log []string
			a := g.Aliases["chat-main"].Targets[0]
			a.Run.Observers = append(a.Run.Observers, fakeObserver{"o", &log})
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
				strings.NewReader(`{"model":"chat-main","stream":`+strconv.FormatBool(tc.name == "stream")+`,"messages":[]}`))
			r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
			func() {
				defer func() {
					if rec := recover(); rec != nil && rec != http.ErrAbortHandler { //nolint:errorlint // the sentinel, as net/http compares it
						panic(rec)
					}
				}()
				w, rt := httptest.NewRecorder(), new(Route)
				id, clientID := RequestID(w, r, rt.Heads())
				_ = rt.Start(g, w, r, id, clientID, nil).Serve()
			}()
			if want := []string{"o began a #1", "o ended a #1 0 broke off"}; !slices.Equal(log, want) {
				t.Errorf("observed %q, want %q", log, want)
			}
		})
	}
}

// A JSON answer whose model name the gateway rewrites goes out whole,
// with its own Content-Length (net/http would send one only for a short
// body, and not after the flush that comes before a journaled charge);
// one the proxy flushes as it comes (a cloud's, decompressed: its length
// unknown) goes out as it came; so does one that announces trailers.
func TestCoreAJSONAnswerGoesOutWithItsLength(t *testing.T) {
	answer := `{"id":"x","object":"chat.completion","model":"gpt-a-2025-01-01","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	for _, tc := range []struct {
		name           string
		flush, trailer bool
		wantLength     bool
	}{
		{name: "whole", wantLength: true},
		{name: "flushed", flush: true},
		{name: "with a trailer", trailer: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := coreFront(t, new(seen), map[string]upstreamFunc{"a": func(w http.ResponseWriter, _ *http.Request) error {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
				if tc.trailer {
					w.Header().Set("Trailer", "X-Usage")
				}
				half := len(answer) / 2
				_, _ = io.WriteString(w, answer[:half])
				if tc.flush {
					_ = http.NewResponseController(w).Flush()
				}
				_, err := io.WriteString(w, answer[half:])
				return err
			}})
			w := ask(t, g, chatBody)
			res := w.Result()
			body := w.Body.String()
			if res.StatusCode != http.StatusOK || gjson.Get(body, "model").String() != "chat-main" || !gjson.Valid(body) {
				t.Fatalf("%d %s", res.StatusCode, body)
			}
			length := res.Header.Get("Content-Length")
			if tc.wantLength != (length != "") || (length != "" && length != strconv.Itoa(len(body))) {
				t.Errorf("Content-Length %q for a body of %d bytes", length, len(body))
			}
			if w.Flushed != tc.flush {
				t.Errorf("flushed %v", w.Flushed)
			}
		})
	}
}

// wholeAt is a client's side of an answer with a length: what the
// gateway had counted of the answer's tokens when its last byte came.
type wholeAt struct {
	*httptest.ResponseRecorder
	counted func() float64
	at      float64 // -1 until the body is whole
}

func (w *wholeAt) Write(p []byte) (int, error) {
	n, err := w.ResponseRecorder.Write(p)
	if length, _ := strconv.Atoi(w.Header().Get("Content-Length")); length > 0 && w.Body.Len() == length && w.at < 0 {
		w.at = w.counted()
	}
	return n, err
}

// A client holding its whole answer finds its tokens counted (and, on a
// priced gateway, charged): the answer's last byte leaves after them.
func TestCoreAnAnswerIsWholeOnceCounted(t *testing.T) {
	g := coreFront(t, new(seen), map[string]upstreamFunc{"a": func(w http.ResponseWriter, _ *http.Request) error { return answerJSON(w, "gpt-a") }})
	completion := routing.TokensTotal.WithLabelValues(g.Name, "chat-main", "a", "completion", "", routing.BillingBusiness)
	value := func() float64 {
		var m dto.Metric
		_ = completion.Write(&m)
		return m.GetCounter().GetValue()
	}
	before := value()
	w := &wholeAt{ResponseRecorder: httptest.NewRecorder(), counted: func() float64 { return value() - before }, at: -1}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody))
	r.Header.Set("Content-Type", "application/json")
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
	rt := new(Route)
	id, clientID := RequestID(w, r, rt.Heads())
	if err := rt.Start(g, w, r, id, clientID, nil).Serve(); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK || !gjson.Valid(w.Body.String()) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w.at != 1 {
		t.Errorf("the answer was whole with %v of its 1 completion token counted", w.at)
	}
}

// untranslated is the apis of a chat-only group that does not translate
// (see coreFrontOf).
const untranslated = `["chat/completions"],"translate":"off"`

// An Anthropic Messages request: a target whose group neither serves the
// API nor translates it is passed over before any byte, never sent the
// body; one that does answers in the API's shape, the alias in its model; with none, the
// client gets a 404 in Anthropic's error shape, and no retry.
func TestCoreMessagesGoWhereTheAPIIsServed(t *testing.T) {
	const body = `{"model":"chat-main","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	answer := func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"gpt-b","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
		return err
	}
	rec := new(seen)
	g := coreFrontOf(t, rec, map[string]upstreamFunc{"b": answer}, map[string]string{"a": untranslated, "b": `["messages"]`})
	w := askAt(t, g, "/v1/messages", body)
	if w.Code != http.StatusOK || strings.Join(rec.calls, " ") != "b:gpt-b" || gjson.Get(w.Body.String(), "model").String() != "chat-main" ||
		w.Header().Get("X-Hybrid-Fallback-Reason") != "a:protocol_unsupported" {
		t.Fatalf("%d after %v: %s %v", w.Code, rec.calls, w.Body, w.Header())
	}
	rec = new(seen)
	g = coreFrontOf(t, rec, nil, map[string]string{"a": untranslated, "b": untranslated, "c": untranslated})
	w = askAt(t, g, "/v1/messages", body)
	if w.Code != http.StatusNotFound || len(rec.calls) != 0 || w.Header().Get("X-Should-Retry") != "false" ||
		gjson.Get(w.Body.String(), "type").String() != "error" || gjson.Get(w.Body.String(), "error.type").String() != "not_found_error" {
		t.Errorf("no target serves it: %d after %v: %s %v", w.Code, rec.calls, w.Body, w.Header())
	}
}

// An Anthropic stream whose upstream connection breaks after its
// message_stop is whole: no error event follows it, and the answer is an
// answer, not an interruption.
func TestCoreMessagesWholeAtMessageStop(t *testing.T) {
	stream := "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"gpt-b","content":[],"usage":{"input_tokens":3,"output_tokens":0}}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}` + "\n\n" +
		"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}` + "\n\n"
	for _, whole := range []bool{true, false} {
		upstream := stream
		if whole {
			upstream += "event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n"
		}
		g := coreFrontOf(t, new(seen), map[string]upstreamFunc{"b": func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, upstream)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}}, map[string]string{"a": untranslated, "b": `["messages"]`})
		w := askAt(t, g, "/v1/messages", `{"model":"chat-main","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		body := w.Body.String()
		if errored := strings.Contains(body, "event: error\n"); errored == whole {
			t.Errorf("whole %v: %q", whole, body)
		}
	}
}

// A vLLM older than Anthropic's API answers its path 404 with FastAPI's
// {"detail":"Not Found"}: on a Messages request that is a target that
// does not serve the API, passed over for the next; on a chat request it
// stays the answer.
func TestCoreMessagesPassARouteMiss(t *testing.T) {
	routeMiss := fail(http.StatusNotFound, `{"detail":"Not Found"}`)
	answer := func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"gpt-b","content":[],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
		return err
	}
	rec := new(seen)
	g := coreFrontOf(t, rec, map[string]upstreamFunc{"a": routeMiss, "b": answer}, map[string]string{"a": `["messages"]`, "b": `["messages"]`})
	w := askAt(t, g, "/v1/messages", `{"model":"chat-main","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusOK || strings.Join(rec.calls, " ") != "a:gpt-a b:gpt-b" || w.Header().Get("X-Hybrid-Fallback-Reason") != "a:protocol_unsupported" {
		t.Errorf("messages: %d after %v: %v", w.Code, rec.calls, w.Header())
	}
	rec = new(seen)
	g = coreFrontOf(t, rec, map[string]upstreamFunc{"a": routeMiss}, nil)
	if w := ask(t, g, chatBody); w.Code != http.StatusNotFound || strings.Join(rec.calls, " ") != "a:gpt-a" {
		t.Errorf("chat: %d after %v", w.Code, rec.calls)
	}
}
