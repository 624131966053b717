// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package adminapi

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/schema.txt")

// documents are the admin API's types, each at the head of its schema.
var documents = []any{
	StateDoc{}, ClientsList{}, LedgerDoc{}, DrillResult{},
	ActionRequest{}, RegistryEntry{}, RegistryWrite{},
}

// schema lists a type's JSON fields in the order they are written, with
// their tags, and then the schema of each struct type they hold.
func schema(t reflect.Type, seen map[reflect.Type]bool, out *strings.Builder) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t == reflect.TypeFor[time.Time]() {
		return
	}
	seen[t] = true
	fmt.Fprintf(out, "%s.%s\n", t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:], t.Name())
	var nested []reflect.Type
	var fields func(t reflect.Type)
	fields = func(t reflect.Type) {
		for f := range t.Fields() {
			if f.Anonymous && f.Tag.Get("json") == "" {
				fields(f.Type) // its fields are written as the outer's
				continue
			}
			fmt.Fprintf(out, "\t%s %s `%s`\n", f.Name, f.Type, f.Tag.Get("json"))
			nested = append(nested, f.Type)
		}
	}
	fields(t)
	for _, n := range nested {
		schema(n, seen, out)
	}
}

// The answers' field names, tags and order are the API's schema: they
// change only on purpose (go test ./module/adminapi/ -update).
func TestSchema(t *testing.T) {
	var b strings.Builder
	seen := map[reflect.Type]bool{}
	for _, d := range documents {
		schema(reflect.TypeOf(d), seen, &b)
	}
	const golden = "testdata/schema.txt"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("the schema changed; got:\n%s", b.String())
	}
}

// A drill's endpoint writes its answer's fields beside its address, and
// reads back as it was.
func TestDrillRoundTrip(t *testing.T) {
	in := DrillResult{Group: "self", Model: "qwen", DrillAnswer: DrillAnswer{Reachable: true, Status: 200, OK: true, LatencyMS: 41.5},
		Endpoints: []DrillEndpoint{{Address: "127.0.0.1:8001", DrillAnswer: DrillAnswer{Error: "connection_refused"}}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"group":"self","model":"qwen","reachable":true,"status":200,"ok":true,"latency_ms":41.5,` +
		`"endpoints":[{"address":"127.0.0.1:8001","reachable":false,"status":0,"ok":false,"latency_ms":0,"error":"connection_refused"}]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var out DrillResult
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(out, in) {
		t.Errorf("read back %+v, %v", out, err)
	}
}
