// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// unmarshalAlias parses an alias block; its syntax is in the doc of
// Gateway.UnmarshalCaddyfile.
func unmarshalAlias(d *caddyfile.Dispenser) (*Alias, error) {
	al := new(Alias)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "target":
			t, err := unmarshalTarget(d, false)
			if err != nil {
				return nil, err
			}
			al.Targets = append(al.Targets, t)
		case "weighted":
			// weighted [<name>] { [health {...}] target ... { weight <n> } ... }
			name := "set" + strconv.Itoa(len(al.Targets))
			if d.NextArg() {
				name = d.Val()
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			n := 0
			var setHealth *HealthConfig
			for sn := d.Nesting(); d.NextBlock(sn); {
				if d.Val() == "health" {
					if setHealth != nil {
						return nil, d.Err("health already specified")
					}
					hc, err := unmarshalHealth(d)
					if err != nil {
						return nil, err
					}
					setHealth = hc
					continue
				}
				if d.Val() != "target" {
					return nil, d.Errf("a weighted set holds targets and a health block only, got '%s'", d.Val())
				}
				t, err := unmarshalTarget(d, true)
				if err != nil {
					return nil, err
				}
				t.Set = name
				al.Targets = append(al.Targets, t)
				n++
			}
			if n == 0 {
				return nil, d.Errf("weighted set '%s' has no targets", name)
			}
			if setHealth != nil {
				// a member's own block keeps the set's values it leaves unset
				for _, t := range al.Targets[len(al.Targets)-n:] {
					t.Health = setHealth.under(t.Health)
				}
			}
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

// unmarshalTarget parses `target <group> <model> [{ ... }]`; weight is
// allowed in a weighted set.
func unmarshalTarget(d *caddyfile.Dispenser, inSet bool) (*Target, error) {
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
		case "weight":
			if !inSet {
				return nil, d.Err("weight belongs to a target in a weighted set")
			}
			n, err := parseNonNegativeInt(d)
			if err != nil {
				return nil, err
			}
			t.Weight = &n
		case "health":
			if !inSet {
				return nil, d.Err("health belongs to a target in a weighted set")
			}
			if t.Health != nil {
				return nil, d.Err("health already specified")
			}
			hc, err := unmarshalHealth(d)
			if err != nil {
				return nil, err
			}
			t.Health = hc
		default:
			return nil, d.Errf("unrecognized target subdirective '%s'", d.Val())
		}
	}
	return t, nil
}
