// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import "fmt"

// The choices of response_model.
const (
	ResponseModelAlias    = "alias"
	ResponseModelUpstream = "upstream"
)

// CheckResponseModel refuses a response_model that is none of the choices
// (empty: the default).
func CheckResponseModel(v string) error {
	switch v {
	case "", ResponseModelAlias, ResponseModelUpstream:
		return nil
	}
	return fmt.Errorf("response_model must be %q or %q, got %q", ResponseModelAlias, ResponseModelUpstream, v)
}

// answersCarryAlias reports whether answers carry the alias, given the
// alias's and the gateway's setting.
func answersCarryAlias(alias, gateway string) bool {
	if alias != "" {
		return alias == ResponseModelAlias
	}
	return gateway != ResponseModelUpstream
}
