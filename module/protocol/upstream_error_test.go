// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"testing"
)

// An upstream's 4xx answer reaches the client in the OpenAI shape, with a
// string code or null, and with the alias where the served name was.
func TestUpstreamErrorBody(t *testing.T) {
	const served, alias = "qwen2.5-7b-instruct", "chat-main"
	for _, tc := range []struct {
		name, in string
		status   int
		want     string
	}{
		{"OpenAI's, kept byte for byte", `{"error": {"message": "bad temperature", "type": "invalid_request_error", "param": "temperature", "code": null}}`, 400,
			`{"error": {"message": "bad temperature", "type": "invalid_request_error", "param": "temperature", "code": null}}`},
		{"vLLM's nested, numeric code", `{"error":{"message":"Field required: body.Messages","type":"BadRequestError","param":null,"code":400}}`, 400,
			`{"error":{"message":"Field required: body.Messages","type":"invalid_request_error","param":null,"code":null}}`},
		{"vLLM's flat, naming the model", `{"object":"error","message":"model qwen2.5-7b-instruct: bad temperature","type":"BadRequestError","param":"temperature","code":400}`, 400,
			`{"error":{"message":"model chat-main: bad temperature","type":"invalid_request_error","param":"temperature","code":null}}`},
		{"OpenAI's shape naming the model", `{"error":{"message":"qwen2.5-7b-instruct does not take tools","type":"invalid_request_error","param":"tools","code":"unsupported"}}`, 400,
			`{"error":{"message":"chat-main does not take tools","type":"invalid_request_error","param":"tools","code":"unsupported"}}`},
		{"plain text", "404 page not found for qwen2.5-7b-instruct\n", 404,
			`{"error":{"message":"404 page not found for chat-main","type":"invalid_request_error","param":null,"code":null}}`},
		{"FastAPI's detail", `{"detail":"Not Found"}`, 404, `{"error":{"message":"Not Found","type":"invalid_request_error","param":null,"code":null}}`},
		{"empty", "", 409, `{"error":{"message":"Conflict","type":"invalid_request_error","param":null,"code":null}}`},
		{"a JSON array", `["nope"]`, 422, `{"error":{"message":"[\"nope\"]","type":"invalid_request_error","param":null,"code":null}}`},
	} {
		if got := string(UpstreamErrorBody([]byte(tc.in), tc.status, served, alias)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
