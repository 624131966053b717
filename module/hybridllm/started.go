// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"
)

// whenStarted runs fn once the config being provisioned runs: on Caddy's
// "started" event, which a config that is only validated (caddy validate,
// caddy adapt --validate) never emits. What touches the network (probes,
// model checks, the registry's watch and membership) waits for it, so
// that validating a config neither probes nor logs about upstreams.
func whenStarted(ctx caddy.Context, logger *zap.Logger, fn func()) {
	app, err := ctx.App("events")
	if err == nil {
		if ev, ok := app.(*caddyevents.App); ok {
			if err = ev.On("started", &startedHook{fn: fn}); err == nil {
				return
			}
		}
	}
	logger.Warn("no config-started event; starting probes now", zap.Error(err))
	fn()
}

// startedHook runs its function on the first event it gets.
type startedHook struct {
	once sync.Once
	fn   func()
}

// Handle implements caddyevents.Handler.
func (h *startedHook) Handle(context.Context, caddy.Event) error {
	h.once.Do(h.fn)
	return nil
}
