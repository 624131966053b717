// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		err  error
		want reason
	}{
		{caddyhttp.Error(http.StatusServiceUnavailable, errors.New("no upstreams available")), reasonNoEndpoint},
		{caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(refused)), reasonConnRefused},
		{caddyhttp.Error(http.StatusBadGateway, reset), reasonConnReset},
		{caddyhttp.Error(http.StatusBadGateway, fmt.Errorf("reading: %w", io.ErrUnexpectedEOF)), reasonConnReset},
		{caddyhttp.Error(http.StatusBadGateway, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}), reasonConnReset},
		{caddyhttp.Error(http.StatusBadGateway, &net.OpError{Op: "readfrom", Net: "tcp", Err: &net.OpError{Op: "write", Err: net.ErrClosed}}), reasonConnReset},
		{caddyhttp.Error(http.StatusBadGateway, fmt.Errorf("net/http: HTTP/1.x transport connection broken: %v", "write: broken pipe")), reasonConnReset},
		{caddyhttp.Error(http.StatusGatewayTimeout, context.DeadlineExceeded), reasonTimeout},
		{caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(errors.New("lookup nowhere: no such host"))), reasonDial},
		{caddyhttp.Error(http.StatusBadGateway, errors.New("something else")), reasonUpstream},
		{nil, reasonUpstream},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestFallbackOnDefault(t *testing.T) {
	set, err := newStatusSet(defaultFallbackOn)
	if err != nil {
		t.Fatal(err)
	}
	tg := &Target{fallbackOn: set}
	for status, want := range map[int]bool{
		200: false, 204: false, 301: false, 400: false, 409: false, 422: false,
		401: true, 403: true, 404: false, 408: true, 429: true, // a 404 is held and read instead
		500: true, 502: true, 503: true, 504: true, 599: true,
	} {
		if got := tg.fallsBackOn(status); got != want {
			t.Errorf("fallsBackOn(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestFallbackOnSet(t *testing.T) {
	set, err := newStatusSet([]int{429, 503, 4})
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[int]bool{399: false, 400: true, 404: true, 499: true, 500: false, 503: true, 599: false, 600: false, 0: false} {
		if got := set.has(status); got != want {
			t.Errorf("has(%d) = %v, want %v", status, got, want)
		}
	}
	for _, bad := range [][]int{{200}, {302}, {600}, {3}, {0}, {-1}} {
		if _, err := newStatusSet(bad); err == nil {
			t.Errorf("newStatusSet(%v) accepted", bad)
		}
	}
}

func TestStatusReason(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   reason
	}{
		{401, `{"error":"Unauthorized"}`, reasonUpstreamAuth},
		{401, `{"error":{"message":"Incorrect API key provided: sk-***1234.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, reasonUpstreamAuth},
		{403, ``, reasonUpstreamAuth},
		// vLLM, current shape and the one before 0.10
		{404, `{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`, reasonModelNotFound},
		{404, `{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, reasonModelNotFound},
		// OpenAI, Azure OpenAI, Ollama
		{404, `{"error":{"message":"The model ` + "`gpt-x`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, reasonModelNotFound},
		{404, `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`, reasonModelNotFound},
		{404, `{"error":"model \"llama3\" not found, try pulling it first"}`, reasonModelNotFound},
		// a 404 that is not about the model
		{404, `{"detail":"Not Found"}`, reasonNotFound},
		{404, `{"error":{"message":"Invalid URL (POST /v1/chat/completion)","type":"invalid_request_error","param":null,"code":null}}`, reasonNotFound},
		{404, `not json: model does not exist`, reasonNotFound},
		{404, ``, reasonNotFound},
		{408, ``, "http_408"},
		{429, ``, "http_429"},
		{503, ``, "http_503"},
	} {
		if got := statusReason(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("statusReason(%d, %s) = %q, want %q", tc.status, tc.body, got, tc.want)
		}
	}
}
