// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// responsesCloud is the Responses API as OpenAI serves it: each response
// stored under an id of its own, a follow-up that names one it does not
// hold refused (400 previous_response_not_found), streams of named events
// with the usage in response.completed, cached and reasoning tokens told.
type responsesCloud struct {
	srv  *simulator.Server
	name string
	mu   sync.Mutex
	n    int
	held map[string]bool
	got  []string // the previous_response_id of each request ("" for none)
	down bool
}

func newResponsesCloud(t *testing.T, name string) *responsesCloud {
	c := &responsesCloud{name: name, held: map[string]bool{}}
	c.srv = standIn(t, c.serve)
	return c
}

func (c *responsesCloud) setDown(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
}

func (c *responsesCloud) asked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func (c *responsesCloud) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"Invalid URL","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	prev := gjson.GetBytes(body, "previous_response_id").Str
	c.mu.Lock()
	c.got = append(c.got, prev)
	down, known := c.down, c.held[prev]
	c.n++
	id := fmt.Sprintf("resp_%s%d", c.name, c.n)
	if gjson.GetBytes(body, "store").Type != gjson.False {
		c.held[id] = true
	}
	c.mu.Unlock()
	switch {
	case down:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}`)
		return
	case prev != "" && !known:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"Previous response with id '`+prev+`' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`)
		return
	}
	model := gjson.GetBytes(body, "model").Str
	text := "Hello from " + c.name
	if prev != "" {
		text = "And then, after " + prev
	}
	resp := func(status, usage string) string {
		prevJSON := "null"
		if prev != "" {
			prevJSON = fmt.Sprintf("%q", prev)
		}
		return fmt.Sprintf(`{"id":%q,"object":"response","created_at":1700000000,"status":%q,"model":%q,"previous_response_id":%s,"output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]}],"usage":%s}`,
			id, status, model, prevJSON, text, usage)
	}
	usage := `{"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":4},"total_tokens":52}`
	if !gjson.GetBytes(body, "stream").Bool() {
		_, _ = io.WriteString(w, resp("completed", usage))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	event := func(typ, data string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, data)
		seq++
		w.(http.Flusher).Flush()
	}
	event("response.created", `"response":`+resp("in_progress", "null"))
	event("response.in_progress", `"response":`+resp("in_progress", "null"))
	for _, word := range strings.SplitAfter(text, " ") {
		event("response.output_text.delta", fmt.Sprintf(`"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q,"logprobs":[]`, word))
	}
	event("response.completed", `"response":`+resp("completed", usage))
}

// The OpenAI Go SDK's Responses streaming through the gateway: the alias
// in every event's response, the tokens metered from response.completed
// (with their cached and reasoning classes); a follow-up naming the
// response (previous_response_id) goes to the cloud that stored it,
// though another comes first in the alias; one naming a response no cloud
// holds is asked of each, then refused as OpenAI refuses it: 400
// previous_response_not_found.
func TestResponsesStreamingAndFollowUps(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	a, b := newResponsesCloud(t, "a"), newResponsesCloud(t, "b")
	block := defaultGateway
	for _, c := range []*responsesCloud{a, b} {
		block += "group resp" + c.name + " {\n\tkind openai\n\tapi_key sk-resp\n\tproxy " + c.srv.URL() + "\n}\n"
	}
	e.load(block + "alias assistant {\n\ttarget respa gpt-a\n\ttarget respb gpt-b\n}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last *http.Response
	sdk := sdkClient("", &last)
	stream := func(prev string) (responses.Response, string) {
		t.Helper()
		params := responses.ResponseNewParams{Model: "assistant", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")}}
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		s := sdk.Responses.NewStreaming(ctx, params)
		var done responses.Response
		var text strings.Builder
		for s.Next() {
			ev := s.Current()
			if ev.Response.Model != "" && ev.Response.Model != "assistant" {
				t.Errorf("an event names the model %q", ev.Response.Model)
			}
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed":
				done = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("stream after %q: %v", prev, err)
		}
		return done, text.String()
	}

	a.setDown(true)
	first, text := stream("")
	if first.ID != "resp_b2" && first.ID != "resp_b1" || text != "Hello from b" || last.Header.Get("X-Hybrid-Target") != "respb" {
		t.Fatalf("first: %s %q from %q", first.ID, text, last.Header.Get("X-Hybrid-Target"))
	}
	gw := e.gatewayName()
	waitFor(t, "the stream metered", func() bool {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "respb", "kind": "completion"}) == 12
	})
	for kind, want := range map[string]float64{"prompt": 40, "prompt_cached": 32, "completion_reasoning": 4} {
		if got := metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "respb", "kind": kind}); got != want {
			t.Errorf("%s tokens %v, want %v", kind, got, want)
		}
	}

	a.setDown(false)
	asked := len(a.asked())
	follow, text := stream(first.ID)
	if follow.ID == "" || text != "And then, after "+first.ID || last.Header.Get("X-Hybrid-Target") != "respb" || len(a.asked()) != asked {
		t.Errorf("follow-up: %s %q from %q; a asked %v", follow.ID, text, last.Header.Get("X-Hybrid-Target"), a.asked())
	}
	// a response no cloud holds: each is asked, and the client is told
	// no target holds it
	_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", PreviousResponseID: openai.String("resp_nowhere"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")}})
	var apierr *openai.Error
	if !errors.As(err, &apierr) || apierr.StatusCode != http.StatusBadRequest || apierr.Code != "previous_response_not_found" || apierr.Param != "previous_response_id" ||
		!strings.Contains(apierr.Message, "resp_nowhere") {
		t.Errorf("an unknown response: %v", err)
	}
	if got := a.asked(); got[len(got)-1] != "resp_nowhere" {
		t.Errorf("a was not asked for the unknown response: %v", got)
	}
}
