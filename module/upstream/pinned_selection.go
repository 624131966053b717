// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
)

// pinnedSelection wraps a group's selection policy: a drill's request
// goes to the one endpoint it names (a policy of the gateway's own
// honours the pin itself, keeping its drain and breaker rules).
type pinnedSelection struct {
	reverseproxy.Selector
}

// Select implements reverseproxy.Selector.
func (p pinnedSelection) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	slot := SlotOf(w)
	if slot == nil || slot.Pin == "" {
		return p.Selector.Select(pool, r, w)
	}
	if _, ours := p.Selector.(*LeastLoadSelection); ours && slot.Group != nil &&
		(len(slot.Group.Endpoints) > 0 || slot.Group.Added.Load() != nil) {
		return p.Selector.Select(pool, r, w)
	}
	for _, u := range pool {
		if u.Dial == slot.Pin {
			return p.Selector.Select(reverseproxy.UpstreamPool{u}, r, w)
		}
	}
	slot.Skip = because.NoEndpoint
	return nil
}

// Interface guards
var _ reverseproxy.Selector = pinnedSelection{}
