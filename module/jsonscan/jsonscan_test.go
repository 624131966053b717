// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func FuzzUnescapedLen(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb"`, `"\u00e9\u4e2d"`, `"\"\\\/\b\f\r\t"`, `"é"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) < 2 || raw[0] != '"' || bytes.Contains(bytes.ToLower(raw), []byte(`\ud`)) {
			return // surrogates are counted 2 per half, gjson makes them 3 or 4
		}
		if end, _, ok := ScanString(raw, 1); !ok || end != len(raw) || !utf8.Valid(raw) {
			return
		}
		if got, want := UnescapedLen(raw), len(gjson.ParseBytes(raw).Str); got != want {
			t.Fatalf("%q: %d bytes, gjson %d", raw, got, want)
		}
	})
}

// TestObjectFields: the fields come in order with their raw values and
// offsets, keys unescaped; anything but one valid object is refused.
func TestObjectFields(t *testing.T) {
	body := []byte(` {"a" : 1, "b\u0063":[true, {"x":"y"}], "s":"q\"uote"} `)
	var keys, vals []string
	end, ok := ObjectFields(body, SkipSpace(body, 0), MaxNesting, func(k, raw []byte, at int) {
		if string(body[at:at+len(raw)]) != string(raw) {
			t.Errorf("field %s: offset %d does not hold its value", k, at)
		}
		keys, vals = append(keys, string(k)), append(vals, string(raw))
	})
	if !ok || SkipSpace(body, end) != len(body) {
		t.Fatalf("valid object refused: end %d, ok %v", end, ok)
	}
	if got := strings.Join(keys, ","); got != "a,bc,s" {
		t.Errorf("keys %s", got)
	}
	if got := strings.Join(vals, " "); got != `1 [true, {"x":"y"}] "q\"uote"` {
		t.Errorf("values %s", got)
	}
	for _, bad := range []string{`[]`, `{"a":1,}`, `{"a" 1}`, `{"a":[1 2]}`, `{"a":"x`} {
		if _, ok := ObjectFields([]byte(bad), 0, MaxNesting, func(_, _ []byte, _ int) {}); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

// FuzzObjectFields holds the validator to encoding/json.
func FuzzObjectFields(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}]}`, `{"mod\u0065l":1}`, `{"x":-0.0e-0}`, `[1]`, `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := ObjectFields(b, SkipSpace(b, 0), MaxNesting, func(_, _ []byte, _ int) {})
		ok = ok && SkipSpace(b, end) == len(b)
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		if want := json.Valid(b) && len(trimmed) > 0 && trimmed[0] == '{'; ok != want {
			t.Fatalf("%q: valid %v, want %v", b, ok, want)
		}
	})
}

func TestInt(t *testing.T) {
	for raw, want := range map[string]int64{`256`: 256, `256.0`: 256, `"256"`: 256, `-3`: -3, `null`: 0} {
		if got := Int([]byte(raw)); got != want {
			t.Errorf("Int(%s) = %d, want %d", raw, got, want)
		}
	}
}
