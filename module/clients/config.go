// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package clients is the gateway's callers: their config and its checks,
// the API keys (configured as placeholders or hashes, given as name=key
// pairs or in a keys file that is watched, presented in a request's
// headers, or sent where none is read), the clients in force (Callers:
// who a request comes from, answered 401 when no one), their per-minute
// limits (kept across reloads, shared among a fleet's gateways) and
// ceilings, and what a client may see of the aliases. Budgets are kept
// by the money's books; a Caller only carries its own. It imports no
// part above it: the protocol's errors, the fleet's share, the leaves.
package clients

import (
	"fmt"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
)

// Config makes every request name a known client: by its API key, or by
// the identity an authentication handler in front of the gateway
// established.
type Config struct {
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

	// The client's priority class: `interactive`, `standard` or `batch`.
	// In a vLLM group with `classes`, standard and batch requests fill
	// only their share of each endpoint's red line and leave an
	// overflowing group, interactive ones keep the rest (see
	// priority.Config). A trusted client may set a request's class with
	// the X-Hybrid-Class header. Default: standard.
	Class string `json:"class,omitempty"`

	// The client's requests never go to a cloud target: where a vLLM
	// group with `classes` has no slot for them, they wait in its queue
	// for one, then get 429 with Retry-After. Default: false.
	Sheddable bool `json:"sheddable,omitempty"`
}

// ValidName checks a client's name: what the access log, the metrics and
// the admin API show.
func ValidName(name string) error {
	if strings.TrimSpace(name) == "" || strings.TrimSpace(name) != name {
		return fmt.Errorf("a name must not be empty or start or end with spaces")
	}
	return nil
}

// Validate checks a client's settings, but not its key or aliases, which
// need the gateway.
func (c *Client) Validate() error {
	switch {
	case c.RPM < 0 || c.TPM < 0:
		return fmt.Errorf("rpm and tpm must not be negative")
	case c.BudgetDayUSD < 0 || c.BudgetMonthUSD < 0:
		return fmt.Errorf("budgets must not be negative")
	case c.MaxTokens < 0 || c.MaxN < 0:
		return fmt.Errorf("max_tokens and max_n must not be negative")
	}
	switch c.MaxTokensMode {
	case "", Clamp, Refuse:
	default:
		return fmt.Errorf("max_tokens_mode must be %q or %q", Clamp, Refuse)
	}
	if _, err := priority.Parse(c.Class); err != nil {
		return fmt.Errorf("class: %v", err)
	}
	return nil
}

// Ceilings returns the client's ceilings on what a request may ask for.
func (c *Client) Ceilings() Ceilings {
	return Ceilings{MaxTokens: c.MaxTokens, MaxN: c.MaxN, Mode: c.MaxTokensMode}
}
