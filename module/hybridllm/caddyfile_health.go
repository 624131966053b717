// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// unmarshalHealth parses a health block of a weighted set or of one of
// its targets. Syntax:
//
//	health {
//		error_rate    <share>|off # 0.05 or 5%; default 5%
//		p99_latency   <duration> # default: not watched
//		alert_at      <share>    # of a threshold; default 80%
//		window        <duration> # default 10s
//		min_requests  <n>        # default 20
//		hold          <duration> # default 10s
//		ramp_step     <share>    # default 25%
//		ramp_interval <duration> # default 2s
//		max_degraded  <n>        # members out at once (set level); default all but one
//	}
func unmarshalHealth(d *caddyfile.Dispenser) (*routing.HealthConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	hc := new(routing.HealthConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "error_rate":
			var v float64
			v, err = caddyargs.ShareOr(d, "off", 0) // off: not watched
			hc.ErrorRate = &v
		case "p99_latency":
			hc.P99Latency, err = caddyargs.Duration(d)
		case "alert_at":
			hc.AlertAt, err = caddyargs.Share(d)
		case "window":
			hc.Window, err = caddyargs.Duration(d)
		case "min_requests":
			hc.MinRequests, err = caddyargs.PositiveInt(d)
		case "hold":
			hc.Hold, err = caddyargs.Duration(d)
		case "ramp_step":
			hc.RampStep, err = caddyargs.Share(d)
		case "ramp_interval":
			hc.RampInterval, err = caddyargs.Duration(d)
		case "max_degraded":
			hc.MaxDegraded, err = caddyargs.PositiveInt(d)
		default:
			err = caddyargs.UnknownOption(d, "health option", d.Val(), "alert_at", "error_rate", "hold", "max_degraded", "min_requests", "p99_latency", "ramp_interval", "ramp_step", "window")
		}
		if err != nil {
			return nil, err
		}
	}
	return hc, nil
}
