// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import (
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/tests/testhome"
)

// TestMain keeps the tests off the user's own Caddy directories.
func TestMain(m *testing.M) { testhome.Main(m) }
