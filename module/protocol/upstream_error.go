// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// maxErrorText caps the text kept of an upstream's error page that is not
// JSON.
const maxErrorText = 500

// UpstreamErrorBody is an upstream's 4xx answer as the client gets it: in
// the OpenAI error shape whatever the upstream's (vLLM's flat shape and
// its numeric codes, a proxy's plain-text or HTML page), with the served
// model name replaced by the alias. An answer in that shape already,
// without the served name, is kept byte for byte.
func UpstreamErrorBody(body []byte, status int, served, alias string) []byte {
	var msg, typ, param, code gjson.Result
	switch e := gjson.GetBytes(body, "error"); {
	case e.IsObject():
		msg, typ, param, code = e.Get("message"), e.Get("type"), e.Get("param"), e.Get("code")
		if msg.Type == gjson.String && (code.Type == gjson.String || code.Type == gjson.Null) &&
			(served == "" || !bytes.Contains(body, []byte(served))) {
			return body
		}
	case gjson.ValidBytes(body) && gjson.GetBytes(body, "object").String() == "error":
		r := gjson.ParseBytes(body)
		msg, typ, param, code = r.Get("message"), r.Get("type"), r.Get("param"), r.Get("code")
	case gjson.GetBytes(body, "detail").Type == gjson.String:
		// FastAPI's own answers (an unknown path, say)
		msg = gjson.GetBytes(body, "detail")
	default:
		text := Capped(strings.TrimSpace(string(body)), maxErrorText)
		if text == "" {
			text = http.StatusText(status)
		}
		return ErrorJSON(TypeInvalidRequest, "", "", Renamed(text, served, alias))
	}
	t := typ.String()
	if typ.Type != gjson.String || !isErrorType(t) {
		t = TypeInvalidRequest // vLLM's are Python class names: BadRequestError
	}
	c, p := "", ""
	if code.Type == gjson.String {
		c = code.String() // a number is vLLM's copy of the status
	}
	if param.Type == gjson.String {
		p = param.String()
	}
	m := msg.String()
	if m == "" {
		m = http.StatusText(status)
	}
	return ErrorJSON(t, c, p, Renamed(m, served, alias))
}

// renamed replaces the served model name in s with the alias.
func Renamed(s, served, alias string) string {
	if served == "" {
		return s
	}
	return strings.ReplaceAll(s, served, alias)
}

// capped cuts s to at most n bytes, on a character boundary.
func Capped(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// isErrorType reports whether t reads as an OpenAI error type
// (invalid_request_error): lower case and underscores.
func isErrorType(t string) bool {
	if t == "" {
		return false
	}
	for _, c := range t {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
