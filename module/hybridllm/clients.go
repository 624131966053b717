// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
)

// Clients makes every request name a known client: by its API key, or by
// the identity an authentication handler in front of the gateway
// established.
type Clients struct {
	// The clients, by name. A name is what the access log, the metrics
	// and the admin API show; it comes from the config only.
	Clients map[string]*Client `json:"clients,omitempty"`

	// More clients, by key only: `name=key` pairs separated by spaces,
	// usually a placeholder such as `{env.HYBRID_CLIENT_KEYS}`, read at
	// provisioning. A name may also have settings among Clients.
	Keys string `json:"keys,omitempty"`

	// A JSON file of more clients (the same fields, by name, under
	// "clients"), read again whenever it changes, without a reload. A
	// client may be in the config or in the file, not in both. It may
	// be a placeholder such as `{env.HYBRID_CLIENT_KEYS_FILE}`; empty,
	// there is none.
	KeysFile string `json:"keys_file,omitempty"`

	// Instead of API keys, a placeholder that holds the client's name as
	// Caddy's authentication established it, e.g. `{http.auth.user.id}`
	// after basic_auth or forward_auth. A request whose placeholder is
	// empty is refused. Names that are not among the clients get no
	// per-client settings.
	Identity string `json:"identity,omitempty"`

	// The completion tokens a request that sets no max_tokens (nor
	// max_completion_tokens, nor the client's max_tokens ceiling)
	// reserves against its client's tpm and cloud budget while it runs.
	// Default: 1024.
	ReserveTokens int `json:"reserve_tokens,omitempty"`
}

// Client is one caller of the gateway.
type Client struct {
	// The client's API key: a placeholder such as `{env.TEAM_A_KEY}`,
	// read at provisioning, or the key's SHA-256 as `sha256:<hex>`, so
	// that neither the config nor `GET /config/` holds a usable key.
	// Required unless the clients are named by `identity`.
	Key string `json:"key,omitempty"`

	// The aliases the client may use; others answer 404 as if they did
	// not exist, and `GET /v1/models` lists only these. Default: all.
	Aliases []string `json:"aliases,omitempty"`

	// Requests per minute; more are answered 429 with Retry-After.
	// Default: no limit.
	RPM int `json:"rpm,omitempty"`

	// Tokens (prompt and completion, from the upstream's usage, streams
	// included, or the gateway's estimate when no usage came) per
	// minute. A request is admitted while the minute's use, with what
	// the requests in flight reserved (their prompt and max_tokens), is
	// under the limit, and reserves its own; its end settles the
	// reservation to what it used. The next requests are answered 429
	// with Retry-After until the use is back under the limit. Default:
	// no limit.
	TPM int `json:"tpm,omitempty"`

	// Whether the client's routing headers count: the headers that
	// route rules read. An untrusted client's are removed before the
	// rules and the upstream see the request, and counted. Default:
	// false.
	Trusted bool `json:"trusted,omitempty"`

	// The most tokens an answer may ask for (max_tokens,
	// max_completion_tokens, the Responses API's max_output_tokens). A
	// request without one is given it. Default: none.
	MaxTokens int `json:"max_tokens,omitempty"`

	// What happens to a request asking for more than MaxTokens: `clamp`
	// (it is lowered) or `refuse` (400). Default: clamp.
	MaxTokensMode string `json:"max_tokens_mode,omitempty"`

	// The most answers (n) a request may ask for; more is refused with
	// 400. Default: none.
	MaxN int `json:"max_n,omitempty"`

	// What the client may spend on cloud targets in a UTC day, and in a
	// UTC month, in USD (from the groups' cost prices). A request going
	// to a priced cloud target reserves what it may cost there (its
	// prompt and max_tokens at the group's prices) until it ends; while
	// spend and reservations reach the budget, the next requests skip
	// cloud targets (429 with a short Retry-After when nothing else can
	// serve them). Once spent, its requests skip cloud targets and stay
	// on self-hosted ones; with no target left they get 429
	// insufficient_quota. Default: no budget.
	BudgetDayUSD   float64 `json:"budget_day_usd,omitempty"`
	BudgetMonthUSD float64 `json:"budget_month_usd,omitempty"`
}

// maxKeyLength bounds a presented API key; longer ones are refused
// before they are hashed.
const maxKeyLength = 4 << 10

// keyHash is the SHA-256 of an API key.
type keyHash [sha256.Size]byte

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

	maxTokens, maxN int
	ceilingMode     string

	budgetDay, budgetMonth float64
}

// allows reports whether the client may use an alias.
func (c *client) allows(alias string) bool {
	return c == nil || c.aliases == nil || c.aliases[alias]
}

// clientSet is the clients in force: the config's and the keys file's.
type clientSet struct {
	byKey  map[keyHash]*client
	byName map[string]*client
}

// newClientSet provisions the clients of the config and of the keys file.
func (g *Gateway) newClientSet(configured, fromFile map[string]*Client) (*clientSet, error) {
	cs := &clientSet{byKey: make(map[keyHash]*client), byName: make(map[string]*client)}
	repl := caddy.NewReplacer()
	identity := g.Clients.Identity != ""
	add := func(name string, c *Client, origin string) error {
		if c == nil {
			return fmt.Errorf("client %q%s: empty", name, origin)
		}
		if strings.TrimSpace(name) == "" || strings.TrimSpace(name) != name {
			return fmt.Errorf("client %q%s: a name must not be empty or start or end with spaces", name, origin)
		}
		if _, dup := cs.byName[name]; dup {
			return fmt.Errorf("client %q%s: already defined", name, origin)
		}
		if c.RPM < 0 || c.TPM < 0 {
			return fmt.Errorf("client %q%s: rpm and tpm must not be negative", name, origin)
		}
		if c.BudgetDayUSD < 0 || c.BudgetMonthUSD < 0 {
			return fmt.Errorf("client %q%s: budgets must not be negative", name, origin)
		}
		if c.MaxTokens < 0 || c.MaxN < 0 {
			return fmt.Errorf("client %q%s: max_tokens and max_n must not be negative", name, origin)
		}
		switch c.MaxTokensMode {
		case "", ceilingClamp, ceilingRefuse:
		default:
			return fmt.Errorf("client %q%s: max_tokens_mode must be %q or %q", name, origin, ceilingClamp, ceilingRefuse)
		}
		pc := &client{name: name, known: true, rpm: c.RPM, tpm: c.TPM, trusted: c.Trusted,
			maxTokens: c.MaxTokens, maxN: c.MaxN, ceilingMode: c.MaxTokensMode,
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
			h, err := parseClientKey(repl, c.Key)
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

// parseClientKey returns the hash of a configured key: `sha256:<hex>`, or
// a key (after its placeholders are replaced).
func parseClientKey(repl *caddy.Replacer, key string) (keyHash, error) {
	var h keyHash
	if hx, ok := strings.CutPrefix(key, "sha256:"); ok {
		b, err := hex.DecodeString(hx)
		if err != nil || len(b) != len(h) {
			return h, fmt.Errorf("sha256: wants 64 hex digits")
		}
		copy(h[:], b)
		return h, nil
	}
	k := repl.ReplaceKnown(key, "")
	switch {
	case k == "":
		return h, fmt.Errorf("the key %s is empty", key)
	case len(k) > maxKeyLength:
		return h, fmt.Errorf("the key is longer than %d bytes", maxKeyLength)
	case strings.TrimSpace(k) != k || strings.ContainsAny(k, " \t\r\n"):
		return h, fmt.Errorf("the key has spaces")
	}
	return sha256.Sum256([]byte(k)), nil
}

// provisionClients puts the clients of the config and of the keys file in
// force, and watches the keys file for changes.
func (g *Gateway) provisionClients(ctx caddy.Context) error {
	if id := g.Clients.Identity; id != "" && !isPlaceholder(id) {
		// anything else is never empty, and would let every request in
		return fmt.Errorf("clients: identity must be one placeholder, such as {http.auth.user.id}, got %q", id)
	}
	// the config holds no usable key: keys come from placeholders, or
	// as their hashes (a keys file may hold keys)
	for _, name := range sortedKeys(g.Clients.Clients) {
		if c := g.Clients.Clients[name]; c != nil && c.Key != "" && !strings.HasPrefix(c.Key, "sha256:") && !isPlaceholder(c.Key) {
			return fmt.Errorf("clients: client %q: the key must be a placeholder such as {env.TEAM_A_KEY} or sha256:<hex>, so that the config holds no usable key", name)
		}
	}
	if k := g.Clients.Keys; k != "" && !isPlaceholder(k) {
		return fmt.Errorf("clients: keys must be a placeholder such as {env.HYBRID_CLIENT_KEYS}, so that the config holds no usable key")
	}
	repl := caddy.NewReplacer()
	g.keysFile = repl.ReplaceAll(g.Clients.KeysFile, "")
	configured, err := withKeys(g.Clients.Clients, repl.ReplaceAll(g.Clients.Keys, ""))
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

// withKeys adds the clients of `name=key` pairs to the configured ones: a
// name that has settings gets the key, others become clients of their
// own.
func withKeys(configured map[string]*Client, pairs string) (map[string]*Client, error) {
	fields := strings.Fields(pairs)
	if len(fields) == 0 {
		return configured, nil
	}
	out := make(map[string]*Client, len(configured)+len(fields))
	for name, c := range configured {
		out[name] = c
	}
	for _, f := range fields {
		name, key, ok := strings.Cut(f, "=")
		if !ok || name == "" || key == "" {
			return nil, fmt.Errorf("want name=key pairs separated by spaces, got a pair without a name or key")
		}
		if strings.ContainsAny(key, ",;") && strings.Contains(key, "=") {
			// "a=k1,b=k2": one client whose key would be "k1,b=k2"
			return nil, fmt.Errorf("client %q: its key holds another name=key pair: separate the pairs with spaces, not commas", name)
		}
		c, found := out[name]
		switch {
		case !found:
			out[name] = &Client{Key: key}
		case c.Key != "":
			return nil, fmt.Errorf("client %q has a key already", name)
		default:
			cc := *c // the config's own is left as it is
			cc.Key = key
			out[name] = &cc
		}
	}
	return out, nil
}

// sortedClientNames lists the clients in force by name.
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

// isPlaceholder reports whether s is one placeholder, such as {env.NAME}.
func isPlaceholder(s string) bool {
	return len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && strings.Count(s, "{") == 1 && strings.Count(s, "}") == 1
}
