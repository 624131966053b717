// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/tidwall/gjson"
)

// responsesUpstream answers the Responses API as OpenAI does: a response
// with an id of its own, stored, whole or streamed; a follow-up naming a
// response it does not hold is a 404 (vLLM's) naming it.
func responsesUpstream(name string, down *atomic.Bool) upstreamFunc {
	var n atomic.Int32
	held := map[string]bool{}
	return func(w http.ResponseWriter, r *http.Request) error {
		if down != nil && down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return nil
		}
		body, _ := io.ReadAll(r.Body)
		if prev := gjson.GetBytes(body, "previous_response_id").Str; prev != "" && !held[prev] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, err := io.WriteString(w, `{"object":"error","message":"Response with id '`+prev+`' not found.","type":"invalid_request_error","param":"response_id","code":404}`)
			return err
		}
		id := "resp_" + name + string(rune('0'+n.Add(1)))
		held[id] = true
		resp := `{"id":"` + id + `","object":"response","status":"completed","model":"gpt-` + name + `","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":5,"output_tokens":1,"total_tokens":6}}`
		if gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			created := strings.Replace(strings.Replace(resp, `"completed"`, `"in_progress"`, 1), `"usage":{"input_tokens":5,"output_tokens":1,"total_tokens":6}`, `"usage":null`, 1)
			_, err := io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":"+created+"}\n\n"+
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":"+resp+"}\n\n")
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, resp)
		return err
	}
}

// A Responses API follow-up goes to the target that holds the response it
// names, alone, whatever the plan's order; one that names a response no
// target holds is passed over by each (previous_response_missing), and
// the client told so; a response not stored is not noted.
func TestCoreResponsesFollowUpGoesToItsHolder(t *testing.T) {
	var aDown atomic.Bool
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{"a": responsesUpstream("a", &aDown), "b": responsesUpstream("b", nil), "c": responsesUpstream("c", nil)})
	g.Responses = routing.ResponseBookOf(t.Name())

	aDown.Store(true)
	for _, stream := range []bool{false, true} {
		rec.calls = nil
		body := `{"model":"chat-main","input":"hi"}`
		if stream {
			body = `{"model":"chat-main","input":"hi","stream":true}`
		}
		w := askAt(t, g, "/v1/responses", body)
		if w.Code != http.StatusOK || w.Header().Get("X-Hybrid-Target") != "b" || strings.Contains(w.Body.String(), "gpt-b") {
			t.Fatalf("stream %v: %d from %q: %s", stream, w.Code, w.Header().Get("X-Hybrid-Target"), w.Body)
		}
	}
	aDown.Store(false)
	for _, id := range []string{"resp_b1", "resp_b2"} {
		rec.calls = nil
		w := askAt(t, g, "/v1/responses", `{"model":"chat-main","input":"and then?","previous_response_id":"`+id+`"}`)
		if w.Code != http.StatusOK || strings.Join(rec.calls, " ") != "b:gpt-b" {
			t.Errorf("follow-up of %s: %d after %v: %s", id, w.Code, rec.calls, w.Body)
		}
	}
	rec.calls = nil
	w := askAt(t, g, "/v1/responses", `{"model":"chat-main","input":"and then?","previous_response_id":"resp_gone"}`)
	if w.Code != http.StatusBadRequest || gjson.Get(w.Body.String(), "error.code").Str != "previous_response_not_found" ||
		gjson.Get(w.Body.String(), "error.param").Str != "previous_response_id" ||
		strings.Join(rec.calls, " ") != "a:gpt-a b:gpt-b c:gpt-c" || !strings.Contains(gjson.Get(w.Body.String(), "error.message").Str, "resp_gone") {
		t.Errorf("an unknown response: %d after %v: %s %v", w.Code, rec.calls, w.Body, w.Header())
	}
	// not stored: not noted
	if w := askAt(t, g, "/v1/responses", `{"model":"chat-main","input":"hi","store":false}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if _, ok := g.Responses.Holder("resp_a1"); ok {
		t.Error("a response asked not to be stored was noted")
	}
}
