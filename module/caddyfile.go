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
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/dustin/go-humanize"
)

// ParseCaddyfile sets up the handler from Caddyfile tokens. It is the
// setup function of the `hybrid_llm` directive.
func ParseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	g := new(Gateway)
	if err := g.unmarshal(h.Dispenser, &h); err != nil {
		return nil, err
	}
	return g, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	hybrid_llm {
//		name          <name>
//		max_body_size <size>
//		deadline      <duration>
//		route_headers on|off
//		stream_usage  on|off
//		pass_headers  <names...>
//		response_model alias|upstream
//
//		group <name> {
//			kind    vllm|openai
//			api_key <key>
//			stream_usage on|off
//			proxy   [<upstreams...>] {
//				# any reverse_proxy subdirective
//			}
//
//			# kind vllm
//			max_num_seqs <n>
//			max_queue    <n>
//			endpoint <address> {
//				max_num_seqs <n>
//				weight       <number>
//			}
//			probe {
//				health_interval  <duration>
//				metrics_interval <duration>
//				models_interval  <duration>
//				timeout          <duration>
//				stale_after      <duration>
//				unknown_metrics  saturated|ok
//				ttft_window      <duration>
//			}
//
//			overflow {
//				waiting        <trigger> <recover>
//				ttft_p99       <trigger> <recover>
//				kv_cache_usage <trigger> <recover>
//				inflight       <trigger> <recover>
//				dwell          <duration>
//			}
//
//			# kind openai
//			model_check <interval>|off
//
//			cost {
//				gpus               <n>       # vllm
//				gpu_cost_per_month <usd>     # vllm
//				input_per_million  <usd>     # openai
//				output_per_million <usd>     # openai
//				per_second         <usd>     # openai, instead of tokens
//			}
//
//			breaker {
//				allowed_fails <n>
//				window        <duration>
//				cooldown      <duration>
//				load_time     <duration>
//				uneject_on_probe on|off
//			}
//		}
//
//		alias <name> {
//			response_model alias|upstream
//			target <group> <model> [{
//				timeout            <duration>|off   # default 10m
//				first_byte_timeout <duration>|off   # default 60s, streams
//				retries            <n>
//				context_window     <tokens>
//				fallback_on        <statuses...>
//			}]
//			route <group> {
//				prompt_tokens_over <n>
//				max_tokens_over    <n>
//				header             <name> <value>
//				field              <name>
//			}
//		}
//	}
//
// Groups and aliases may repeat; every alias needs at least one target.
// `proxy` takes the whole grammar of the `reverse_proxy` directive.
func (g *Gateway) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return g.unmarshal(d, nil)
}

func (g *Gateway) unmarshal(d *caddyfile.Dispenser, helper *httpcaddyfile.Helper) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	var sawHeaders bool
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "name":
			if g.Name != "" {
				return d.Err("name already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			g.Name = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}

		case "max_body_size":
			if g.MaxBodySize != 0 {
				return d.Err("max_body_size already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			size, err := humanize.ParseBytes(d.Val())
			if err != nil || size == 0 || size > 1<<40 {
				return d.Errf("invalid max_body_size '%s': want a positive size such as 8MiB", d.Val())
			}
			g.MaxBodySize = int64(size)
			if d.NextArg() {
				return d.ArgErr()
			}

		case "deadline":
			if g.Deadline != 0 {
				return d.Err("deadline already specified")
			}
			dur, err := parseDuration(d)
			if err != nil {
				return err
			}
			g.Deadline = dur

		case "route_headers":
			if sawHeaders {
				return d.Err("route_headers already specified")
			}
			sawHeaders = true
			if !d.NextArg() {
				return d.ArgErr()
			}
			switch d.Val() {
			case "on":
			case "off":
				g.DisableRouteHeaders = true
			default:
				return d.Errf("route_headers must be 'on' or 'off', got '%s'", d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}

		case "stream_usage":
			if !d.NextArg() {
				return d.ArgErr()
			}
			switch d.Val() {
			case "on":
			case "off":
				g.DisableStreamUsage = true
			default:
				return d.Errf("stream_usage must be 'on' or 'off', got '%s'", d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}

		case "pass_headers":
			names := d.RemainingArgs()
			if len(names) == 0 {
				return d.Err("pass_headers needs one or more header names (a trailing * for a prefix, * for all)")
			}
			if _, err := newHeaderPass(names); err != nil {
				return d.Err(err.Error())
			}
			g.PassHeaders = append(g.PassHeaders, names...)

		case "response_model":
			if g.ResponseModel != "" {
				return d.Err("response_model already specified")
			}
			v, err := parseResponseModel(d)
			if err != nil {
				return err
			}
			g.ResponseModel = v

		case "group":
			if !d.NextArg() {
				return d.Err("group needs a name")
			}
			name := d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
			if _, dup := g.Groups[name]; dup {
				return d.Errf("group '%s' already defined", name)
			}
			grp, err := unmarshalGroup(d, helper)
			if err != nil {
				return err
			}
			if g.Groups == nil {
				g.Groups = make(map[string]*Group)
			}
			g.Groups[name] = grp

		case "alias":
			if !d.NextArg() {
				return d.Err("alias needs a name")
			}
			name := d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
			if _, dup := g.Aliases[name]; dup {
				return d.Errf("alias '%s' already defined", name)
			}
			al, err := unmarshalAlias(d)
			if err != nil {
				return err
			}
			if len(al.Targets) == 0 {
				return d.Errf("alias '%s' has no targets", name)
			}
			if g.Aliases == nil {
				g.Aliases = make(map[string]*Alias)
			}
			g.Aliases[name] = al

		default:
			return d.Errf("unrecognized hybrid_llm subdirective '%s'", d.Val())
		}
	}
	if len(g.Groups) == 0 {
		return d.Err("hybrid_llm needs at least one group")
	}
	if len(g.Aliases) == 0 {
		return d.Err("hybrid_llm needs at least one alias")
	}
	for name, al := range g.Aliases {
		for _, t := range al.Targets {
			if _, ok := g.Groups[t.Group]; !ok {
				return d.Errf("alias '%s': target refers to unknown group '%s'", name, t.Group)
			}
		}
	}
	return nil
}

func unmarshalGroup(d *caddyfile.Dispenser, helper *httpcaddyfile.Helper) (*Group, error) {
	grp := new(Group)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "kind":
			if grp.Kind != "" {
				return nil, d.Err("kind already specified")
			}
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			switch d.Val() {
			case KindVLLM, KindOpenAI:
				grp.Kind = d.Val()
			default:
				return nil, d.Errf("unknown group kind '%s' (want %s or %s)", d.Val(), KindVLLM, KindOpenAI)
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}

		case "api_key":
			if grp.APIKey != "" {
				return nil, d.Err("api_key already specified")
			}
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			grp.APIKey = d.Val()
			if d.NextArg() {
				return nil, d.ArgErr()
			}

		case "stream_usage":
			if grp.StreamUsage != nil {
				return nil, d.Err("stream_usage already specified")
			}
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			on := d.Val() == "on"
			if !on && d.Val() != "off" {
				return nil, d.Errf("stream_usage must be 'on' or 'off', got '%s'", d.Val())
			}
			grp.StreamUsage = &on
			if d.NextArg() {
				return nil, d.ArgErr()
			}

		case "max_num_seqs":
			if grp.MaxNumSeqs != 0 {
				return nil, d.Err("max_num_seqs already specified")
			}
			n, err := parsePositiveInt(d)
			if err != nil {
				return nil, err
			}
			grp.MaxNumSeqs = n

		case "max_queue":
			if grp.MaxQueue != 0 {
				return nil, d.Err("max_queue already specified")
			}
			n, err := parseNonNegativeInt(d)
			if err != nil {
				return nil, err
			}
			grp.MaxQueue = n

		case "endpoint":
			if !d.NextArg() {
				return nil, d.Err("endpoint needs the upstream's address")
			}
			dial := d.Val()
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			if _, dup := grp.Endpoints[dial]; dup {
				return nil, d.Errf("endpoint '%s' already specified", dial)
			}
			ec := new(EndpointConfig)
			for en := d.Nesting(); d.NextBlock(en); {
				switch d.Val() {
				case "max_num_seqs":
					n, err := parsePositiveInt(d)
					if err != nil {
						return nil, err
					}
					ec.MaxNumSeqs = n
				case "weight":
					if !d.NextArg() {
						return nil, d.ArgErr()
					}
					w, err := strconv.ParseFloat(d.Val(), 64)
					if err != nil || w <= 0 || math.IsInf(w, 0) {
						return nil, d.Errf("invalid weight '%s': want a positive number", d.Val())
					}
					ec.Weight = w
					if d.NextArg() {
						return nil, d.ArgErr()
					}
				default:
					return nil, d.Errf("unrecognized endpoint subdirective '%s'", d.Val())
				}
			}
			if grp.Endpoints == nil {
				grp.Endpoints = make(map[string]*EndpointConfig)
			}
			grp.Endpoints[dial] = ec

		case "probe":
			if grp.Probe != nil {
				return nil, d.Err("probe already specified")
			}
			pc, err := unmarshalProbe(d)
			if err != nil {
				return nil, err
			}
			grp.Probe = pc

		case "overflow":
			if grp.Overflow != nil {
				return nil, d.Err("overflow already specified")
			}
			oc, err := unmarshalOverflow(d)
			if err != nil {
				return nil, err
			}
			grp.Overflow = oc

		case "cost":
			if grp.Cost != nil {
				return nil, d.Err("cost already specified")
			}
			cc, err := unmarshalCost(d)
			if err != nil {
				return nil, err
			}
			grp.Cost = cc

		case "breaker":
			if grp.Breaker != nil {
				return nil, d.Err("breaker already specified")
			}
			bc, err := unmarshalBreaker(d)
			if err != nil {
				return nil, err
			}
			grp.Breaker = bc

		case "model_check":
			if grp.ModelCheckInterval != 0 || grp.DisableModelCheck {
				return nil, d.Err("model_check already specified")
			}
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			if d.Val() == "off" {
				grp.DisableModelCheck = true
				if d.NextArg() {
					return nil, d.ArgErr()
				}
				break
			}
			d.Prev()
			dur, err := parseDuration(d)
			if err != nil {
				return nil, err
			}
			grp.ModelCheckInterval = dur

		case "proxy":
			if grp.ProxyRaw != nil {
				return nil, d.Err("proxy already specified")
			}
			rp := new(reverseproxy.Handler)
			// the segment starts with "proxy", which the reverse_proxy
			// parser consumes as its directive name
			if err := rp.UnmarshalCaddyfile(d.NewFromNextSegment()); err != nil {
				return nil, err
			}
			if helper != nil {
				if err := rp.FinalizeUnmarshalCaddyfile(*helper); err != nil {
					return nil, err
				}
			}
			grp.ProxyRaw = caddyconfig.JSON(rp, nil)

		default:
			return nil, d.Errf("unrecognized group subdirective '%s'", d.Val())
		}
	}
	if grp.Kind == "" {
		return nil, d.Errf("group needs a kind (%s or %s)", KindVLLM, KindOpenAI)
	}
	if grp.Kind != KindVLLM && (grp.MaxNumSeqs != 0 || grp.MaxQueue != 0 || grp.Endpoints != nil || grp.Probe != nil) {
		return nil, d.Errf("max_num_seqs, max_queue, endpoint and probe apply to groups of kind %s only", KindVLLM)
	}
	if grp.Kind != KindOpenAI && (grp.ModelCheckInterval != 0 || grp.DisableModelCheck) {
		return nil, d.Errf("model_check applies to groups of kind %s only", KindOpenAI)
	}
	if grp.ProxyRaw == nil {
		return nil, d.Err("group needs a proxy")
	}
	return grp, nil
}

func unmarshalAlias(d *caddyfile.Dispenser) (*Alias, error) {
	al := new(Alias)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "target":
			t := new(Target)
			if !d.Args(&t.Group, &t.Model) {
				return nil, d.Err("target needs a group and a model name: target <group> <model>")
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			for tn := d.Nesting(); d.NextBlock(tn); {
				switch d.Val() {
				case "timeout":
					if t.Timeout != nil {
						return nil, d.Err("timeout already specified")
					}
					dur, err := parseLimit(d)
					if err != nil {
						return nil, err
					}
					t.Timeout = dur
				case "first_byte_timeout":
					if t.FirstByteTimeout != nil {
						return nil, d.Err("first_byte_timeout already specified")
					}
					dur, err := parseLimit(d)
					if err != nil {
						return nil, err
					}
					t.FirstByteTimeout = dur
				case "retries":
					n, err := parseNonNegativeInt(d)
					if err != nil {
						return nil, err
					}
					t.Retries = &n
				case "context_window":
					n, err := parsePositiveInt(d)
					if err != nil {
						return nil, err
					}
					t.ContextWindow = n
				case "fallback_on":
					if t.FallbackOn != nil {
						return nil, d.Err("fallback_on already specified")
					}
					codes, err := parseFallbackOn(d)
					if err != nil {
						return nil, err
					}
					t.FallbackOn = codes
				default:
					return nil, d.Errf("unrecognized target subdirective '%s'", d.Val())
				}
			}
			al.Targets = append(al.Targets, t)
		case "response_model":
			if al.ResponseModel != "" {
				return nil, d.Err("response_model already specified")
			}
			v, err := parseResponseModel(d)
			if err != nil {
				return nil, err
			}
			al.ResponseModel = v
		case "route":
			r, err := unmarshalRule(d)
			if err != nil {
				return nil, err
			}
			al.Routes = append(al.Routes, r)
		default:
			return nil, d.Errf("unrecognized alias subdirective '%s'", d.Val())
		}
	}
	return al, nil
}

// unmarshalRule parses a pre-routing rule. Syntax:
//
//	route <group> {
//		prompt_tokens_over <n>
//		max_tokens_over    <n>
//		header             <name> <value>
//		field              <name>
//	}
func unmarshalRule(d *caddyfile.Dispenser) (*Rule, error) {
	r := new(Rule)
	if !d.Args(&r.Target) {
		return nil, d.Err("route needs the group of the target to send matching requests to")
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "prompt_tokens_over":
			n, err := parsePositiveInt(d)
			if err != nil {
				return nil, err
			}
			r.PromptTokensOver = n
		case "max_tokens_over":
			n, err := parsePositiveInt(d)
			if err != nil {
				return nil, err
			}
			r.MaxTokensOver = n
		case "header":
			var name, value string
			if !d.AllArgs(&name, &value) {
				return nil, d.Err("header needs a name and a value")
			}
			if r.Header == nil {
				r.Header = make(map[string]string)
			}
			r.Header[name] = value
		case "field":
			var name string
			if !d.AllArgs(&name) {
				return nil, d.Err("field needs one top-level JSON field name")
			}
			r.Fields = append(r.Fields, name)
		default:
			return nil, d.Errf("unrecognized route condition '%s'", d.Val())
		}
	}
	if r.PromptTokensOver == 0 && r.MaxTokensOver == 0 && len(r.Header) == 0 && len(r.Fields) == 0 {
		return nil, d.Errf("route %s has no condition", r.Target)
	}
	return r, nil
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
		var dst **Threshold
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
			dur, err := parseDuration(d)
			if err != nil {
				return nil, err
			}
			oc.Dwell = dur
			continue
		default:
			return nil, d.Errf("unrecognized overflow signal '%s'", name)
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
		*dst = &Threshold{Trigger: trig, Recover: rec}
	}
	if err := oc.validate(); err != nil {
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
		case "output_per_million":
			dst = &cc.OutputPerMillion
		case "per_second":
			dst = &cc.PerSecond
		default:
			return nil, d.Errf("unrecognized cost option '%s'", d.Val())
		}
		name := d.Val()
		if !d.NextArg() {
			return nil, d.ArgErr()
		}
		v, err := strconv.ParseFloat(d.Val(), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) {
			return nil, d.Errf("invalid %s '%s': want a non-negative number", name, d.Val())
		}
		*dst = v
		if d.NextArg() {
			return nil, d.ArgErr()
		}
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
func unmarshalBreaker(d *caddyfile.Dispenser) (*BreakerConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	bc := new(BreakerConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "allowed_fails":
			n, err := parsePositiveInt(d)
			if err != nil {
				return nil, err
			}
			bc.AllowedFails = n
		case "window", "cooldown", "load_time":
			dst := map[string]*caddy.Duration{"window": &bc.Window, "cooldown": &bc.Cooldown, "load_time": &bc.LoadTime}[d.Val()]
			dur, err := parseDuration(d)
			if err != nil {
				return nil, err
			}
			*dst = dur
		case "uneject_on_probe":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			var on bool
			switch d.Val() {
			case "on":
				on = true
			case "off":
			default:
				return nil, d.Errf("uneject_on_probe must be 'on' or 'off', got '%s'", d.Val())
			}
			bc.UnejectOnProbe = &on
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		default:
			return nil, d.Errf("unrecognized breaker option '%s'", d.Val())
		}
	}
	return bc, nil
}

// parseResponseModel reads the one argument of response_model.
func parseResponseModel(d *caddyfile.Dispenser) (string, error) {
	var v string
	if !d.AllArgs(&v) {
		return "", d.Err("response_model needs one argument: alias or upstream")
	}
	if v != responseModelAlias && v != responseModelUpstream {
		return "", d.Errf("response_model must be 'alias' or 'upstream', got '%s'", v)
	}
	return v, nil
}

// parseDuration reads exactly one positive duration argument.
// parseFallbackOn parses the statuses of fallback_on: each a 4xx or 5xx
// status, or `4xx` or `5xx` for a whole class (stored as 4 or 5, as
// Caddy's status matchers do).
func parseFallbackOn(d *caddyfile.Dispenser) ([]int, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.Err("fallback_on needs at least one status, e.g. fallback_on 429 5xx")
	}
	codes := make([]int, 0, len(args))
	for _, a := range args {
		var c int
		switch a {
		case "4xx":
			c = 4
		case "5xx":
			c = 5
		default:
			n, err := strconv.Atoi(a)
			if err != nil || n < 400 || n > 599 {
				return nil, d.Errf("invalid fallback_on status '%s': want a 4xx or 5xx status, or 4xx or 5xx", a)
			}
			c = n
		}
		codes = append(codes, c)
	}
	return codes, nil
}

func parseDuration(d *caddyfile.Dispenser) (caddy.Duration, error) {
	name := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	dur, err := caddy.ParseDuration(d.Val())
	if err != nil || dur <= 0 {
		return 0, d.Errf("invalid %s '%s': want a positive duration such as 30s", name, d.Val())
	}
	if d.NextArg() {
		return 0, d.ArgErr()
	}
	return caddy.Duration(dur), nil
}

// parseLimit parses a time limit that may be turned off: a positive
// duration, or 0 or off for none.
func parseLimit(d *caddyfile.Dispenser) (*caddy.Duration, error) {
	name := d.Val()
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	var dur caddy.Duration
	if v := d.Val(); v != "off" && v != "0" {
		parsed, err := caddy.ParseDuration(v)
		if err != nil || parsed <= 0 {
			return nil, d.Errf("invalid %s '%s': want a positive duration such as 30s, or off", name, v)
		}
		dur = caddy.Duration(parsed)
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	return &dur, nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Gateway)(nil)
