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

// A fallback status names its reason: an upstream's refusal of the
// gateway's key, a 404 (the API's error shape tells a missing model, see
// protocol.ErrorShape), or the status itself.
func TestStatusReason(t *testing.T) {
	for status, want := range map[int]Reason{
		401: UpstreamAuth, 403: UpstreamAuth, 404: NotFound,
		408: "http_408", 429: "http_429", 503: "http_503",
	} {
		if got := OfStatus(status); got != want {
			t.Errorf("OfStatus(%d) = %q, want %q", status, got, want)
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
