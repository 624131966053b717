// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
)

// UnmarshalCaddyfile parses a probe block. Syntax:
//
//	probe {
//		health_interval  <duration>
//		metrics_interval <duration>
//		models_interval  <duration>
//		timeout          <duration>
//		stale_after      <duration>
//		unknown_metrics  saturated|ok
//		ttft_window      <duration>
//		rise             <n>
//		fall             <n>
//	}
func UnmarshalCaddyfile(d *caddyfile.Dispenser) (*Config, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	pc := new(Config)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *caddy.Duration
		switch d.Val() {
		case "health_interval":
			dst = &pc.HealthInterval
		case "metrics_interval":
			dst = &pc.MetricsInterval
		case "models_interval":
			dst = &pc.ModelsInterval
		case "timeout":
			dst = &pc.Timeout
		case "stale_after":
			dst = &pc.StaleAfter
		case "ttft_window":
			dst = &pc.TTFTWindow
		case "rise", "fall":
			n := map[string]*int{"rise": &pc.Rise, "fall": &pc.Fall}[d.Val()]
			if *n != 0 {
				return nil, d.Errf("%s already specified", d.Val())
			}
			v, err := caddyargs.PositiveInt(d)
			if err != nil {
				return nil, err
			}
			*n = v
			continue
		case "unknown_metrics":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			switch d.Val() {
			case "saturated", "ok":
				pc.UnknownMetrics = d.Val()
			default:
				return nil, d.Errf("unknown_metrics must be 'saturated' or 'ok', got '%s'", d.Val())
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			continue
		default:
			return nil, caddyargs.UnknownOption(d, "probe option", d.Val(), "fall", "health_interval", "metrics_interval", "models_interval", "rise", "stale_after", "timeout", "ttft_window", "unknown_metrics")
		}
		if *dst != 0 {
			return nil, d.Errf("%s already specified", d.Val())
		}
		dur, err := caddyargs.Duration(d)
		if err != nil {
			return nil, err
		}
		*dst = dur
	}
	return pc, nil
}
