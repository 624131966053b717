// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// reason says why a target was left or passed over. Reasons are a fixed
// vocabulary: they appear in error messages, logs, headers and metric
// labels, and never carry addresses.
type reason string

// Reasons an attempt failed, or a target or endpoint was passed over.
const (
	reasonConnRefused reason = "connection_refused"
	reasonConnReset          = "connection_reset"
	reasonDial               = "dial_error"
	reasonTimeout            = "timeout"
	reasonDeadline           = "deadline"
	reasonNoEndpoint         = "no_endpoint"
	reasonUpstream           = "upstream_error"

	reasonFirstByte     = "first_byte_timeout"
	reasonContextLength = "context_length"
	reasonContextWindow = "context_window"
	reasonOverflow      = "overflow"
	reasonBreakerOpen   = "breaker_open"
	reasonDrained       = "drained"

	reasonRedLine      reason = "red_line"
	reasonUnhealthy    reason = "unhealthy"
	reasonMisconfig    reason = "misconfigured"
	reasonStaleMetrics reason = "stale_metrics"
	// every endpoint left already failed this request
	reasonAvoided reason = "retries_exhausted"

	// every endpoint left asked for a wait (429 with Retry-After)
	reasonRateLimited reason = "rate_limited"
)

// statusReason is the reason of an upstream answer with a fallback status.
func statusReason(status int) reason {
	return reason("http_" + strconv.Itoa(status))
}

// fallbackStatus reports whether an upstream answer with this status
// moves the request to the next target.
func fallbackStatus(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// verdict is what an attempt says about its upstream, for the breakers.
type verdict int8

// Verdicts of an attempt.
const (
	verdictNone verdict = iota // no evidence either way (client left, skipped)
	verdictSuccess
	verdictFailure
)

// verdict judges an attempt's outcome for the breakers: an answer is a
// success (a 4xx is the client's business), an upstream failure is a
// failure, and anything the upstream cannot be blamed for is neither.
func verdictOf(why reason, answered bool, client context.Context) verdict {
	if client.Err() != nil {
		return verdictNone
	}
	if answered {
		return verdictSuccess
	}
	switch why {
	case reasonDeadline, reasonContextLength, reasonNoEndpoint, reasonRedLine, reasonUnhealthy,
		reasonMisconfig, reasonStaleMetrics, reasonBreakerOpen, reasonOverflow, reasonContextWindow, reasonDrained,
		reasonAvoided, reasonRateLimited:
		return verdictNone
	}
	return verdictFailure
}

// classify names why a proxy attempt failed without a response.
func classify(err error) reason {
	if err == nil {
		return reasonUpstream
	}
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode == http.StatusServiceUnavailable &&
		he.Err != nil && he.Err.Error() == "no upstreams available" {
		return reasonNoEndpoint
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return reasonConnRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// net.ErrClosed: the transport closed the connection under the
		// request body it was writing, having seen the reset
		return reasonConnReset
	}
	// some transport errors carry their cause only in their text
	switch msg := err.Error(); {
	case strings.Contains(msg, "connection reset"), strings.Contains(msg, "broken pipe"),
		strings.Contains(msg, "server closed"), strings.HasSuffix(msg, ": EOF"):
		return reasonConnReset
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return reasonTimeout
	}
	var de reverseproxy.DialError
	if errors.As(err, &de) {
		// DialError does not unwrap, so its cause is only in its text
		if strings.Contains(de.Error(), "connection refused") {
			return reasonConnRefused
		}
		return reasonDial
	}
	return reasonUpstream
}
