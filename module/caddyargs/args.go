// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package caddyargs

import (
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Duration reads exactly one positive duration argument.
func Duration(d *caddyfile.Dispenser) (caddy.Duration, error) {
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

// Limit parses a time limit that may be turned off: a positive
// duration, or 0 or off for none.
func Limit(d *caddyfile.Dispenser) (*caddy.Duration, error) {
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

// PositiveInt reads exactly one integer argument > 0.
func PositiveInt(d *caddyfile.Dispenser) (int, error) {
	return intArg(d, 1, "a positive integer")
}

// NonNegativeInt reads exactly one integer argument >= 0.
func NonNegativeInt(d *caddyfile.Dispenser) (int, error) {
	return intArg(d, 0, "a non-negative integer")
}

// intArg reads exactly one integer argument of at least least.
func intArg(d *caddyfile.Dispenser, least int, want string) (int, error) {
	name := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < least {
		return 0, d.Errf("invalid %s '%s': want %s", name, d.Val(), want)
	}
	if d.NextArg() {
		return 0, d.ArgErr()
	}
	return n, nil
}

// OneArg sets *dst to the directive's one argument; the directive
// may appear once.
func OneArg(d *caddyfile.Dispenser, dst *string) error {
	if *dst != "" {
		return d.Errf("%s already specified", d.Val())
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// USD reads exactly one non-negative number argument.
func USD(d *caddyfile.Dispenser) (float64, error) {
	name := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	v, err := strconv.ParseFloat(d.Val(), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, d.Errf("invalid %s '%s': want a non-negative number", name, d.Val())
	}
	if d.NextArg() {
		return 0, d.ArgErr()
	}
	return v, nil
}

// PositiveIntThen reads an integer argument > 0 that may be followed
// by more arguments.
func PositiveIntThen(d *caddyfile.Dispenser) (int, error) {
	name := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return 0, d.Errf("invalid %s '%s': want a positive integer", name, d.Val())
	}
	return n, nil
}

// Share reads exactly one share from 0 to 1, as a fraction (0.05)
// or a percentage (5%).
func Share(d *caddyfile.Dispenser) (float64, error) {
	name := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	v, ok := share(d.Val())
	if !ok {
		return 0, d.Errf("invalid %s '%s': want a share from 0 to 1 (0.05) or a percentage (5%%)", name, d.Val())
	}
	if d.NextArg() {
		return 0, d.ArgErr()
	}
	return v, nil
}

// share reads a share from 0 to 1: 0.05 or 5%.
func share(s string) (float64, bool) {
	s, pct := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(s, 64)
	if pct {
		v /= 100
	}
	return v, err == nil && !math.IsNaN(v) && v >= 0 && v <= 1
}

// OnOff reads exactly one `on` or `off`.
func OnOff(d *caddyfile.Dispenser) (bool, error) {
	name := d.Val()
	if !d.NextArg() {
		return false, d.ArgErr()
	}
	on := d.Val() == "on"
	if !on && d.Val() != "off" {
		return false, d.Errf("%s must be 'on' or 'off', got '%s'", name, d.Val())
	}
	if d.NextArg() {
		return false, d.ArgErr()
	}
	return on, nil
}

// ShareOr reads exactly one share (as Share), or the word word,
// which stands for the value it returns.
func ShareOr(d *caddyfile.Dispenser, word string, value float64) (float64, error) {
	if d.CountRemainingArgs() == 1 {
		name := d.Val()
		d.NextArg()
		if d.Val() == word {
			return value, nil
		}
		v, ok := share(d.Val())
		if !ok {
			return 0, d.Errf("invalid %s '%s': want a share from 0 to 1 (0.05), a percentage (5%%) or %s", name, d.Val(), word)
		}
		return v, nil
	}
	return Share(d)
}

// PositiveFloat reads exactly one positive number.
func PositiveFloat(d *caddyfile.Dispenser) (float64, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, d.Errf("invalid %s '%s': want a positive number", name, s)
	}
	return v, nil
}
