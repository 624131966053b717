// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
)

// unmarshalClients parses a clients block:
//
//	clients {
//		keys      <name=key pairs>   # e.g. {env.HYBRID_CLIENT_KEYS}
//		keys_file <path>
//		identity  <placeholder>
//		reserve_tokens <n>           # what a request without max_tokens reserves
//		client <name> [<key>] [{
//			key     <key>|sha256:<hex>
//			aliases <alias...>
//			rpm     <requests per minute>
//			tpm     <tokens per minute>
//			trusted                  # its routing headers count
//			max_tokens <n> [clamp|refuse]
//			max_n      <n>
//			budget_day_usd   <usd>
//			budget_month_usd <usd>
//			class   interactive|standard|batch
//			sheddable                # waits for self-hosted, never the cloud
//		}]
//	}
func unmarshalClients(d *caddyfile.Dispenser, cs *Clients) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "keys":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			cs.Keys = strings.TrimSpace(cs.Keys + " " + strings.Join(args, " "))
		case "keys_file":
			if err := caddyargs.OneArg(d, &cs.KeysFile); err != nil {
				return err
			}
		case "identity":
			if err := caddyargs.OneArg(d, &cs.Identity); err != nil {
				return err
			}
		case "reserve_tokens":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return err
			}
			cs.ReserveTokens = n
		case "client":
			if !d.NextArg() {
				return d.Err("client needs a name")
			}
			name := d.Val()
			if _, dup := cs.Clients[name]; dup {
				return d.Errf("client '%s' already defined", name)
			}
			c := new(Client)
			if d.NextArg() {
				c.Key = d.Val()
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			if err := unmarshalClient(d, c); err != nil {
				return err
			}
			if cs.Clients == nil {
				cs.Clients = make(map[string]*Client)
			}
			cs.Clients[name] = c
		default:
			return caddyargs.UnknownOption(d, "clients subdirective", d.Val(), "client", "identity", "keys", "keys_file", "reserve_tokens")
		}
	}
	if cs.Identity != "" {
		for name, c := range cs.Clients {
			if c.Key != "" {
				return d.Errf("client '%s': a key, but clients are named by identity", name)
			}
		}
	}
	return nil
}

func unmarshalClient(d *caddyfile.Dispenser, c *Client) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "key":
			if err := caddyargs.OneArg(d, &c.Key); err != nil {
				return err
			}
		case "max_tokens":
			n, err := caddyargs.PositiveIntThen(d)
			if err != nil {
				return err
			}
			c.MaxTokens = n
			if d.NextArg() {
				c.MaxTokensMode = d.Val()
				if c.MaxTokensMode != clients.Clamp && c.MaxTokensMode != clients.Refuse {
					return d.Errf("max_tokens: want clamp or refuse, got '%s'", c.MaxTokensMode)
				}
				if d.NextArg() {
					return d.ArgErr()
				}
			}
		case "max_n":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return err
			}
			c.MaxN = n
		case "budget_day_usd":
			v, err := caddyargs.USD(d)
			if err != nil {
				return err
			}
			c.BudgetDayUSD = v
		case "budget_month_usd":
			v, err := caddyargs.USD(d)
			if err != nil {
				return err
			}
			c.BudgetMonthUSD = v
		case "trusted":
			if d.NextArg() {
				return d.ArgErr()
			}
			c.Trusted = true
		case "sheddable":
			if d.NextArg() {
				return d.ArgErr()
			}
			c.Sheddable = true
		case "class":
			if err := caddyargs.OneArg(d, &c.Class); err != nil {
				return err
			}
			if _, err := priority.Parse(c.Class); err != nil {
				return d.Err(err.Error())
			}
		case "rpm":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return err
			}
			c.RPM = n
		case "tpm":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return err
			}
			c.TPM = n
		case "aliases":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			c.Aliases = append(c.Aliases, args...)
		default:
			return caddyargs.UnknownOption(d, "client subdirective", d.Val(), "aliases", "budget_day_usd", "budget_month_usd", "class", "key", "max_n", "max_tokens", "rpm", "sheddable", "tpm", "trusted")
		}
	}
	return nil
}
