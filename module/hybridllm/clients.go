// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
)

// Clients makes every request name a known client (see package clients).
type Clients = clients.Config

// Client is one caller of the gateway.
type Client = clients.Client

// client is a provisioned Client.
type client struct {
	name     string
	known    bool            // configured (not a name only an identity gave)
	aliases  map[string]bool // nil: every alias
	models   []byte          // its GET /v1/models answer, when aliases is set
	rpm, tpm int
	usage    *clientUsage // set when it has limits
	// with a registry: the gateway's place in the fleet, which divides
	// rpm and tpm
	fleet   *atomic.Pointer[fleetShare]
	trusted bool

	ceilings clients.Ceilings

	budgetDay, budgetMonth float64
}

// allows reports whether the client may use an alias.
func (c *client) allows(alias string) bool {
	return c == nil || c.aliases == nil || c.aliases[alias]
}

// clientSet is the clients in force: the config's and the keys file's.
type clientSet struct {
	byKey  map[clients.KeyHash]*client
	byName map[string]*client
}

// newClientSet provisions the clients of the config and of the keys file.
func (g *Gateway) newClientSet(configured, fromFile map[string]*Client) (*clientSet, error) {
	cs := &clientSet{byKey: make(map[clients.KeyHash]*client), byName: make(map[string]*client)}
	repl := caddy.NewReplacer()
	identity := g.Clients.Identity != ""
	add := func(name string, c *Client, origin string) error {
		if c == nil {
			return fmt.Errorf("client %q%s: empty", name, origin)
		}
		if err := clients.ValidName(name); err != nil {
			return fmt.Errorf("client %q%s: %v", name, origin, err)
		}
		if _, dup := cs.byName[name]; dup {
			return fmt.Errorf("client %q%s: already defined", name, origin)
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("client %q%s: %v", name, origin, err)
		}
		pc := &client{name: name, known: true, rpm: c.RPM, tpm: c.TPM, trusted: c.Trusted, ceilings: c.Ceilings(),
			budgetDay: c.BudgetDayUSD, budgetMonth: c.BudgetMonthUSD}
		if c.RPM > 0 || c.TPM > 0 {
			pc.usage = usageOf(g.Name, name)
			if g.Registry != nil {
				pc.fleet = g.fleetShare
			}
		}
		if c.Aliases != nil {
			pc.aliases = make(map[string]bool, len(c.Aliases))
			for _, a := range c.Aliases {
				if _, ok := g.aliases[a]; !ok {
					return fmt.Errorf("client %q%s: unknown alias %q", name, origin, a)
				}
				pc.aliases[a] = true
			}
			pc.models = g.buildModelsListOf(pc.allows)
		}
		switch {
		case c.Key == "" && !identity:
			return fmt.Errorf("client %q%s: no key", name, origin)
		case c.Key != "" && identity:
			return fmt.Errorf("client %q%s: a key, but clients are named by identity", name, origin)
		case c.Key != "":
			h, err := clients.ParseKey(repl, c.Key)
			if err != nil {
				return fmt.Errorf("client %q%s: %v", name, origin, err)
			}
			if other, dup := cs.byKey[h]; dup {
				return fmt.Errorf("client %q%s: the same key as client %q", name, origin, other.name)
			}
			cs.byKey[h] = pc
		}
		cs.byName[name] = pc
		return nil
	}
	for _, name := range sortedKeys(configured) {
		if err := add(name, configured[name], ""); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(fromFile) {
		if err := add(name, fromFile[name], " (keys file)"); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// provisionClients puts the clients of the config and of the keys file in
// force, and watches the keys file for changes.
func (g *Gateway) provisionClients(ctx caddy.Context) error {
	if id := g.Clients.Identity; id != "" && !clients.IsPlaceholder(id) {
		// anything else is never empty, and would let every request in
		return fmt.Errorf("clients: identity must be one placeholder, such as {http.auth.user.id}, got %q", id)
	}
	// the config holds no usable key: keys come from placeholders, or
	// as their hashes (a keys file may hold keys)
	for _, name := range sortedKeys(g.Clients.Clients) {
		if c := g.Clients.Clients[name]; c != nil && c.Key != "" && !strings.HasPrefix(c.Key, "sha256:") && !clients.IsPlaceholder(c.Key) {
			return fmt.Errorf("clients: client %q: the key must be a placeholder such as {env.TEAM_A_KEY} or sha256:<hex>, so that the config holds no usable key", name)
		}
	}
	if k := g.Clients.Keys; k != "" && !clients.IsPlaceholder(k) {
		return fmt.Errorf("clients: keys must be a placeholder such as {env.HYBRID_CLIENT_KEYS}, so that the config holds no usable key")
	}
	repl := caddy.NewReplacer()
	g.keysFile = repl.ReplaceAll(g.Clients.KeysFile, "")
	configured, err := clients.WithKeys(g.Clients.Clients, repl.ReplaceAll(g.Clients.Keys, ""))
	if err != nil {
		return fmt.Errorf("clients: keys: %v", err)
	}
	g.configured = configured
	var fromFile map[string]*Client
	var stamp fileStamp
	if path := g.keysFile; path != "" {
		var err error
		if stamp, err = stampOf(path); err != nil {
			return fmt.Errorf("clients: keys file: %v", err)
		}
		if fromFile, err = readKeysFile(path); err != nil {
			return fmt.Errorf("clients: keys file: %v", err)
		}
	}
	cs, err := g.newClientSet(configured, fromFile)
	if err != nil {
		return fmt.Errorf("clients: %v", err)
	}
	if len(cs.byName) == 0 && g.Clients.Identity == "" && g.keysFile == "" {
		// a config validated without its secrets, or keys still to come
		g.logger.Warn("no clients configured (keys, keys_file or client): every request is refused 401")
	}
	g.clientSet = new(atomic.Pointer[clientSet])
	g.clientSet.Store(cs)
	if g.keysFile != "" {
		g.watchKeysFile(ctx, stamp)
	}
	return nil
}

// names lists the clients in force by name.
func (cs *clientSet) names() []string {
	names := make([]string, 0, len(cs.byName))
	for n := range cs.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// routingHeaders returns the request headers the aliases' route rules
// read, in canonical form.
func (g *Gateway) routingHeaders() []string {
	var names []string
	for _, name := range sortedKeys(g.aliases) {
		for _, r := range g.aliases[name].Routes {
			for h := range r.Header {
				if c := http.CanonicalHeaderKey(h); !slices.Contains(names, c) {
					names = append(names, c)
				}
			}
		}
	}
	return names
}

// stripRouting removes an untrusted client's routing headers, so that
// neither the route rules nor the upstreams see them.
func (g *Gateway) stripRouting(r *http.Request, cl *client) {
	if cl == nil || cl.trusted {
		return
	}
	for _, h := range g.routeHeaders {
		if _, ok := r.Header[h]; ok {
			delete(r.Header, h)
			name := cl.name
			if !cl.known {
				name = "" // an identity's name: no config bounds it
			}
			routingHeadersRemoved.WithLabelValues(g.Name, name).Inc()
		}
	}
}
