// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"runtime/debug"

	"go.uber.org/zap"
)

// logPanic, deferred at the top of a background goroutine, keeps a panic
// there from taking Caddy down and logs it with its stack.
func logPanic(logger *zap.Logger, what string) {
	if err := recover(); err != nil {
		logger.Error(what+" panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
	}
}
