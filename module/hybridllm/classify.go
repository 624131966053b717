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
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/tidwall/gjson"
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
	reasonDegraded      = "degraded" // the health score took every eligible endpoint out
	// the degradation chain's
	reasonSLOBreach  = "slo_breach"         // p99 over the SLO with a queue: new requests degrade
	reasonKVPressure = "kv_pressure"        // KV cache filling up: new requests degrade
	reasonFormat     = "unsupported_format" // a tier that cannot produce the format the request needs
	reasonDegradeCap = "degrade_cap"        // degrading would pass the alias's cap
	reasonDrained    = "drained"

	reasonRedLine      reason = "red_line"
	reasonUnhealthy    reason = "unhealthy"
	reasonMisconfig    reason = "misconfigured"
	reasonStaleMetrics reason = "stale_metrics"

	// upstream answers that are the gateway's own configuration at
	// fault: it sends its own credentials, path and model name
	reasonUpstreamAuth  reason = "upstream_auth"   // 401, 403
	reasonModelNotFound reason = "model_not_found" // 404 naming the model
	reasonNotFound      reason = "http_404"        // any other 404, with 404 in fallback_on
	// a 2xx that is an HTML page, not the API's answer: the group's
	// address reaches a web server or a proxy's login page
	reasonNotAPI reason = "not_an_api_answer"
	// every endpoint left already failed this request
	reasonAvoided reason = "retries_exhausted"

	// every endpoint left asked for a wait (429 with Retry-After)
	reasonRateLimited reason = "rate_limited"

	// cloud targets closed: the client's budget is spent, or the
	// gateway's daily cloud spend cap is reached
	reasonBudget   reason = "client_budget"
	reasonSpendCap reason = "spend_cap"
	// cloud targets closed for now: what the requests in flight reserved
	// (see hold) reaches the client's budget or the spend cap
	reasonBudgetHeld   reason = "client_budget_in_flight"
	reasonSpendCapHeld reason = "spend_cap_in_flight"
	// the cloud spend in storage could not be read, and no operator has
	// accepted counting on without it
	reasonSpendUnknown reason = "spend_unknown"
)

// statusReason is the reason of an upstream answer with a fallback
// status; body is the start of a 404's body, which tells a missing model
// from another 404.
func statusReason(status int, body []byte) reason {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return reasonUpstreamAuth
	case http.StatusNotFound:
		if isModelNotFound(body) {
			return reasonModelNotFound
		}
		return reasonNotFound
	}
	return reason("http_" + strconv.Itoa(status))
}

// isModelNotFound reports whether a 404 body says the model does not
// exist: OpenAI's `model_not_found` code, Azure's `DeploymentNotFound`,
// or a message about a model that does not exist or was not found
// (vLLM's "The model `x` does not exist.", in its current
// {"error":{...}} shape or its older top-level one, and Ollama's string).
func isModelNotFound(body []byte) bool {
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

// mentionsMissingModel reports whether an error message is about a
// model that does not exist or was not found.
func mentionsMissingModel(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "model") &&
		(strings.Contains(msg, "does not exist") || strings.Contains(msg, "not found"))
}

// statusSet is a set of upstream statuses from 400 to 599.
type statusSet [4]uint64

// has reports whether status is in the set.
func (s *statusSet) has(status int) bool {
	i := status - 400
	return i >= 0 && i < 200 && s[i>>6]&(1<<(i&63)) != 0
}

func (s *statusSet) add(status int) { i := status - 400; s[i>>6] |= 1 << (i & 63) }

// defaultFallbackOn is the statuses that move a request to the next
// target unless the target sets fallback_on: 408, 429 and every 5xx (the
// upstream is slow, busy or broken) and 401, 403 (the gateway's own
// credentials are wrong for this upstream). A 404 that says the model
// does not exist falls back whatever the set (see attemptWriter); any
// other 404 goes to the client unless the set has 404.
var defaultFallbackOn = []int{401, 403, 408, 429, 5}

// newStatusSet builds the set of fallback_on values: statuses from 400 to
// 599, and 4 or 5 for a whole class, as in Caddy's status matchers.
func newStatusSet(codes []int) (statusSet, error) {
	var s statusSet
	for _, c := range codes {
		switch {
		case c == 4 || c == 5:
			for st := c * 100; st < c*100+100; st++ {
				s.add(st)
			}
		case c >= 400 && c <= 599:
			s.add(c)
		default:
			return s, fmt.Errorf("fallback_on: %d is not a 4xx or 5xx status", c)
		}
	}
	return s, nil
}

// fallsBackOn reports whether an upstream answer with this status moves
// the request to the next target.
func (t *Target) fallsBackOn(status int) bool {
	return t.fallbackOn.has(status)
}

// verdict is what an attempt says about its upstream, for the breakers.
type verdict = breaker.Outcome

// Verdicts of an attempt.
const (
	verdictNone    = breaker.None // no evidence either way (client left, skipped)
	verdictSuccess = breaker.Success
	verdictFailure = breaker.Failure
)

// verdictOf judges an attempt that failed without an answer, for why,
// for the breakers: an upstream failure is a failure, and anything the
// upstream cannot be blamed for (the client left, say) is neither. (An
// answer is a success: a 4xx is the client's business.)
func verdictOf(why reason, client context.Context) verdict {
	if client.Err() != nil {
		return verdictNone
	}
	switch why {
	case reasonDeadline, reasonContextLength, reasonNoEndpoint, reasonRedLine, reasonUnhealthy,
		reasonMisconfig, reasonStaleMetrics, reasonBreakerOpen, reasonDegraded, reasonOverflow, reasonContextWindow, reasonDrained,
		reasonSLOBreach, reasonKVPressure, reasonFormat, reasonDegradeCap,
		reasonAvoided, reasonRateLimited, reasonNotFound, reasonBudget, reasonSpendCap, reasonBudgetHeld, reasonSpendCapHeld, reasonSpendUnknown:
		// a 404 that does not name the model may be the path the client
		// chose: no evidence against the upstream
		return verdictNone
	}
	return verdictFailure
}

// writeFailed reports whether a proxy error is a connection that failed
// while the request was written to it (the upstream had closed it).
func writeFailed(err error) bool {
	var oe *net.OpError
	if !errors.As(err, &oe) || (oe.Op != "write" && oe.Op != "readfrom") {
		return false
	}
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
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
