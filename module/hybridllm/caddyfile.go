// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
	"github.com/hybridllm/caddy-hybrid-llm/module/core"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/tidwall/gjson"
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
//		paths         <endpoint...>   # default chat/completions completions embeddings responses messages messages/count_tokens
//
//		group <name> {
//			kind    vllm|openai|anthropic
//			api_key <key>
//			apis    <endpoint...>   # default: vllm all of paths' default, openai the OpenAI ones, anthropic messages and count_tokens
//			stream_usage on|off
//			translate exact|lossy|off   # Messages as chat completions to a group without messages; default exact
//			affinity {              # kind vllm: a conversation to the endpoint holding its prefix
//				max_load <factor>   # within factor × the mean load; default 1.25
//				session_header <name>   # a header naming the conversation (wins over the prefix)
//				session_field  <path>   # a body field naming it
//			}
//			classes {               # kind vllm: the red line shared by the clients' priority classes
//				standard <share>    # of each endpoint's red line; default 0.8 (interactive: all of it)
//				batch    <share>    # default 0.5
//				priority            # send vLLM's priority field (--scheduling-policy priority)
//				queue <size> [<wait>]   # sheddable clients' requests waiting for a slot; default 64 10s
//			}
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
//				input_per_million  <usd>     # openai, anthropic
//				cached_input_per_million <usd> # the prompt from the provider's cache
//				cache_write_per_million  <usd> # the prompt written to it
//				output_per_million <usd>     # openai, anthropic
//				per_second         <usd>     # openai, anthropic: instead of tokens
//			}
//
//			breaker {
//				allowed_fails <n>
//				window        <duration>
//				cooldown      <duration>
//				load_time     <duration>
//				uneject_on_probe on|off
//			}
//
//			# kind vllm: health-score scheduling of its endpoints
//			health { ... }           # as a weighted set's
//		}
//
//		cloud_spend {
//			daily_usd <usd>
//			warn_at   <share>   # default 0.8
//		}
//
//		clients {
//			keys      <name=key pairs>
//			keys_file <path>
//			identity  <placeholder>
//			client <name> [<key>] [{
//				key     <key>|sha256:<hex>
//				aliases <alias...>
//				rpm     <requests per minute>
//				tpm     <tokens per minute>
//				trusted
//				max_tokens <n> [clamp|refuse]
//				max_n      <n>
//				budget_day_usd   <usd>
//				budget_month_usd <usd>
//			}]
//		}
//
//		registry etcd {           # drains and weights shared by the fleet
//			endpoints    <url...>   # etcd's client URLs (comma or space separated)
//			prefix       <key>      # default /hybrid-llm/<name>
//			username     <user>
//			password     <password>
//			dial_timeout <duration> # default 5s
//			tls {                   # https:// endpoints
//				ca <pem file>
//				cert <pem file>
//				key <pem file>
//				server_name <name>
//			}
//		}
//
//		alias <name> {
//			response_model alias|upstream
//			target <group> <model> [{
//				timeout            <duration>|off   # default 10m
//				first_byte_timeout <duration>|off   # default 60s, streams
//				idle_timeout       <duration>|off   # default 60s, between reads of a started answer
//				retries            <n>
//				context_window     <tokens>
//				fallback_on        <statuses...>
//			}]
//			weighted [<name>] {    # targets served active-active by weight
//				strategy weighted|latency|cost   # lean within the weights
//				health {           # every member's health-score scheduling
//					error_rate    <share>      # default 5%
//					p99_latency   <duration>
//					alert_at      <share>      # default 80%
//					window        <duration>   # default 10s
//					min_requests  <n>          # default 20
//					hold          <duration>   # default 10s
//					ramp_step     <share>      # default 25%
//					ramp_interval <duration>   # default 2s
//					max_degraded  <n>          # default all but one
//				}
//				target <group> <model> [{
//					weight <n>                 # default 1
//					health { ... }             # this member's own
//					# and every target subdirective
//				}]
//			}
//			route <group> {
//				prompt_tokens_over <n>
//				max_tokens_over    <n>
//				header             <name> <value>
//				field              <name>
//			}
//			color <tag> <group> <model> [{   # requests with X-Route-Tag: <tag>
//				fallback        on|off          # default on
//				trusted_clients <name...>       # besides trusted clients
//				trusted_ranges  <cidr...>
//				# and every target subdirective
//			}]
//			tier <group> <model> [{          # a degraded tier, after the upper targets
//				quality    <share>
//				max_tokens <n>
//				formats    json_schema|json_object|tools...
//				# and every target subdirective
//			}]
//			degrade {                        # the degradation chain
//				cap         <share>|off      # default 20%
//				window      <duration>       # default 1m
//				at_cap      refuse|allow
//				mark_body   on|off
//				slo         <duration>       # the upper targets' p99 TTFT objective
//				slo_factor  <n>              # default 1.5
//				queue_depth <n>              # default 10
//				kv_cache    <share>|off      # default 85%
//				kv_window   <duration>       # default 5s
//				dwell       <duration>       # default 10s
//			}
//			mirror <group> <model> {         # a copy of a share of requests
//				ratio         <share>           # 10% or 0.1
//				max_in_flight <n>               # default 32
//				timeout       <duration>        # default 60s
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
		var err error
		switch d.Val() {
		case "name":
			err = caddyargs.OneArg(d, &g.Name)
		case "max_body_size":
			err = g.unmarshalMaxBodySize(d)
		case "deadline":
			if g.Deadline != 0 {
				return d.Err("deadline already specified")
			}
			g.Deadline, err = caddyargs.Duration(d)
		case "paths":
			err = g.unmarshalPaths(d)
		case "route_headers":
			if sawHeaders {
				return d.Err("route_headers already specified")
			}
			sawHeaders = true
			err = g.unmarshalRouteHeaders(d)
		case "stream_usage":
			err = g.unmarshalStreamUsage(d)
		case "pass_headers":
			err = g.unmarshalPassHeaders(d)
		case "response_model":
			if g.ResponseModel != "" {
				return d.Err("response_model already specified")
			}
			g.ResponseModel, err = parseResponseModel(d)
		case "group":
			err = g.unmarshalGroup(d, helper)
		case "cloud_spend":
			err = g.unmarshalCloudSpend(d)
		case "registry":
			if g.Registry != nil {
				return d.Err("registry already specified")
			}
			g.Registry = new(RegistryConfig)
			err = unmarshalRegistry(d, g.Registry)
		case "clients":
			if g.Clients != nil {
				return d.Err("clients already specified")
			}
			g.Clients = new(Clients)
			err = unmarshalClients(d, g.Clients)
		case "alias":
			err = g.unmarshalAlias(d)
		default:
			err = caddyargs.UnknownOption(d, "hybrid_llm subdirective", d.Val(), "alias", "clients", "cloud_spend", "deadline", "group", "max_body_size", "name", "pass_headers", "paths", "registry", "response_model", "route_headers", "stream_usage")
		}
		if err != nil {
			return err
		}
	}
	if len(g.Groups) == 0 {
		return d.Err("hybrid_llm needs at least one group")
	}
	if len(g.Aliases) == 0 {
		return d.Err("hybrid_llm needs at least one alias")
	}
	if err := g.checkNames(); err != nil {
		return err
	}
	if g.Clients != nil {
		for name, c := range g.Clients.Clients {
			for _, a := range c.Aliases {
				if _, ok := g.Aliases[a]; !ok {
					return d.Errf("client '%s': unknown alias '%s'", name, a)
				}
			}
		}
	}
	return nil
}

// unmarshalMaxBodySize parses the max_body_size subdirective.
func (g *Gateway) unmarshalMaxBodySize(d *caddyfile.Dispenser) error {
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
	return nil
}

// unmarshalPaths parses a paths subdirective; they add up.
func (g *Gateway) unmarshalPaths(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	if _, err := newInferencePaths(args); err != nil {
		return d.Err(err.Error())
	}
	g.Paths = append(g.Paths, args...)
	return nil
}

// unmarshalRouteHeaders parses the route_headers subdirective.
func (g *Gateway) unmarshalRouteHeaders(d *caddyfile.Dispenser) error {
	on, err := caddyargs.OnOff(d)
	if err != nil {
		return err
	}
	g.RouteHeaders = &on
	return nil
}

// unmarshalStreamUsage parses the stream_usage subdirective.
func (g *Gateway) unmarshalStreamUsage(d *caddyfile.Dispenser) error {
	on, err := caddyargs.OnOff(d)
	if err != nil {
		return err
	}
	g.StreamUsage = &on
	return nil
}

// unmarshalPassHeaders parses a pass_headers subdirective; they add up.
func (g *Gateway) unmarshalPassHeaders(d *caddyfile.Dispenser) error {
	names := d.RemainingArgs()
	if len(names) == 0 {
		return d.Err("pass_headers needs one or more header names (a trailing * for a prefix, * for all)")
	}
	if _, err := core.NewHeaderPass(names); err != nil {
		return d.Err(err.Error())
	}
	g.PassHeaders = append(g.PassHeaders, names...)
	return nil
}

// unmarshalGroup parses a group subdirective: its name and its block.
func (g *Gateway) unmarshalGroup(d *caddyfile.Dispenser, helper *httpcaddyfile.Helper) error {
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
	return nil
}

// unmarshalCloudSpend parses the cloud_spend subdirective and its block.
func (g *Gateway) unmarshalCloudSpend(d *caddyfile.Dispenser) error {
	if g.CloudSpend != nil {
		return d.Err("cloud_spend already specified")
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	g.CloudSpend = new(CloudSpend)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "daily_usd":
			g.CloudSpend.DailyUSD, err = caddyargs.USD(d)
		case "warn_at":
			g.CloudSpend.WarnAt, err = caddyargs.USD(d)
		default:
			err = caddyargs.UnknownOption(d, "cloud_spend option", d.Val(), "daily_usd", "warn_at")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unmarshalAlias parses an alias subdirective: its name and its block.
func (g *Gateway) unmarshalAlias(d *caddyfile.Dispenser) error {
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
		g.Aliases = make(map[string]*routing.Alias)
	}
	g.Aliases[name] = al
	return nil
}

// checkNames refuses, at the line that says it, a target naming a group
// that is not defined, a route to a group that is not among its alias's
// targets, and a vllm group with nothing to send to.
func (g *Gateway) checkNames() error {
	groups := strings.Join(sortedKeys(g.Groups), ", ")
	for _, name := range sortedKeys(g.Aliases) {
		al := g.Aliases[name]
		known := func(t *routing.Target, what string) error {
			if _, ok := g.Groups[t.Group]; !ok {
				return fmt.Errorf("alias '%s': %s refers to unknown group '%s' (the groups: %s), at %s", name, what, t.Group, groups, t.Pos)
			}
			return nil
		}
		targets := map[string]bool{}
		for _, t := range al.Targets {
			if err := known(t, "target"); err != nil {
				return err
			}
			targets[t.Group] = true
		}
		for _, c := range al.Colors {
			if err := known(&c.Target, "color"); err != nil {
				return err
			}
		}
		for _, m := range al.Mirrors {
			if err := known(&m.Target, "mirror"); err != nil {
				return err
			}
		}
		for _, r := range al.Routes {
			if !targets[r.Group] {
				return fmt.Errorf("alias '%s': route sends to group '%s', which is not among the alias's targets (%s), at %s",
					name, r.Group, strings.Join(sortedKeys(targets), ", "), r.Pos)
			}
		}
	}
	if g.Registry != nil {
		return nil // the registry may list a vllm group's endpoints
	}
	for _, name := range sortedKeys(g.Groups) {
		grp := g.Groups[name]
		if grp.Kind == KindVLLM && !gjson.GetBytes(grp.ProxyRaw, "upstreams").Exists() && !gjson.GetBytes(grp.ProxyRaw, "dynamic_upstreams").Exists() {
			return fmt.Errorf("group '%s' of kind vllm has no upstream: give its vLLM servers' addresses (proxy 10.0.0.5:8000 ...), at %s", name, grp.Run.Pos)
		}
	}
	return nil
}

// posOf is where the dispenser's token is, as Caddy's parse errors say it.
func posOf(d *caddyfile.Dispenser) string { return d.File() + ":" + strconv.Itoa(d.Line()) }

// Interface guards
var _ caddyfile.Unmarshaler = (*Gateway)(nil)

// parseResponseModel reads the one argument of response_model.
func parseResponseModel(d *caddyfile.Dispenser) (string, error) {
	var v string
	if !d.AllArgs(&v) {
		return "", d.Err("response_model needs one argument: alias or upstream")
	}
	if v != routing.ResponseModelAlias && v != routing.ResponseModelUpstream {
		return "", d.Errf("response_model must be 'alias' or 'upstream', got '%s'", v)
	}
	return v, nil
}
