// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import "fmt"

// The choices of response_model.
const (
	responseModelAlias    = "alias"
	responseModelUpstream = "upstream"
)

func checkResponseModel(v string) error {
	switch v {
	case "", responseModelAlias, responseModelUpstream:
		return nil
	}
	return fmt.Errorf("response_model must be %q or %q, got %q", responseModelAlias, responseModelUpstream, v)
}

// answersCarryAlias reports whether answers carry the alias, given the
// alias's and the gateway's setting.
func answersCarryAlias(alias, gateway string) bool {
	if alias != "" {
		return alias == responseModelAlias
	}
	return gateway != responseModelUpstream
}
