// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/http"
	"slices"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// Clients makes every request name a known client (see package clients).
type Clients = clients.Config

// Client is one caller of the gateway.
type Client = clients.Client

// newCallers is the callers of gateway g, to be provisioned.
func newCallers(g *Gateway) *clients.Callers {
	return clients.NewCallers(g.Clients, clients.Setting{Gateway: g.Name, Share: g.fleetShare,
		Alias:        func(name string) bool { _, ok := g.in.Aliases[name]; return ok },
		RouteHeaders: routingHeaders(g.in.Aliases), Models: g.in.models.of, Logger: g.logger})
}

// routingHeaders returns the request headers the aliases' route rules
// read, in canonical form.
func routingHeaders(aliases map[string]*routing.Alias) []string {
	var names []string
	for _, name := range sortedKeys(aliases) {
		for _, r := range aliases[name].Routes {
			for h := range r.Header {
				if c := http.CanonicalHeaderKey(h); !slices.Contains(names, c) {
					names = append(names, c)
				}
			}
		}
	}
	return names
}
