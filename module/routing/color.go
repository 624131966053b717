// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// routeTagHeader names the color a request asks for (canonical form).
const routeTagHeader = "X-Route-Tag"

// Color is a colored canary of an alias: a request whose X-Route-Tag
// header names the color, from a trusted source, goes to the color's
// target first. The header is sent upstream unchanged. A tag from any
// other source, or one the alias has no color for, is removed, and the
// answer says `X-Hybrid-Color: ignored`.
type Color struct {
	// The X-Route-Tag value that asks for this color.
	Tag string `json:"tag,omitempty"`

	// The target a colored request goes to; every target field but set,
	// weight and health applies.
	Target

	// Whether a colored request whose target fails falls back to the
	// alias's own targets. Default: true.
	Fallback *bool `json:"fallback,omitempty"`

	// Clients (by name) whose tags count, besides the clients marked
	// trusted.
	TrustedClients []string `json:"trusted_clients,omitempty"`

	// Client addresses (CIDR ranges or single IPs) whose tags count, as
	// Caddy's server determines the client IP (trusted_proxies apply).
	TrustedRanges []string `json:"trusted_ranges,omitempty"`

	FallsBack bool `json:"-"`
	ranges    []netip.Prefix
}

// ColorsIgnored counts tags removed from requests.
var ColorsIgnored = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: metricsNS, Name: "colors_ignored_total",
	Help: "X-Route-Tag headers removed, by alias and why: untrusted (the source may not color) or unknown (no such color on the alias).",
}, []string{"gateway", "alias", "reason"})

// colors checks the alias's colors.
func (s *AliasSetup) colors(al *Alias) error {
	for i, c := range al.Colors {
		if c == nil || c.Tag == "" {
			return fmt.Errorf("color %d: a tag is required", i)
		}
		if slices.IndexFunc(al.Colors[:i], func(o *Color) bool { return o.Tag == c.Tag }) >= 0 {
			return fmt.Errorf("color %q twice", c.Tag)
		}
		if c.Set != "" || c.Weight != nil || c.Health != nil || c.Tier != nil || c.SLO != 0 {
			return fmt.Errorf("color %q: set, weight, health, tier and slo do not apply to a color", c.Tag)
		}
		if err := s.target(al, &c.Target); err != nil {
			return fmt.Errorf("color %q (group %q): %v", c.Tag, c.Group, err)
		}
		c.FallsBack = c.Fallback == nil || *c.Fallback
		c.ranges = c.ranges[:0]
		for _, s := range c.TrustedRanges {
			p, err := parseRange(s)
			if err != nil {
				return fmt.Errorf("color %q: trusted_ranges: %v", c.Tag, err)
			}
			c.ranges = append(c.ranges, p)
		}
		if len(c.TrustedClients) > 0 && !s.Clients {
			return fmt.Errorf("color %q: trusted_clients needs clients", c.Tag)
		}
		if len(c.ranges) == 0 && !s.Clients {
			return fmt.Errorf("color %q: nobody may use it: give trusted_ranges, or configure clients", c.Tag)
		}
	}
	return nil
}

// parseRange parses a CIDR range or a single IP.
func parseRange(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR range nor an IP", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// trusts reports whether the color takes tags from the request's source.
func (c *Color) trusts(r *http.Request, cl *clients.Caller) bool {
	if cl != nil && (cl.Trusted || (cl.Known && slices.Contains(c.TrustedClients, cl.Name))) {
		return true
	}
	if len(c.ranges) == 0 {
		return false
	}
	ip, ok := clientAddr(r)
	if !ok {
		return false
	}
	for _, p := range c.ranges {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// clientAddr is the client's IP as Caddy's server determined it (behind
// trusted proxies, the forwarded one), else the connection's peer.
func clientAddr(r *http.Request) (netip.Addr, bool) {
	s, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if s == "" {
		s = r.RemoteAddr
		if host, _, err := net.SplitHostPort(s); err == nil {
			s = host
		}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// ColorPicker judges the route tags of a gateway whose aliases have
// colors.
type ColorPicker struct {
	Gateway string
	Headers bool // the X-Hybrid-* headers are sent
	Logger  *zap.Logger
}

// Pick finds the color the request asks for, if its source may ask;
// a tag that does not count is removed and counted, and the answer says
// so.
func (p *ColorPicker) Pick(w http.ResponseWriter, r *http.Request, al *Alias, cl *clients.Caller, id string) *Color {
	v, ok := r.Header[routeTagHeader]
	if !ok {
		return nil
	}
	tag := ""
	if len(v) > 0 {
		tag = v[0]
	}
	why := "unknown"
	for _, c := range al.Colors {
		if c.Tag == tag && len(v) == 1 {
			if c.trusts(r, cl) {
				if p.Headers {
					w.Header().Set("X-Hybrid-Color", c.Tag)
				}
				return c
			}
			why = "untrusted"
			break
		}
	}
	delete(r.Header, routeTagHeader)
	ColorsIgnored.WithLabelValues(p.Gateway, al.Name, why).Inc()
	if ce := p.Logger.Check(zap.DebugLevel, "route tag ignored"); ce != nil {
		ce.Write(zap.String("request_id", id), zap.String("alias", al.Name), zap.String("reason", why))
	}
	w.Header().Set("X-Hybrid-Color", "ignored")
	return nil
}
