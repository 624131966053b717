// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"go.uber.org/zap"
)

// Caller is a provisioned Client: one caller in force. It is read-only
// once in force.
type Caller struct {
	Name     string
	Known    bool            // configured (not a name only an identity gave)
	Trusted  bool            // may set routing headers and colors
	Aliases  map[string]bool // nil: every alias
	Models   []byte          // its GET /v1/models answer, when Aliases is set
	RPM, TPM int             // as configured (see Limits)
	Usage    *Usage          // set when it has limits
	Ceilings Ceilings

	BudgetDay, BudgetMonth float64

	Class     priority.Class // its requests' class, unless it is trusted and a request names one
	Sheddable bool           // its requests wait for self-hosted rather than go to a cloud

	// with a registry: the gateway's place in the fleet, which divides
	// RPM and TPM
	fleet *atomic.Pointer[fleet.Share]
}

// Allows reports whether the client may use an alias. A nil Caller (no
// clients configured) may use every alias.
func (c *Caller) Allows(alias string) bool {
	return c == nil || c.Aliases == nil || c.Aliases[alias]
}

// Set is the clients in force: the config's and the keys file's.
type Set struct {
	byKey  map[KeyHash]*Caller
	byName map[string]*Caller
}

// Names lists the clients in force by name.
func (cs *Set) Names() []string { return slices.Sorted(maps.Keys(cs.byName)) }

// Named is the client of a name, or nil.
func (cs *Set) Named(name string) *Caller { return cs.byName[name] }

// Setting is what the clients of a gateway are put in force with, besides
// their config.
type Setting struct {
	// The gateway's name, under which its clients' usage is kept.
	Gateway string
	// With a registry: the gateway's place among the live gateways.
	Share *atomic.Pointer[fleet.Share]
	// Reports whether an alias exists: a client may be limited to those.
	Alias func(name string) bool
	// The request headers route rules read, which an untrusted client's
	// requests lose (see StripRouting).
	RouteHeaders []string
	// The models list of the aliases a client may use.
	Models func(allows func(alias string) bool) []byte
	Logger *zap.Logger
}

// Callers are the clients in force and what puts them there: the
// config's clients and keys, the keys file and its watch.
type Callers struct {
	cfg        *Config
	s          Setting
	keysFile   string             // cfg.KeysFile, its placeholders replaced
	configured map[string]*Client // cfg.Clients, with cfg.Keys
	set        atomic.Pointer[Set]
}

// NewCallers is the callers of a config, to be provisioned.
func NewCallers(cfg *Config, s Setting) *Callers {
	return &Callers{cfg: cfg, s: s}
}

// InForce is the clients in force.
func (cr *Callers) InForce() *Set { return cr.set.Load() }

// newSet provisions the clients of the config and of the keys file.
func (cr *Callers) newSet(configured, fromFile map[string]*Client) (*Set, error) {
	cs := &Set{byKey: make(map[KeyHash]*Caller), byName: make(map[string]*Caller)}
	repl := caddy.NewReplacer()
	identity := cr.cfg.Identity != ""
	add := func(name string, c *Client, origin string) error {
		if c == nil {
			return fmt.Errorf("client %q%s: empty", name, origin)
		}
		if err := ValidName(name); err != nil {
			return fmt.Errorf("client %q%s: %v", name, origin, err)
		}
		if _, dup := cs.byName[name]; dup {
			return fmt.Errorf("client %q%s: already defined", name, origin)
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("client %q%s: %v", name, origin, err)
		}
		pc := &Caller{Name: name, Known: true, RPM: c.RPM, TPM: c.TPM, Trusted: c.Trusted, Ceilings: c.Ceilings(),
			BudgetDay: c.BudgetDayUSD, BudgetMonth: c.BudgetMonthUSD, Sheddable: c.Sheddable}
		pc.Class, _ = priority.Parse(c.Class) // checked by Validate
		if c.RPM > 0 || c.TPM > 0 {
			pc.Usage = usageOf(cr.s.Gateway, name)
			pc.fleet = cr.s.Share
		}
		if c.Aliases != nil {
			pc.Aliases = make(map[string]bool, len(c.Aliases))
			for _, a := range c.Aliases {
				if !cr.s.Alias(a) {
					return fmt.Errorf("client %q%s: unknown alias %q", name, origin, a)
				}
				pc.Aliases[a] = true
			}
			pc.Models = cr.s.Models(pc.Allows)
		}
		switch {
		case c.Key == "" && !identity:
			return fmt.Errorf("client %q%s: no key", name, origin)
		case c.Key != "" && identity:
			return fmt.Errorf("client %q%s: a key, but clients are named by identity", name, origin)
		case c.Key != "":
			h, err := ParseKey(repl, c.Key)
			if err != nil {
				return fmt.Errorf("client %q%s: %v", name, origin, err)
			}
			if other, dup := cs.byKey[h]; dup {
				return fmt.Errorf("client %q%s: the same key as client %q", name, origin, other.Name)
			}
			cs.byKey[h] = pc
		}
		cs.byName[name] = pc
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(configured)) {
		if err := add(name, configured[name], ""); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fromFile)) {
		if err := add(name, fromFile[name], " (keys file)"); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// Provision checks the config's clients and keys, puts them and the keys
// file's in force, and watches the keys file until ctx ends.
func (cr *Callers) Provision(ctx context.Context) error {
	if id := cr.cfg.Identity; id != "" && !IsPlaceholder(id) {
		// anything else is never empty, and would let every request in
		return fmt.Errorf("clients: identity must be one placeholder, such as {http.auth.user.id}, got %q", id)
	}
	// the config holds no usable key: keys come from placeholders, or
	// as their hashes (a keys file may hold keys)
	for _, name := range slices.Sorted(maps.Keys(cr.cfg.Clients)) {
		if c := cr.cfg.Clients[name]; c != nil && c.Key != "" && !strings.HasPrefix(c.Key, "sha256:") && !IsPlaceholder(c.Key) {
			return fmt.Errorf("clients: client %q: the key must be a placeholder such as {env.TEAM_A_KEY} or sha256:<hex>, so that the config holds no usable key", name)
		}
	}
	if k := cr.cfg.Keys; k != "" && !IsPlaceholder(k) {
		return fmt.Errorf("clients: keys must be a placeholder such as {env.HYBRID_CLIENT_KEYS}, so that the config holds no usable key")
	}
	repl := caddy.NewReplacer()
	cr.keysFile = repl.ReplaceAll(cr.cfg.KeysFile, "")
	configured, err := WithKeys(cr.cfg.Clients, repl.ReplaceAll(cr.cfg.Keys, ""))
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
		cr.s.Logger.Warn("no clients configured (keys, keys_file or client): every request is refused 401")
	}
	cr.set.Store(cs)
	if cr.keysFile != "" {
		cr.watchKeysFile(ctx, stamp)
	}
	return nil
}

// StripRouting removes an untrusted client's routing headers, so that
// neither the route rules nor the upstreams see them.
func (cr *Callers) StripRouting(r *http.Request, cl *Caller) {
	if cl == nil || cl.Trusted {
		return
	}
	for _, h := range cr.s.RouteHeaders {
		if _, ok := r.Header[h]; ok {
			delete(r.Header, h)
			name := cl.Name
			if !cl.Known {
				name = "" // an identity's name: no config bounds it
			}
			routingHeadersRemoved.WithLabelValues(cr.s.Gateway, name).Inc()
		}
	}
}
