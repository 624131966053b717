// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package caddyargs

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// UnknownOption is the error of an option a block does not know: where it
// is, and the known one it was most likely meant to be.
func UnknownOption(d *caddyfile.Dispenser, what, got string, known ...string) error {
	if s := Suggest(got, known); s != "" {
		return d.Errf("unrecognized %s '%s' (did you mean '%s'?)", what, got, s)
	}
	return d.Errf("unrecognized %s '%s'", what, got)
}

// Suggest returns the known word closest to got: within an edit distance
// of 2 (1 for short words), or one that got is a start of; "" when none
// is near enough.
func Suggest(got string, known []string) string {
	g := strings.ToLower(got)
	best, bestDist := "", 3
	if len(g) <= 4 {
		bestDist = 2
	}
	for _, k := range known {
		if dist := editDistance(g, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" || len(g) < 3 {
		return best
	}
	for _, k := range known {
		if strings.HasPrefix(k, g) {
			return k
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b, with a swap of two
// neighbouring letters counting as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
