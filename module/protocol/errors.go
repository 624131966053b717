// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// OpenAI error types used by the gateway.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
)

// apiError is the OpenAI error shape:
// {"error":{"message","type","param","code"}}.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ErrorJSON renders an error in the OpenAI shape. Empty param or code
// become null.
func ErrorJSON(typ, code, param, msg string) []byte {
	e := apiError{Error: apiErrorBody{Message: msg, Type: typ}}
	if param != "" {
		e.Error.Param = &param
	}
	if code != "" {
		e.Error.Code = &code
	}
	b, _ := json.Marshal(e)
	return b
}

// Error is an error the gateway answers a request with, whatever its
// API: the status, OpenAI's error type (TypeInvalidRequest, TypeServer, a
// rate limit's "requests" or "tokens"; an API with types of its own maps
// them from the status), a code a program can read, the request field it
// is about, and the message.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

// An ErrorShape is how an API tells its clients of errors.
type ErrorShape interface {
	// Body is e as the API's error body.
	Body(e Error) []byte
	// StreamEvent is e as an event of the API's stream, for a stream that
	// fails after its first byte.
	StreamEvent(e Error) []byte
	// Upstream is an upstream's error body, answered with status, in the
	// API's shape, the served model's name replaced by the alias's.
	Upstream(body []byte, status int, served, alias string) []byte
	// ContextLength reports whether an upstream's 400 body says the
	// request does not fit the model's context: another target may take
	// it.
	ContextLength(body []byte) bool
	// ModelNotFound reports whether an upstream's 404 body (its start)
	// says the model does not exist: the gateway chose that name, and
	// another target may take the request.
	ModelNotFound(body []byte) bool
}

// OpenAIErrors is OpenAI's error shape: {"error":{"message","type",
// "param","code"}}, in a stream as a data event of its own.
var OpenAIErrors ErrorShape = openAIErrors{}

type openAIErrors struct{}

func (openAIErrors) Body(e Error) []byte { return ErrorJSON(e.Type, e.Code, e.Param, e.Message) }

func (openAIErrors) StreamEvent(e Error) []byte {
	b := ErrorJSON(e.Type, e.Code, e.Param, e.Message)
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}

func (openAIErrors) Upstream(body []byte, status int, served, alias string) []byte {
	return UpstreamErrorBody(body, status, served, alias)
}

// contextErrorPrefix starts vLLM's and OpenAI's context-length errors.
const contextErrorPrefix = "This model's maximum context length is"

func (openAIErrors) ContextLength(body []byte) bool {
	msg := gjson.GetBytes(body, "error.message")
	if !msg.Exists() {
		msg = gjson.GetBytes(body, "message") // vLLM <= 0.9's flat shape
	}
	return strings.HasPrefix(msg.String(), contextErrorPrefix)
}

// ModelNotFound knows OpenAI's `model_not_found` code, Azure's
// `DeploymentNotFound`, and a message about a model that does not exist
// or was not found (vLLM's "The model `x` does not exist.", in its
// current {"error":{...}} shape or its older top-level one, and Ollama's
// string).
func (openAIErrors) ModelNotFound(body []byte) bool {
	if len(body) == 0 || !gjson.ValidBytes(body) {
		return false
	}
	e := gjson.GetBytes(body, "error")
	if !e.IsObject() {
		if e.Type == gjson.String {
			return mentionsMissingModel(e.String())
		}
		e = gjson.ParseBytes(body) // vLLM before 0.10: the fields at the top
	}
	switch e.Get("code").String() {
	case "model_not_found", "DeploymentNotFound":
		return true
	}
	return mentionsMissingModel(e.Get("message").String())
}

// RouteMissing reports whether a 404's body is FastAPI's answer to a path
// it has no route for ({"detail":"Not Found"}): a vLLM older than the
// API, not a model or a resource it does not have.
func RouteMissing(body []byte) bool {
	return gjson.ValidBytes(body) && gjson.GetBytes(body, "detail").String() == "Not Found" && !gjson.GetBytes(body, "error").Exists()
}

// mentionsMissingModel reports whether an error message is about a
// model that does not exist or was not found.
func mentionsMissingModel(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "model") &&
		(strings.Contains(msg, "does not exist") || strings.Contains(msg, "not found"))
}

// WriteError answers the request with e in the API's error shape. The
// error is written here rather than returned to Caddy, so that the client
// gets this body whatever error routes the site has.
func (a *API) WriteError(w http.ResponseWriter, e Error) error {
	b := a.Errors.Body(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	_, err := w.Write(b)
	return err
}
