// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
)

// unmarshalRegistry reads a registry block:
//
//	registry etcd {
//		endpoints    <url...>
//		prefix       <key>
//		username     <user>
//		password     <password>
//		dial_timeout <duration>
//		tls {
//			ca          <pem file>
//			cert        <pem file>
//			key         <pem file>
//			server_name <name>
//		}
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
		case "prefix":
			if err := caddyargs.OneArg(d, &rc.Prefix); err != nil {
				return err
			}
			if len(rc.Prefix) < 2 || rc.Prefix[0] != '/' {
				return d.Errf("registry prefix %q: want a key such as /hybrid-llm/prod", rc.Prefix)
			}
		case "username":
			if err := caddyargs.OneArg(d, &rc.Username); err != nil {
				return err
			}
		case "password":
			if err := caddyargs.OneArg(d, &rc.Password); err != nil {
				return err
			}
		case "tls":
			if d.NextArg() {
				return d.ArgErr()
			}
			rc.TLS = new(RegistryTLS)
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				var dst *string
				switch d.Val() {
				case "ca":
					dst = &rc.TLS.CA
				case "cert":
					dst = &rc.TLS.Cert
				case "key":
					dst = &rc.TLS.Key
				case "server_name":
					dst = &rc.TLS.ServerName
				default:
					return caddyargs.UnknownOption(d, "registry tls option", d.Val(), "ca", "cert", "key", "server_name")
				}
				if err := caddyargs.OneArg(d, dst); err != nil {
					return err
				}
			}
			if (rc.TLS.Cert == "") != (rc.TLS.Key == "") {
				return d.Err("registry tls: cert and key go together")
			}
		case "dial_timeout":
			dur, err := caddyargs.Duration(d)
			if err != nil {
				return err
			}
			rc.DialTimeout = dur
		default:
			return caddyargs.UnknownOption(d, "registry option", d.Val(), "dial_timeout", "endpoints", "password", "prefix", "tls", "username")
		}
	}
	if len(rc.Endpoints) == 0 {
		return d.Err("registry etcd: endpoints are required")
	}
	return nil
}
