// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
	"go.uber.org/zap"
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
	fleet   *atomic.Pointer[fleet.Share]
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

// callers are the clients in force and what puts them there: the
// config's clients and keys, the keys file and its watch.
type callers struct {
	cfg        *Clients
	gateway    string                       // the gateway's name, under which its clients' usage is kept
	keysFile   string                       // cfg.KeysFile, its placeholders replaced
	configured map[string]*Client           // cfg.Clients, with cfg.Keys
	set        atomic.Pointer[clientSet]    // in force
	share      *atomic.Pointer[fleet.Share] // with a registry: the gateway's place among the live gateways
	aliases    map[string]*Alias            // the aliases a client may be limited to
	// the request headers route rules read, which an untrusted client's
	// requests lose (see stripRouting)
	routeHeaders []string
	// the models list of the aliases a client may use
	models func(allows func(alias string) bool) []byte
	logger *zap.Logger
}

// newCallers is the callers of gateway g, to be provisioned.
func newCallers(g *Gateway) *callers {
	return &callers{cfg: g.Clients, gateway: g.Name, share: g.fleetShare, aliases: g.in.aliases,
		routeHeaders: routingHeaders(g.in.aliases), models: g.in.models.of, logger: g.logger}
}

// newSet provisions the clients of the config and of the keys file.
func (cr *callers) newSet(configured, fromFile map[string]*Client) (*clientSet, error) {
	cs := &clientSet{byKey: make(map[clients.KeyHash]*client), byName: make(map[string]*client)}
	repl := caddy.NewReplacer()
	identity := cr.cfg.Identity != ""
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
			pc.usage = usageOf(cr.gateway, name)
			pc.fleet = cr.share
		}
		if c.Aliases != nil {
			pc.aliases = make(map[string]bool, len(c.Aliases))
			for _, a := range c.Aliases {
				if _, ok := cr.aliases[a]; !ok {
					return fmt.Errorf("client %q%s: unknown alias %q", name, origin, a)
				}
				pc.aliases[a] = true
			}
			pc.models = cr.models(pc.allows)
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

// provision checks the config's clients and keys, puts them and the keys
// file's in force, and watches the keys file until the config stops.
func (cr *callers) provision(ctx context.Context) error {
	if id := cr.cfg.Identity; id != "" && !clients.IsPlaceholder(id) {
		// anything else is never empty, and would let every request in
		return fmt.Errorf("clients: identity must be one placeholder, such as {http.auth.user.id}, got %q", id)
	}
	// the config holds no usable key: keys come from placeholders, or
	// as their hashes (a keys file may hold keys)
	for _, name := range sortedKeys(cr.cfg.Clients) {
		if c := cr.cfg.Clients[name]; c != nil && c.Key != "" && !strings.HasPrefix(c.Key, "sha256:") && !clients.IsPlaceholder(c.Key) {
			return fmt.Errorf("clients: client %q: the key must be a placeholder such as {env.TEAM_A_KEY} or sha256:<hex>, so that the config holds no usable key", name)
		}
	}
	if k := cr.cfg.Keys; k != "" && !clients.IsPlaceholder(k) {
		return fmt.Errorf("clients: keys must be a placeholder such as {env.HYBRID_CLIENT_KEYS}, so that the config holds no usable key")
	}
	repl := caddy.NewReplacer()
	cr.keysFile = repl.ReplaceAll(cr.cfg.KeysFile, "")
	configured, err := clients.WithKeys(cr.cfg.Clients, repl.ReplaceAll(cr.cfg.Keys, ""))
	if err != nil {
		return fmt.Errorf("clients: keys: %v", err)
	}
	cr.configured = configured
	var fromFile map[string]*Client
	var stamp fileStamp
	if path := cr.keysFile; path != "" {
		var err error
		if stamp, err = stampOf(path); err != nil {
			return fmt.Errorf("clients: keys file: %v", err)
		}
		if fromFile, err = readKeysFile(path); err != nil {
			return fmt.Errorf("clients: keys file: %v", err)
		}
	}
	cs, err := cr.newSet(configured, fromFile)
	if err != nil {
		return fmt.Errorf("clients: %v", err)
	}
	if len(cs.byName) == 0 && cr.cfg.Identity == "" && cr.keysFile == "" {
		// a config validated without its secrets, or keys still to come
		cr.logger.Warn("no clients configured (keys, keys_file or client): every request is refused 401")
	}
	cr.set.Store(cs)
	if cr.keysFile != "" {
		cr.watchKeysFile(ctx, stamp)
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
func routingHeaders(aliases map[string]*Alias) []string {
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

// stripRouting removes an untrusted client's routing headers, so that
// neither the route rules nor the upstreams see them.
func (cr *callers) stripRouting(r *http.Request, cl *client) {
	if cl == nil || cl.trusted {
		return
	}
	for _, h := range cr.routeHeaders {
		if _, ok := r.Header[h]; ok {
			delete(r.Header, h)
			name := cl.name
			if !cl.known {
				name = "" // an identity's name: no config bounds it
			}
			routingHeadersRemoved.WithLabelValues(cr.gateway, name).Inc()
		}
	}
}
