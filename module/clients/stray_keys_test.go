// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Headers count only for a gateway that reads keys itself; the query
// always does.
func TestStrayKeyWhereKeysAreRead(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("X-Goog-Api-Key", "k")
	q := httptest.NewRequest(http.MethodPost, "/v1/chat/completions?api_key=k", nil)
	for _, tc := range []struct {
		clients       *Config
		header, query string
	}{
		{nil, "", "query"},
		{&Config{}, "X-Goog-Api-Key", "query"},
		{&Config{Identity: "{http.auth.user.id}"}, "", "query"},
	} {
		sk := NewStrayKeys("", tc.clients, nil, nil)
		if got := sk.Find(r); got != tc.header {
			t.Errorf("clients %+v: header %q, want %q", tc.clients, got, tc.header)
		}
		if got := sk.Find(q); got != tc.query {
			t.Errorf("clients %+v: query %q, want %q", tc.clients, got, tc.query)
		}
	}
}
