// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"math"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// unmarshalGroup parses a group block; its syntax is in the doc of
// Gateway.UnmarshalCaddyfile.
func unmarshalGroup(d *caddyfile.Dispenser, helper *httpcaddyfile.Helper) (*Group, error) {
	grp := &Group{Run: upstream.GroupRun{Pos: posOf(d)}}
	var schemeless []string // the proxy's upstreams written without a scheme
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "kind":
			err = unmarshalGroupKind(d, grp)
		case "api_key":
			err = unmarshalGroupAPIKey(d, grp)
		case "apis":
			err = unmarshalGroupAPIs(d, grp)
		case "stream_usage":
			err = unmarshalGroupStreamUsage(d, grp)
		case "translate":
			err = unmarshalGroupTranslate(d, grp)
		case "max_num_seqs", "max_queue":
			err = unmarshalGroupLimit(d, grp)
		case "endpoint":
			err = unmarshalGroupEndpoint(d, grp)
		case "probe", "overflow", "cost", "health", "breaker", "affinity", "classes":
			err = unmarshalGroupBlock(d, grp)
		case "model_check":
			err = unmarshalGroupModelCheck(d, grp)
		case "proxy":
			schemeless, err = unmarshalGroupProxy(d, helper, grp)
		default:
			err = caddyargs.UnknownOption(d, "group subdirective", d.Val(), "api_key", "apis", "breaker", "cost", "endpoint", "health", "kind", "max_num_seqs", "max_queue", "model_check", "overflow", "probe", "proxy", "stream_usage", "translate", "affinity", "classes")
		}
		if err != nil {
			return nil, err
		}
	}
	if grp.Kind == "" {
		return nil, d.Errf("group needs a kind (%s, %s or %s)", KindVLLM, KindOpenAI, KindAnthropic)
	}
	if grp.Kind != KindVLLM && (grp.MaxNumSeqs != 0 || grp.MaxQueue != 0 || grp.Endpoints != nil || grp.Probe != nil || grp.Affinity != nil || grp.Classes != nil) {
		return nil, d.Errf("max_num_seqs, max_queue, endpoint, probe, affinity and classes apply to groups of kind %s only", KindVLLM)
	}
	if grp.Kind == KindVLLM && grp.ModelCheck != "" {
		return nil, d.Errf("model_check applies to cloud groups (kind %s or %s) only", KindOpenAI, KindAnthropic)
	}
	if grp.ProxyRaw == nil {
		return nil, d.Err("group needs a proxy")
	}
	if err := checkKeyInClear(d, grp, schemeless); err != nil {
		return nil, err
	}
	return grp, nil
}

// unmarshalGroupKind parses a group's kind subdirective.
func unmarshalGroupKind(d *caddyfile.Dispenser, grp *Group) error {
	if grp.Kind != "" {
		return d.Err("kind already specified")
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	switch d.Val() {
	case KindVLLM, KindOpenAI, KindAnthropic:
		grp.Kind = d.Val()
	default:
		return d.Errf("unknown group kind '%s' (want %s, %s or %s)", d.Val(), KindVLLM, KindOpenAI, KindAnthropic)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// unmarshalGroupAPIKey parses a group's api_key subdirective.
func unmarshalGroupAPIKey(d *caddyfile.Dispenser, grp *Group) error {
	if grp.APIKey != "" {
		return d.Err("api_key already specified")
	}
	if !d.NextArg() {
		// an unset {$VAR} leaves nothing behind it
		return d.Err("api_key needs a value: write api_key {env.CLOUD_API_KEY} to read the key from the environment at start-up " +
			"(an unset {$VAR} is replaced by nothing as the Caddyfile is read), or api_key \"\" to send no credentials")
	}
	grp.APIKey = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// unmarshalGroupAPIs parses a group's apis subdirective: the endpoints of
// the APIs its upstreams serve.
func unmarshalGroupAPIs(d *caddyfile.Dispenser, grp *Group) error {
	if grp.APIs != nil {
		return d.Err("apis already specified")
	}
	grp.APIs = d.RemainingArgs()
	if len(grp.APIs) == 0 {
		return d.Err("apis needs the endpoints the group serves, such as chat/completions messages")
	}
	return nil
}

// unmarshalGroupTranslate parses a group's translate subdirective.
func unmarshalGroupTranslate(d *caddyfile.Dispenser, grp *Group) error {
	if grp.Translate != "" {
		return d.Err("translate already specified")
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	switch d.Val() {
	case upstream.TranslateExact, upstream.TranslateLossy, upstream.TranslateOff:
	default:
		return d.Errf("translate must be 'exact', 'lossy' or 'off', got '%s'", d.Val())
	}
	grp.Translate = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// unmarshalGroupStreamUsage parses a group's stream_usage subdirective.
func unmarshalGroupStreamUsage(d *caddyfile.Dispenser, grp *Group) error {
	if grp.StreamUsage != nil {
		return d.Err("stream_usage already specified")
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	on := d.Val() == "on"
	if !on && d.Val() != "off" {
		return d.Errf("stream_usage must be 'on' or 'off', got '%s'", d.Val())
	}
	grp.StreamUsage = &on
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// unmarshalGroupLimit parses a group's max_num_seqs or max_queue
// subdirective.
func unmarshalGroupLimit(d *caddyfile.Dispenser, grp *Group) error {
	switch d.Val() {
	case "max_num_seqs":
		if grp.MaxNumSeqs != 0 {
			return d.Err("max_num_seqs already specified")
		}
		n, err := caddyargs.PositiveInt(d)
		if err != nil {
			return err
		}
		grp.MaxNumSeqs = n
	case "max_queue":
		if grp.MaxQueue != 0 {
			return d.Err("max_queue already specified")
		}
		n, err := caddyargs.NonNegativeInt(d)
		if err != nil {
			return err
		}
		grp.MaxQueue = n
	}
	return nil
}

// unmarshalGroupEndpoint parses a group's endpoint subdirective and its
// block.
func unmarshalGroupEndpoint(d *caddyfile.Dispenser, grp *Group) error {
	if !d.NextArg() {
		return d.Err("endpoint needs the upstream's address")
	}
	dial := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if _, dup := grp.Endpoints[dial]; dup {
		return d.Errf("endpoint '%s' already specified", dial)
	}
	ec := new(EndpointConfig)
	for en := d.Nesting(); d.NextBlock(en); {
		switch d.Val() {
		case "max_num_seqs":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return err
			}
			ec.MaxNumSeqs = n
		case "weight":
			if !d.NextArg() {
				return d.ArgErr()
			}
			w, err := strconv.ParseFloat(d.Val(), 64)
			if err != nil || w <= 0 || math.IsInf(w, 0) {
				return d.Errf("invalid weight '%s': want a positive number", d.Val())
			}
			ec.Weight = w
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return caddyargs.UnknownOption(d, "endpoint subdirective", d.Val(), "max_num_seqs", "weight")
		}
	}
	if grp.Endpoints == nil {
		grp.Endpoints = make(map[string]*EndpointConfig)
	}
	grp.Endpoints[dial] = ec
	return nil
}

// unmarshalGroupBlock parses one of a group's probe, overflow, cost,
// health and breaker subdirectives, each with a block of its own.
func unmarshalGroupBlock(d *caddyfile.Dispenser, grp *Group) error {
	var err error
	switch d.Val() {
	case "probe":
		if grp.Probe != nil {
			return d.Err("probe already specified")
		}
		grp.Probe, err = probe.UnmarshalCaddyfile(d)
	case "overflow":
		if grp.Overflow != nil {
			return d.Err("overflow already specified")
		}
		grp.Overflow, err = unmarshalOverflow(d)
	case "cost":
		if grp.Cost != nil {
			return d.Err("cost already specified")
		}
		grp.Cost, err = unmarshalCost(d)
	case "health":
		if grp.Health != nil {
			return d.Err("health already specified")
		}
		grp.Health, err = unmarshalHealth(d)
	case "breaker":
		if grp.Breaker != nil {
			return d.Err("breaker already specified")
		}
		grp.Breaker, err = unmarshalBreaker(d)
	case "affinity":
		if grp.Affinity != nil {
			return d.Err("affinity already specified")
		}
		grp.Affinity, err = upstream.UnmarshalAffinity(d)
	case "classes":
		if grp.Classes != nil {
			return d.Err("classes already specified")
		}
		grp.Classes, err = unmarshalClasses(d)
	}
	return err
}

// unmarshalClasses parses a vLLM group's classes block. Syntax:
//
//	classes {
//		standard <share>          # of each endpoint's red line; default 0.8
//		batch    <share>          # default 0.5
//		priority                  # send vLLM's priority field
//		queue    <size> [<wait>]  # sheddable requests waiting; default 64 10s
//	}
func unmarshalClasses(d *caddyfile.Dispenser) (*priority.Config, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	c := new(priority.Config)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "standard", "batch":
			opt := d.Val()
			v, err := caddyargs.PositiveFloat(d)
			if err != nil {
				return nil, err
			}
			if v > 1 {
				return nil, d.Errf("%s: a share of the red line is at most 1, got %v", opt, v)
			}
			if opt == "standard" {
				c.Standard = v
			} else {
				c.Batch = v
			}
		case "priority":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			c.Priority = true
		case "queue":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return nil, d.ArgErr()
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return nil, d.Errf("queue: the size must be a positive integer, got %q", args[0])
			}
			c.QueueSize = n
			if len(args) == 2 {
				w, err := caddy.ParseDuration(args[1])
				if err != nil || w <= 0 {
					return nil, d.Errf("queue: the wait must be a positive duration, got %q", args[1])
				}
				c.QueueWait = caddy.Duration(w)
			}
		default:
			return nil, caddyargs.UnknownOption(d, "classes option", d.Val(), "batch", "priority", "queue", "standard")
		}
	}
	if _, err := c.Resolve(); err != nil {
		return nil, d.Err(err.Error())
	}
	return c, nil
}

// unmarshalGroupModelCheck parses a group's model_check subdirective.
func unmarshalGroupModelCheck(d *caddyfile.Dispenser, grp *Group) error {
	if grp.ModelCheck != "" {
		return d.Err("model_check already specified")
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	if d.Val() == "off" {
		grp.ModelCheck = "off"
		if d.NextArg() {
			return d.ArgErr()
		}
		return nil
	}
	d.Prev()
	if _, err := caddyargs.Duration(d); err != nil {
		return err
	}
	grp.ModelCheck = d.Val() // as written: JSON takes the same words
	return nil
}

// unmarshalGroupProxy parses a group's proxy subdirective, a
// reverse_proxy block, and returns its upstreams written without a
// scheme.
func unmarshalGroupProxy(d *caddyfile.Dispenser, helper *httpcaddyfile.Helper, grp *Group) ([]string, error) {
	if grp.ProxyRaw != nil {
		return nil, d.Err("proxy already specified")
	}
	rp := new(reverseproxy.Handler)
	// the segment starts with "proxy", which the reverse_proxy
	// parser consumes as its directive name
	seg := d.NewFromNextSegment()
	schemeless, err := checkProxyUpstreams(seg)
	if err != nil {
		return nil, err
	}
	if err := rp.UnmarshalCaddyfile(seg); err != nil {
		return nil, err
	}
	if helper != nil {
		if err := rp.FinalizeUnmarshalCaddyfile(*helper); err != nil {
			return nil, err
		}
	}
	grp.ProxyRaw = caddyconfig.JSON(rp, nil)
	return schemeless, nil
}

// unmarshalOverflow parses an overflow block. Syntax:
//
//	overflow {
//		waiting        <trigger> <recover>
//		ttft_p99       <trigger duration> <recover duration>
//		kv_cache_usage <trigger 0..1> <recover 0..1>
//		inflight       <trigger> <recover>
//		dwell          <duration>
//	}
func unmarshalOverflow(d *caddyfile.Dispenser) (*OverflowConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	oc := new(OverflowConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		var dst **upstream.Threshold
		switch name {
		case "waiting":
			dst = &oc.Waiting
		case "ttft_p99":
			dst = &oc.TTFTP99
		case "kv_cache_usage":
			dst = &oc.KVCacheUsage
		case "inflight":
			dst = &oc.InFlight
		case "dwell":
			dur, err := caddyargs.Duration(d)
			if err != nil {
				return nil, err
			}
			oc.Dwell = dur
			continue
		default:
			return nil, caddyargs.UnknownOption(d, "overflow signal", name, "dwell", "inflight", "kv_cache_usage", "ttft_p99", "waiting")
		}
		var a, b string
		if !d.AllArgs(&a, &b) {
			return nil, d.Errf("%s needs a trigger and a recover level", name)
		}
		parse := func(v string) (float64, error) {
			if name == "ttft_p99" {
				dur, err := caddy.ParseDuration(v)
				return dur.Seconds(), err
			}
			return strconv.ParseFloat(v, 64)
		}
		trig, err1 := parse(a)
		rec, err2 := parse(b)
		if err1 != nil || err2 != nil {
			return nil, d.Errf("invalid %s levels '%s %s'", name, a, b)
		}
		if rec >= trig || trig <= 0 || rec < 0 {
			return nil, d.Errf("%s: the recover level (%s) must be below the trigger (%s), leaving a dead band", name, b, a)
		}
		*dst = &upstream.Threshold{Trigger: trig, Recover: rec}
	}
	if err := oc.Validate(); err != nil {
		return nil, d.Err(err.Error())
	}
	return oc, nil
}

// unmarshalCost parses a cost block. Syntax:
//
//	cost {
//		gpus               <n>
//		gpu_cost_per_month <usd>
//		input_per_million  <usd>
//		cached_input_per_million <usd>
//		cache_write_per_million  <usd>
//		output_per_million <usd>
//		per_second         <usd>
//	}
func unmarshalCost(d *caddyfile.Dispenser) (*CostConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	cc := new(CostConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *float64
		switch d.Val() {
		case "gpus":
			dst = &cc.GPUs
		case "gpu_cost_per_month":
			dst = &cc.GPUCostPerMonth
		case "input_per_million":
			dst = &cc.InputPerMillion
		case "cached_input_per_million":
			dst = &cc.CachedInputPerMillion
		case "cache_write_per_million":
			dst = &cc.CacheWritePerMillion
		case "output_per_million":
			dst = &cc.OutputPerMillion
		case "per_second":
			dst = &cc.PerSecond
		default:
			return nil, caddyargs.UnknownOption(d, "cost option", d.Val(), "cache_write_per_million", "cached_input_per_million", "gpu_cost_per_month", "gpus", "input_per_million", "output_per_million", "per_second")
		}
		v, err := caddyargs.USD(d)
		if err != nil {
			return nil, err
		}
		*dst = v
	}
	return cc, nil
}

// unmarshalBreaker parses a breaker block. Syntax:
//
//	breaker {
//		allowed_fails <n>
//		window        <duration>
//		cooldown      <duration>
//		load_time     <duration>
//		uneject_on_probe on|off
//	}
func unmarshalBreaker(d *caddyfile.Dispenser) (*routing.BreakerConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	bc := new(routing.BreakerConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "allowed_fails":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return nil, err
			}
			bc.AllowedFails = n
		case "window", "cooldown", "load_time":
			dst := map[string]*caddy.Duration{"window": &bc.Window, "cooldown": &bc.Cooldown, "load_time": &bc.LoadTime}[d.Val()]
			dur, err := caddyargs.Duration(d)
			if err != nil {
				return nil, err
			}
			*dst = dur
		case "uneject_on_probe":
			on, err := caddyargs.OnOff(d)
			if err != nil {
				return nil, err
			}
			bc.UnejectOnProbe = &on
		default:
			return nil, caddyargs.UnknownOption(d, "breaker option", d.Val(), "allowed_fails", "cooldown", "load_time", "uneject_on_probe", "window")
		}
	}
	return bc, nil
}
