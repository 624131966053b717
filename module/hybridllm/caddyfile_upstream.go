// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/core"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"github.com/tidwall/gjson"
)

// checkProxyUpstreams reads a group's proxy segment (from its "proxy"
// token) for upstreams written as an SDK's base URL, such as
// https://api.openai.com/v1, which reverse_proxy refuses with a message
// that does not say what to write instead, and for a comma-separated
// list, which it would take as one address. It returns the upstreams
// written without a scheme, which reverse_proxy dials over plain HTTP.
// The dispenser is left where it started.
func checkProxyUpstreams(seg *caddyfile.Dispenser) (schemeless []string, err error) {
	defer seg.Reset()
	if !seg.Next() {
		return nil, nil
	}
	check := func(args []string) error {
		for _, a := range args {
			if strings.Contains(a, ",") && !strings.Contains(a, "{") {
				return seg.Errf("proxy upstream %q: separate upstreams with spaces, not commas", a)
			}
			if strings.Contains(a, "{") {
				continue
			}
			if !strings.Contains(a, "://") {
				schemeless = append(schemeless, a)
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
		return nil, err
	}
	for nesting := seg.Nesting(); seg.NextBlock(nesting); {
		if seg.Val() == "to" {
			if err := check(seg.RemainingArgs()); err != nil {
				return nil, err
			}
		}
	}
	return schemeless, nil
}

// checkKeyInClear refuses a group of kind openai that sends credentials
// (its api_key, or a credential header the proxy block sets) to an upstream on
// a public network written without a scheme: reverse_proxy dials it over
// plain HTTP (api.openai.com is dial api.openai.com:80), and the key would
// cross the network in clear. Upstreams on a private network (loopback,
// private addresses, service names: see privateHost) and a proxy block
// whose transport enables TLS are left as they are.
func checkKeyInClear(d *caddyfile.Dispenser, grp *Group, schemeless []string) error {
	if !grp.Cloud() || len(schemeless) == 0 {
		return nil
	}
	if gjson.GetBytes(grp.ProxyRaw, "transport.tls").Exists() {
		return nil
	}
	keyed := grp.APIKey != ""
	for _, op := range []string{"set", "add"} {
		for _, h := range core.CredentialHeaders {
			if gjson.GetBytes(grp.ProxyRaw, "headers.request."+op+"."+h).Exists() ||
				gjson.GetBytes(grp.ProxyRaw, "headers.request."+op+"."+strings.ToLower(h)).Exists() {
				keyed = true
			}
		}
	}
	if !keyed {
		return nil
	}
	for _, a := range schemeless {
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		if upstream.PrivateHost(strings.Trim(host, "[]")) {
			continue
		}
		return d.Errf("proxy upstream %s has no scheme, so its API key would go over plain HTTP: write https://%s", a, strings.TrimSuffix(a, ":443"))
	}
	return nil
}
