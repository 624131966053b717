// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package adminapi

import "encoding/json"

// ActionRequest is the body of the mutating routes.
type ActionRequest struct {
	Gateway  string `json:"gateway,omitempty"` // default: the only gateway
	Group    string `json:"group,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Alias    string `json:"alias,omitempty"`
	Weight   *int   `json:"weight,omitempty"`
}

// RegistryEntry is one key of the registry, relative to its prefix.
type RegistryEntry struct {
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value"`
	ModRevision int64           `json:"mod_revision"`
}

// RegistryWrite is the body of POST /hybrid_llm/registry: a value to put
// under a key (groups/<group> or aliases/<alias>), or the key to delete.
type RegistryWrite struct {
	Gateway string          `json:"gateway,omitempty"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value,omitempty"`
	Delete  bool            `json:"delete,omitempty"`
}
