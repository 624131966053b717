// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// checkProxyUpstreams reads a group's proxy segment (from its "proxy"
// token) for upstreams written as an SDK's base URL, such as
// https://api.openai.com/v1, which reverse_proxy refuses with a message
// that does not say what to write instead, and for a comma-separated
// list, which it would take as one address. The dispenser is left where
// it started.
func checkProxyUpstreams(seg *caddyfile.Dispenser) error {
	defer seg.Reset()
	if !seg.Next() {
		return nil
	}
	check := func(args []string) error {
		for _, a := range args {
			if strings.Contains(a, ",") && !strings.Contains(a, "{") {
				return seg.Errf("proxy upstream %q: separate upstreams with spaces, not commas", a)
			}
			if !strings.Contains(a, "://") || strings.Contains(a, "{") {
				continue
			}
			u, err := url.Parse(a)
			if err != nil || u.Path == "" {
				continue
			}
			base := u.Scheme + "://" + u.Host
			if u.Path == "/" {
				return seg.Errf("proxy upstream %s: write %s, without the trailing /: an upstream is scheme://host[:port] only", a, base)
			}
			prefix := strings.TrimSuffix(u.Path, "/")
			if prefix == "/v1" {
				return seg.Errf("proxy upstream %s: write %s, without /v1: each request keeps its own path (/v1/chat/completions), and an upstream is scheme://host[:port] only", a, base)
			}
			if p, ok := strings.CutSuffix(prefix, "/v1"); ok {
				return seg.Errf("proxy upstream %s: an upstream is scheme://host[:port] only, since each request keeps its own path (/v1/chat/completions): write %s, and add the prefix with rewrite %s{uri} in the proxy block", a, base, p)
			}
			return seg.Errf("proxy upstream %s: an upstream is scheme://host[:port] only: write %s; each request keeps its own path (/v1/chat/completions), so an API under %s needs its path mapped in the proxy block (rewrite)", a, base, prefix)
		}
		return nil
	}
	if err := check(seg.RemainingArgs()); err != nil {
		return err
	}
	for nesting := seg.Nesting(); seg.NextBlock(nesting); {
		if seg.Val() == "to" {
			if err := check(seg.RemainingArgs()); err != nil {
				return err
			}
		}
	}
	return nil
}
