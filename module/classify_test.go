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

func TestFallbackStatus(t *testing.T) {
	for status, want := range map[int]bool{200: false, 400: false, 401: false, 404: false, 429: true, 500: true, 502: true, 503: true, 504: true} {
		if got := fallbackStatus(status); got != want {
			t.Errorf("fallbackStatus(%d) = %v, want %v", status, got, want)
		}
	}
}
