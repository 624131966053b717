// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strings"
	"testing"
)

// Keys from the environment are name=key pairs separated by spaces; a
// list written with commas is refused rather than read as one client
// whose key holds the rest.
func TestWithKeys(t *testing.T) {
	configured := map[string]*Client{"team-a": {}}
	got, err := withKeys(configured, " team-a=sk-a  team-b=sk-b\n")
	if err != nil || len(got) != 2 || got["team-a"].Key != "sk-a" || got["team-b"].Key != "sk-b" || configured["team-a"].Key != "" {
		t.Fatalf("%v %v", got, err)
	}
	for _, tc := range []struct{ pairs, says string }{
		{"team-a=sk-a,team-b=sk-b", `client "team-a": its key holds another name=key pair: separate the pairs with spaces`},
		{"team-a=sk-a;team-b=sk-b", "separate the pairs with spaces"},
		{"sk-alone", "want name=key pairs separated by spaces"},
		{"=sk", "want name=key pairs"},
	} {
		if _, err := withKeys(nil, tc.pairs); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v, want an error saying %q", tc.pairs, err, tc.says)
		}
	}
}
