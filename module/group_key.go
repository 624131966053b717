// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net"
	"net/netip"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
)

// warnKeyExposure warns of a group API key that others may read: one
// written into the config itself, which the admin API's GET /config/ and
// Caddy's autosave.json show, or one sent over plain HTTP to an upstream
// that is neither loopback nor a private address.
func (grp *Group) warnKeyExposure(log *zap.Logger, name string) {
	if !strings.Contains(grp.APIKey, "{") {
		log.Warn("api_key is written into the config, where the admin API's GET /config/ and Caddy's autosave.json show it: read it at start-up with {env.VAR} or {file./path}",
			zap.String("group", name))
	}
	if t, ok := grp.proxy.Transport.(*reverseproxy.HTTPTransport); !ok || t.TLS != nil {
		return
	}
	for _, u := range grp.proxy.Upstreams {
		host, _, err := net.SplitHostPort(u.Dial)
		if err != nil || host == "localhost" || strings.Contains(host, "{") {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil && (ip.IsLoopback() || ip.IsPrivate()) {
			continue
		}
		log.Warn("api_key goes to this upstream over plain HTTP: write it as https://host to send the key over TLS",
			zap.String("group", name), zap.String("upstream", u.Dial))
	}
}
