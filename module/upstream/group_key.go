// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"net"
	"net/netip"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
)

// warnKeyExposure warns of the API key of group name, sent by its proxy,
// that others may read: one
// written into the config itself, which the admin API's GET /config/ and
// Caddy's autosave.json show, or one sent over plain HTTP to an upstream
// that is not on a private network (see PrivateHost).
func warnKeyExposure(log *zap.Logger, name, apiKey string, proxy *reverseproxy.Handler) {
	if !strings.Contains(apiKey, "{") {
		log.Warn("api_key is written into the config, where the admin API's GET /config/ and Caddy's autosave.json show it: read it at start-up with {env.VAR} or {file./path}",
			zap.String("group", name))
	}
	if t, ok := proxy.Transport.(*reverseproxy.HTTPTransport); !ok || t.TLS != nil {
		return
	}
	for _, u := range proxy.Upstreams {
		host, _, err := net.SplitHostPort(u.Dial)
		if err != nil || strings.Contains(host, "{") || PrivateHost(host) {
			continue
		}
		log.Warn("api_key goes to this upstream over plain HTTP: write it as https://host to send the key over TLS",
			zap.String("group", name), zap.String("upstream", u.Dial))
	}
}

// privateSuffixes end the names of hosts on a private network.
var privateSuffixes = []string{".local", ".internal", ".svc", ".lan", ".home.arpa", ".localhost"}

// cgnat is the shared address space of RFC 6598, private to a carrier or
// a cluster.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// PrivateHost reports whether host is on a network of its own: a
// loopback, private, link-local or shared address, a name without a dot
// (a container's or a Kubernetes service's), or one under a private
// suffix.
func PrivateHost(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || cgnat.Contains(ip)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if !strings.Contains(host, ".") {
		return true
	}
	for _, s := range privateSuffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}
