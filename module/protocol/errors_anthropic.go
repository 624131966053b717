// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// AnthropicErrors is the Anthropic Messages API's error shape:
// {"type":"error","error":{"type","message"}}, the type told by the
// status; in a stream, an `event: error` of its own.
var AnthropicErrors ErrorShape = anthropicErrors{}

type anthropicErrors struct{}

// anthropicError is the Messages API's error body.
type anthropicError struct {
	Type  string             `json:"type"` // "error"
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// AnthropicType is the Messages API's error type for an answer's status,
// as its documentation pairs them; a 4xx it does not name is an
// invalid_request_error, a 5xx an api_error.
func AnthropicType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return TypeInvalidRequest
}

// anthropicTypes are the error types the Messages API documents.
var anthropicTypes = [...]string{"invalid_request_error", "authentication_error", "billing_error", "permission_error",
	"not_found_error", "request_too_large", "rate_limit_error", "api_error", "overloaded_error", "timeout_error"}

func isAnthropicType(t string) bool {
	for _, a := range anthropicTypes {
		if t == a {
			return true
		}
	}
	return false
}

// anthropicErrorJSON renders an error in the Messages API's shape.
func anthropicErrorJSON(typ, msg string) []byte {
	b, _ := json.Marshal(anthropicError{Type: "error", Error: anthropicErrorBody{Type: typ, Message: msg}})
	return b
}

// anthropicTypeOf is the Messages API's type of the gateway's own error:
// by its status, or, for an event in a stream that has one already, by
// its OpenAI type.
func anthropicTypeOf(e Error) string {
	if e.Status == 0 && e.Type == TypeServer {
		return "api_error"
	}
	return AnthropicType(e.Status)
}

func (anthropicErrors) Body(e Error) []byte { return anthropicErrorJSON(anthropicTypeOf(e), e.Message) }

func (anthropicErrors) StreamEvent(e Error) []byte {
	b := anthropicErrorJSON(anthropicTypeOf(e), e.Message)
	out := make([]byte, 0, len(b)+22)
	out = append(out, "event: error\ndata: "...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}

// Upstream keeps an error in the Messages API's shape as it came, byte
// for byte, unless it names the served model (Claude Code tells what to
// retry without by an error's wording); any other (vLLM's types are
// Python class names, an OpenAI-shaped or plain-text one) is put in that
// shape, its type told by the status.
func (anthropicErrors) Upstream(body []byte, status int, served, alias string) []byte {
	e := gjson.GetBytes(body, "error")
	typ, msg := e.Get("type"), e.Get("message")
	switch {
	case e.IsObject() && msg.Type == gjson.String:
	case e.Type == gjson.String:
		msg = e // TGI's {"error":"..."}
	case gjson.ValidBytes(body) && gjson.GetBytes(body, "message").Type == gjson.String:
		typ, msg = gjson.GetBytes(body, "type"), gjson.GetBytes(body, "message") // vLLM's old flat shape
	case gjson.GetBytes(body, "detail").Type == gjson.String:
		msg = gjson.GetBytes(body, "detail") // FastAPI's own answers
	default:
		text := Capped(strings.TrimSpace(string(body)), maxErrorText)
		if text == "" {
			text = http.StatusText(status)
		}
		return anthropicErrorJSON(AnthropicType(status), Renamed(text, served, alias))
	}
	t := typ.String()
	if gjson.GetBytes(body, "type").String() == "error" && isAnthropicType(t) &&
		(served == "" || !bytes.Contains(body, []byte(served))) {
		return body
	}
	if !isAnthropicType(t) {
		t = AnthropicType(status)
	}
	m := msg.String()
	if m == "" {
		m = http.StatusText(status)
	}
	return anthropicErrorJSON(t, Renamed(m, served, alias))
}

// anthropicContextPrefix starts Anthropic's own error for a prompt over
// the model's window; vLLM's /v1/messages says what its chat endpoint
// says (contextErrorPrefix).
const anthropicContextPrefix = "prompt is too long"

func (anthropicErrors) ContextLength(body []byte) bool {
	msg := gjson.GetBytes(body, "error.message").String()
	return strings.HasPrefix(msg, contextErrorPrefix) || strings.HasPrefix(msg, anthropicContextPrefix)
}

// ModelNotFound knows Anthropic's not_found_error about a model ("model:
// claude-x") and whatever the OpenAI shape tells (vLLM's "The model `x`
// does not exist.", in either envelope).
func (anthropicErrors) ModelNotFound(body []byte) bool {
	if len(body) == 0 || !gjson.ValidBytes(body) {
		return false
	}
	if e := gjson.GetBytes(body, "error"); e.Get("type").String() == "not_found_error" &&
		strings.HasPrefix(e.Get("message").String(), "model:") {
		return true
	}
	return openAIErrors{}.ModelNotFound(body)
}
