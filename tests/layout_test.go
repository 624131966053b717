// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/hybridllm/caddy-hybrid-llm"

// layers is what each package may import of the product: the leaves
// nothing (or only other leaves), the CLI only the admin API's JSON, the
// Caddy face everything. A package missing here fails the test: a new
// one is placed in the house on purpose (README, "Design").
var layers = map[string][]string{
	"module/because":               nil,
	"module/clock":                 nil,
	"module/caddyargs":             nil,
	"module/cost":                  nil,
	"module/credentials":           nil,
	"module/degrade":               nil,
	"module/healthscore":           nil,
	"module/jsonscan":              nil,
	"module/lograte":               nil,
	"module/loop":                  nil,
	"module/overflow":              nil,
	"module/priority":              nil,
	"module/ratelimit":             nil,
	"module/registry":              nil,
	"module/registry/registrytest": nil,
	"module/reload":                nil,
	"module/simulator":             nil,
	"module/translate":             nil,
	"module/vllmmetrics":           nil,
	"module/protocol":              {"module/jsonscan"},
	"module/proclock":              {"module/reload"},
	"module/journal":               {"module/clock"},
	"module/breaker":               {"module/clock"},
	"module/probe":                 {"module/caddyargs", "module/clock", "module/lograte", "module/loop", "module/reload", "module/vllmmetrics"},
	"module/logkeys":               {"module/credentials"},
	"module/adminapi":              {"module/cost"},
	"module/fleet":                 {"module/adminapi", "module/proclock", "module/registry", "module/reload"},
	"module/clients":               {"module/clock", "module/credentials", "module/fleet", "module/jsonscan", "module/lograte", "module/loop", "module/priority", "module/protocol", "module/ratelimit", "module/registry", "module/reload"},
	"module/statemetrics":          {"module/adminapi", "module/healthscore"},
	"module/books":                 {"module/adminapi", "module/clock", "module/cost", "module/journal", "module/loop", "module/registry", "module/reload"},
	"module/upstream":              {"module/because", "module/breaker", "module/caddyargs", "module/clock", "module/fleet", "module/healthscore", "module/jsonscan", "module/loop", "module/overflow", "module/priority", "module/probe", "module/protocol", "module/registry", "module/reload", "module/vllmmetrics"},
	"module/money":                 {"module/because", "module/books", "module/clients", "module/clock", "module/cost", "module/fleet", "module/journal", "module/loop", "module/proclock", "module/registry", "module/upstream"},
	"module/routing":               {"module/adminapi", "module/because", "module/books", "module/breaker", "module/clients", "module/clock", "module/credentials", "module/degrade", "module/healthscore", "module/jsonscan", "module/loop", "module/money", "module/priority", "module/probe", "module/protocol", "module/reload", "module/translate", "module/upstream"},
	"module/core":                  {"module/because", "module/breaker", "module/clients", "module/clock", "module/credentials", "module/journal", "module/lograte", "module/money", "module/priority", "module/probe", "module/protocol", "module/ratelimit", "module/routing", "module/translate", "module/upstream"},
	"module/fleetlink":             {"module/adminapi", "module/books", "module/clock", "module/fleet", "module/money", "module/registry", "module/routing", "module/upstream"},
	"module/command":               {"module/adminapi"},
	"module/hybridllm":             {"*"},
	"caddyfile":                    {"module/hybridllm"},
	"":                             {"caddyfile", "module/command", "module/hybridllm"}, // plugin.go
}

// The house's rules, read from the sources: every directory is named as
// its package, and no package imports one of a higher part than its own
// (non-test files; examples, tests and commands are not parts).
func TestPackagesKeepToTheirParts(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{root, filepath.Join(root, "caddyfile")}
	_ = filepath.WalkDir(filepath.Join(root, "module"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() != "testdata" {
			dirs = append(dirs, p)
		}
		return nil
	})
	seen := 0
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		rel = filepath.ToSlash(strings.TrimPrefix(rel, "."))
		imports, name := packageImports(t, dir)
		if name == "" {
			continue // no Go files
		}
		seen++
		if rel != "" && name != path.Base(rel) {
			t.Errorf("%s holds package %s: a directory is named as its package", rel, name)
		}
		allowed, ok := layers[rel]
		if !ok {
			t.Errorf("package %s has no place in the house (layers)", rel)
			continue
		}
		for _, imp := range imports {
			if slices.Contains(allowed, "*") || slices.Contains(allowed, imp) {
				continue
			}
			t.Errorf("%s imports %s: its part may import only %v", displayName(rel), imp, allowed)
		}
	}
	if seen < len(layers)-1 {
		t.Errorf("read %d packages, the house has %d: the walk missed some", seen, len(layers))
	}
}

// packageImports returns what a directory's non-test Go files import of
// the product, and their package's name ("" without Go files).
func packageImports(t *testing.T, dir string) (imports []string, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		name = f.Name.Name
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if rest, ok := strings.CutPrefix(p, modulePath+"/"); ok && !slices.Contains(imports, rest) {
				imports = append(imports, rest)
			}
		}
	}
	return imports, name
}

func displayName(rel string) string {
	if rel == "" {
		return "the root package"
	}
	return rel
}
