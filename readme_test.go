// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package caddyhybridllm

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// The Markdown documents render as written (CommonMark, with GitHub's
// tables): every code fence is closed, so no heading or table is
// swallowed by a code block, and every link to a heading of the same
// document leads to one.
func TestMarkdownRenders(t *testing.T) {
	docs, _ := filepath.Glob("examples/*/*.md")
	for _, path := range append([]string{"README.md"}, docs...) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range fenceProblems(src) {
			t.Errorf("%s:%s", path, p)
		}
		md := goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithParserOptions(parser.WithAutoHeadingID()))
		doc := md.Parser().Parse(text.NewReader(src))
		anchors := map[string]bool{}
		var links []string
		err = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if !entering {
				return ast.WalkContinue, nil
			}
			switch n := n.(type) {
			case *ast.Heading:
				if id, ok := n.AttributeString("id"); ok {
					anchors[string(id.([]byte))] = true
				}
			case *ast.Link:
				if dest := string(n.Destination); strings.HasPrefix(dest, "#") {
					links = append(links, dest[1:])
				}
			}
			return ast.WalkContinue, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if !anchors[l] {
				t.Errorf("%s: a link to #%s, which no heading has", path, l)
			}
		}
	}
}

var (
	fenceOpen  = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	fenceClose = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})[ \t]*$")
)

// fenceProblems finds, by CommonMark's rules for fenced code, a fence
// that never closes, and a line inside a code block that starts with the
// fence but has text after it: meant to close the block, it does not,
// and what follows renders as code.
func fenceProblems(src []byte) []string {
	var problems []string
	open, opened, fence := false, 0, ""
	for i, line := range strings.Split(string(src), "\n") {
		if !open {
			if m := fenceOpen.FindStringSubmatch(line); m != nil && !(m[1][0] == '`' && strings.Contains(m[2], "`")) {
				open, opened, fence = true, i+1, m[1]
			}
			continue
		}
		if m := fenceClose.FindStringSubmatch(line); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) {
			open = false
			continue
		}
		if strings.HasPrefix(strings.TrimLeft(line, " "), fence[:3]) {
			problems = append(problems, fmt.Sprintf("%d: inside the code block opened at line %d, %q does not close it (text after the fence)", i+1, opened, line))
		}
	}
	if open {
		problems = append(problems, fmt.Sprintf("%d: a code fence that never closes: the rest of the document renders as code", opened))
	}
	return problems
}
