// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"fmt"
	"net/http"
	"strings"
)

// upstreamOnly reports whether an upstream response header is one the
// client does not get by default: headers that tell where the request
// landed (server software, proxies, CDNs, the provider's account, limits
// and processing times) or that belong to the upstream's own site
// (cookies, HSTS, Alt-Svc). key is in canonical form, as the proxy's
// transport gives it. A switch and a few prefix tests: nothing is
// allocated.
func upstreamOnly(key string) bool {
	switch key {
	case "Server", "Via", "X-Powered-By", "Alt-Svc", "Set-Cookie", "Strict-Transport-Security",
		"Report-To", "Reporting-Endpoints", "Nel", "Apim-Request-Id", "Request-Id", "Cf-Ray":
		return true
	}
	if len(key) < 3 {
		return false
	}
	switch key[0] {
	case 'O':
		return strings.HasPrefix(key, "Openai-") // organization, project, version, processing-ms
	case 'A':
		return strings.HasPrefix(key, "Anthropic-") || strings.HasPrefix(key, "Azureml-")
	case 'C':
		return strings.HasPrefix(key, "Cf-")
	case 'L':
		return strings.HasPrefix(key, "Llm_provider-")
	case 'X':
		return strings.HasPrefix(key, "X-Ratelimit-") || strings.HasPrefix(key, "X-Envoy-") ||
			strings.HasPrefix(key, "X-Kong-") || strings.HasPrefix(key, "X-Amzn-") ||
			strings.HasPrefix(key, "X-Amz-") || strings.HasPrefix(key, "X-Ms-") ||
			strings.HasPrefix(key, "X-Litellm-") || strings.HasPrefix(key, "X-Cache")
	}
	return false
}

// HeaderPass is the provisioned form of PassHeaders.
type HeaderPass struct {
	all      bool
	names    map[string]bool // canonical keys
	prefixes []string        // canonical prefixes
}

// NewHeaderPass reads PassHeaders: names, `prefix*` and `*`.
func NewHeaderPass(list []string) (*HeaderPass, error) {
	if len(list) == 0 {
		return nil, nil
	}
	p := &HeaderPass{names: make(map[string]bool)}
	for _, name := range list {
		prefix, isPrefix := strings.CutSuffix(name, "*")
		switch {
		case name == "*":
			p.all = true
		case prefix == "" || strings.ContainsAny(prefix, " \t\r\n:*"):
			return nil, fmt.Errorf("pass_headers: invalid header name %q", name)
		case isPrefix:
			// a prefix ending in a dash is canonical as such: X-Ratelimit-
			p.prefixes = append(p.prefixes, http.CanonicalHeaderKey(prefix + "x")[:len(prefix)])
		default:
			p.names[http.CanonicalHeaderKey(name)] = true
		}
	}
	return p, nil
}

// passes reports whether the header with the canonical key goes to the
// client although upstreamOnly holds it back.
func (p *HeaderPass) passes(key string) bool {
	if p == nil {
		return false
	}
	if p.all || p.names[key] {
		return true
	}
	for _, pre := range p.prefixes {
		if strings.HasPrefix(key, pre) {
			return true
		}
	}
	return false
}
