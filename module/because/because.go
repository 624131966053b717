// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package because is the gateway's vocabulary of why a target was left or
// passed over, and how an upstream's failure is told: from the proxy's
// error (Classify), from a fallback status (OfStatus). Reasons appear in
// error messages, logs, headers and metric labels, and never carry
// addresses. It is a leaf: it imports nothing of the product.
package because

import (
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

// Reason says why a target was left or passed over. Reasons are a fixed
// vocabulary: they appear in error messages, logs, headers and metric
// labels, and never carry addresses.
type Reason string

// Reasons an attempt failed, or a target or endpoint was passed over.
const (
	ConnRefused Reason = "connection_refused"
	ConnReset          = "connection_reset"
	Dial               = "dial_error"
	Timeout            = "timeout"
	Deadline           = "deadline"
	NoEndpoint         = "no_endpoint"
	Upstream           = "upstream_error"

	FirstByte     = "first_byte_timeout"
	ContextLength = "context_length"
	ContextWindow = "context_window"
	Overflow      = "overflow"
	BreakerOpen   = "breaker_open"
	Degraded      = "degraded" // the health score took every eligible endpoint out
	// the degradation chain's
	SLOBreach  = "slo_breach"         // p99 over the SLO with a queue: new requests degrade
	KVPressure = "kv_pressure"        // KV cache filling up: new requests degrade
	Format     = "unsupported_format" // a tier that cannot produce the format the request needs
	DegradeCap = "degrade_cap"        // degrading would pass the alias's cap
	Drained    = "drained"

	RedLine Reason = "red_line"
	// the request's class has filled its share of the red line: the
	// rest is kept for the classes above it
	ClassReserve Reason = "class_reserve"
	// the client is sheddable: it waits for self-hosted, never goes to
	// a cloud target
	Sheddable    Reason = "sheddable"
	Unhealthy    Reason = "unhealthy"
	Misconfig    Reason = "misconfigured"
	StaleMetrics Reason = "stale_metrics"

	// upstream answers that are the gateway's own configuration at
	// fault: it sends its own credentials, path and model name
	UpstreamAuth  Reason = "upstream_auth"   // 401, 403
	ModelNotFound Reason = "model_not_found" // 404 naming the model
	NotFound      Reason = "http_404"        // any other 404, with 404 in fallback_on
	// a 2xx that is an HTML page, not the API's answer: the group's
	// address reaches a web server or a proxy's login page
	NotAPI Reason = "not_an_api_answer"
	// every endpoint left already failed this request
	Avoided Reason = "retries_exhausted"

	// every endpoint left asked for a wait (429 with Retry-After)
	RateLimited Reason = "rate_limited"

	// the target's group does not serve the request's API (an Anthropic
	// Messages request, a chat-only upstream)
	ProtocolUnsupported Reason = "protocol_unsupported"

	// the target does not hold the response a Responses API follow-up
	// names (previous_response_id): its store is another upstream's
	PreviousResponseMissing Reason = "previous_response_missing"

	// cloud targets closed: the client's budget is spent, or the
	// gateway's daily cloud spend cap is reached
	Budget   Reason = "client_budget"
	SpendCap Reason = "spend_cap"
	// cloud targets closed for now: what the requests in flight reserved
	// (see hold) reaches the client's budget or the spend cap
	BudgetHeld   Reason = "client_budget_in_flight"
	SpendCapHeld Reason = "spend_cap_in_flight"
	// the cloud spend in storage could not be read, and no operator has
	// accepted counting on without it
	SpendUnknown Reason = "spend_unknown"
)

// OfStatus is the reason of an upstream answer with a fallback status.
// (A 404 that says the model does not exist is ModelNotFound: the API's
// error shape tells, see protocol.ErrorShape.)
func OfStatus(status int) Reason {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return UpstreamAuth
	case http.StatusNotFound:
		return NotFound
	}
	return Reason("http_" + strconv.Itoa(status))
}

// WriteFailed reports whether a proxy error is a connection that failed
// while the request was written to it (the upstream had closed it).
func WriteFailed(err error) bool {
	var oe *net.OpError
	if !errors.As(err, &oe) || (oe.Op != "write" && oe.Op != "readfrom") {
		return false
	}
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// Classify names why a proxy attempt failed without a response.
func Classify(err error) Reason {
	if err == nil {
		return Upstream
	}
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode == http.StatusServiceUnavailable &&
		he.Err != nil && he.Err.Error() == "no upstreams available" {
		return NoEndpoint
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ConnRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// net.ErrClosed: the transport closed the connection under the
		// request body it was writing, having seen the reset
		return ConnReset
	}
	// some transport errors carry their cause only in their text
	switch msg := err.Error(); {
	case strings.Contains(msg, "connection reset"), strings.Contains(msg, "broken pipe"),
		strings.Contains(msg, "server closed"), strings.HasSuffix(msg, ": EOF"):
		return ConnReset
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Timeout
	}
	var de reverseproxy.DialError
	if errors.As(err, &de) {
		// DialError does not unwrap, so its cause is only in its text
		if strings.Contains(de.Error(), "connection refused") {
			return ConnRefused
		}
		return Dial
	}
	return Upstream
}
