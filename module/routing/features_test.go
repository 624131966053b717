// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// A field rule matches when the top-level field is present and not null,
// whether protocol.Scan watched it or (past maxWatched fields) the body is
// searched for it.
func TestFieldRules(t *testing.T) {
	g := new(AliasSetup)
	al := &Alias{Name: "a", Targets: []*Target{{Group: "self"}, {Group: "cloud"}}}
	for i := range maxWatched {
		al.Routes = append(al.Routes, &Rule{Group: "cloud", Fields: []string{"filler" + strconv.Itoa(i)}})
	}
	watched := &Rule{Group: "cloud", Fields: []string{"filler3", "tools"}}
	searched := &Rule{Group: "cloud", Fields: []string{"response_format"}}
	al.Routes = append(al.Routes, watched, searched)
	for _, r := range al.Routes {
		if err := r.Provision(g, al); err != nil {
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
		// given twice, a field is what decoders keep: the last
		{`{"model":"a","filler3":1,"tools":[1],"tools":null,"response_format":{},"response_format":null}`, false, false},
		{`{"model":"a","filler3":1,"tools":null,"tools":[1],"response_format":null,"response_format":{}}`, true, true},
	} {
		top, ok := protocol.Scan([]byte(tc.body), g.Watch...)
		if !ok {
			t.Fatalf("invalid body %s", tc.body)
		}
		f := NewFeatures([]byte(tc.body), nil, &top)
		if got := watched.matches(&f); got != tc.watched {
			t.Errorf("%s: watched fields match %v", tc.body, got)
		}
		if got := searched.matches(&f); got != tc.searched {
			t.Errorf("%s: searched field matches %v", tc.body, got)
		}
	}
}

func TestContextWindowCheck(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("abcd", 100) + `"}],"max_tokens":50}`)
	for _, tc := range []struct {
		maxTokens int64
		window    int
		want      bool
	}{
		{50, 1000, false}, // about 100 prompt tokens + 50
		{50, 140, true},   // the body's length alone would overflow: the messages are counted
		{50, 160, false},
		{math.MaxInt64, 1000, true}, // no sum may wrap around
	} {
		top, _ := protocol.Scan(body)
		top.MaxTokens = tc.maxTokens
		f := NewFeatures(body, nil, &top)
		if got := f.exceeds(tc.window); got != tc.want {
			t.Errorf("max_tokens %d, window %d: exceeds %v (prompt %d)", tc.maxTokens, tc.window, got, f.prompt())
		}
	}
}
