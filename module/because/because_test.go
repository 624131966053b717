// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package because

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
		want Reason
	}{
		{caddyhttp.Error(http.StatusServiceUnavailable, errors.New("no upstreams available")), NoEndpoint},
		{caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(refused)), ConnRefused},
		{caddyhttp.Error(http.StatusBadGateway, reset), ConnReset},
		{caddyhttp.Error(http.StatusBadGateway, fmt.Errorf("reading: %w", io.ErrUnexpectedEOF)), ConnReset},
		{caddyhttp.Error(http.StatusBadGateway, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}), ConnReset},
		{caddyhttp.Error(http.StatusBadGateway, &net.OpError{Op: "readfrom", Net: "tcp", Err: &net.OpError{Op: "write", Err: net.ErrClosed}}), ConnReset},
		{caddyhttp.Error(http.StatusBadGateway, fmt.Errorf("net/http: HTTP/1.x transport connection broken: %v", "write: broken pipe")), ConnReset},
		{caddyhttp.Error(http.StatusGatewayTimeout, context.DeadlineExceeded), Timeout},
		{caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(errors.New("lookup nowhere: no such host"))), Dial},
		{caddyhttp.Error(http.StatusBadGateway, errors.New("something else")), Upstream},
		{nil, Upstream},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestStatusReason(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   Reason
	}{
		{401, `{"error":"Unauthorized"}`, UpstreamAuth},
		{401, `{"error":{"message":"Incorrect API key provided: sk-***1234.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, UpstreamAuth},
		{403, ``, UpstreamAuth},
		// vLLM, current shape and the one before 0.10
		{404, `{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`, ModelNotFound},
		{404, `{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, ModelNotFound},
		// OpenAI, Azure OpenAI, Ollama
		{404, `{"error":{"message":"The model ` + "`gpt-x`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, ModelNotFound},
		{404, `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`, ModelNotFound},
		{404, `{"error":"model \"llama3\" not found, try pulling it first"}`, ModelNotFound},
		// a 404 that is not about the model
		{404, `{"detail":"Not Found"}`, NotFound},
		{404, `{"error":{"message":"Invalid URL (POST /v1/chat/completion)","type":"invalid_request_error","param":null,"code":null}}`, NotFound},
		{404, `not json: model does not exist`, NotFound},
		{404, ``, NotFound},
		{408, ``, "http_408"},
		{429, ``, "http_429"},
		{503, ``, "http_503"},
	} {
		if got := OfStatus(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("OfStatus(%d, %s) = %q, want %q", tc.status, tc.body, got, tc.want)
		}
	}
}

// A connection that failed while the request was written to it is told
// from one that failed on reading the answer: only the first may go again.
func TestWriteFailed(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, true},
		{&net.OpError{Op: "readfrom", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}, true},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false},
		{&net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{errors.New("broken pipe"), false},
	} {
		if got := WriteFailed(tc.err); got != tc.want {
			t.Errorf("WriteFailed(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
