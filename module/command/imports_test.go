// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package command

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The command knows the gateway only through the admin API's JSON: of
// the product it imports adminapi, and adminapi only the leaves its
// documents embed.
func TestImportsOnlyAdminAPI(t *testing.T) {
	const product = "github.com/hybridllm/caddy-hybrid-llm"
	for dir, allowed := range map[string][]string{
		".":           {product + "/module/adminapi"},
		"../adminapi": {product + "/module/cost"},
	} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if (path == product || strings.HasPrefix(path, product+"/")) && !slices.Contains(allowed, path) {
					t.Errorf("%s imports %s", name, path)
				}
			}
		}
	}
}
