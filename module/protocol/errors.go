// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"encoding/json"
	"net/http"
	"strconv"
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

// WriteError answers the request with an error in the OpenAI shape. The
// error is written here rather than returned to Caddy, so that the client
// gets this body whatever error routes the site has.
func WriteError(w http.ResponseWriter, status int, typ, code, param, msg string) error {
	b := ErrorJSON(typ, code, param, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, err := w.Write(b)
	return err
}

// SSEErrorEvent renders an error as an SSE event, for streams that fail
// after their first byte.
func SSEErrorEvent(code, msg string) []byte {
	b := ErrorJSON(TypeServer, code, "", msg)
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}
