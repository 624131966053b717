// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import "github.com/hybridllm/caddy-hybrid-llm/module/because"

// reason is why an endpoint was passed over (see package because).
type reason = because.Reason
