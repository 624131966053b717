// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strconv"
	"testing"
)

// A field rule matches when the top-level field is present and not null,
// whether scanTop watched it or (past maxWatched fields) the body is
// searched for it.
func TestFieldRules(t *testing.T) {
	g := new(Gateway)
	al := &Alias{name: "a", Targets: []*Target{{Group: "self"}, {Group: "cloud"}}}
	for i := range maxWatched {
		al.Routes = append(al.Routes, &Rule{Target: "cloud", Fields: []string{"filler" + strconv.Itoa(i)}})
	}
	watched := &Rule{Target: "cloud", Fields: []string{"filler3", "tools"}}
	searched := &Rule{Target: "cloud", Fields: []string{"response_format"}}
	al.Routes = append(al.Routes, watched, searched)
	for _, r := range al.Routes {
		if err := r.provision(g, al); err != nil {
			t.Fatal(err)
		}
	}
	if len(searched.slowFields) != 1 || watched.fieldBits == 0 || len(watched.slowFields) != 1 {
		t.Fatalf("watched %b %v, searched %v", watched.fieldBits, watched.slowFields, searched.slowFields)
	}
	for _, tc := range []struct {
		body              string
		watched, searched bool
	}{
		{`{"model":"a","filler3":1,"tools":[{}],"response_format":{"type":"json_object"}}`, true, true},
		{`{"model":"a","filler3":1,"tools":null,"response_format":null}`, false, false},
		{`{"model":"a","tools":[],"metadata":{"filler3":1,"response_format":1}}`, false, false},
		{`{"model":"a","filler3":"x","tools":{},"response_format":""}`, true, true},
	} {
		top, ok := scanTop([]byte(tc.body), g.watch...)
		if !ok {
			t.Fatalf("invalid body %s", tc.body)
		}
		f := newFeatures([]byte(tc.body), nil, &top)
		if got := watched.matches(&f); got != tc.watched {
			t.Errorf("%s: watched fields match %v", tc.body, got)
		}
		if got := searched.matches(&f); got != tc.searched {
			t.Errorf("%s: searched field matches %v", tc.body, got)
		}
	}
}
