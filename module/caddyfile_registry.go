// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// unmarshalRegistry reads a registry block:
//
//	registry etcd {
//		endpoints    <url...>
//		prefix       <key>
//		username     <user>
//		password     <password>
//		dial_timeout <duration>
//	}
func unmarshalRegistry(d *caddyfile.Dispenser, rc *RegistryConfig) error {
	if !d.NextArg() {
		return d.Err("registry: want its kind, etcd")
	}
	if d.Val() != "etcd" {
		return d.Errf("registry %q: the registry is etcd", d.Val())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "endpoints":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			rc.Endpoints = append(rc.Endpoints, args...)
		case "prefix", "username", "password":
			name := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			v := d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
			switch name {
			case "prefix":
				if len(v) < 2 || v[0] != '/' {
					return d.Errf("registry prefix %q: want a key such as /hybrid-llm/prod", v)
				}
				rc.Prefix = v
			case "username":
				rc.Username = v
			default:
				rc.Password = v
			}
		case "dial_timeout":
			dur, err := parseDuration(d)
			if err != nil {
				return err
			}
			rc.DialTimeout = dur
		default:
			return d.Errf("unrecognized registry option '%s'", d.Val())
		}
	}
	if len(rc.Endpoints) == 0 {
		return d.Err("registry etcd: endpoints are required")
	}
	return nil
}
