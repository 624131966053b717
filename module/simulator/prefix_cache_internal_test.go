// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"strings"
	"testing"
	"time"
)

// promptOfBlocks returns a completions body whose prompt's JSON string is
// n blocks and a part of one, starting with name.
func promptOfBlocks(name string, n int) []byte {
	text := name + strings.Repeat(".", n*prefixBlock+8-len(name))
	return []byte(`{"prompt":"` + text + `"}`)
}

// lookupBlocks returns the leading blocks of body the cache held.
func lookupBlocks(p *prefixCache, body []byte) int { return p.lookup(promptFields(body)) }

// A full cache evicts the least recently used blocks, and of one prompt
// its tail first, so what stays of it is a start that still hits.
func TestPrefixCacheTailFirst(t *testing.T) {
	p := newPrefixCache(6)
	a, b := promptOfBlocks("a", 4), promptOfBlocks("b", 4)
	if hits := lookupBlocks(p, a); hits != 0 {
		t.Fatalf("a, first: %d hits", hits)
	}
	if hits := lookupBlocks(p, a); hits != 4 {
		t.Fatalf("a, again: %d hits, want 4", hits)
	}
	if hits := lookupBlocks(p, b); hits != 0 || p.held() != 6 {
		t.Fatalf("b: %d hits, %d held", hits, p.held())
	}
	// b took a's last two blocks; its first two remain.
	if hits := lookupBlocks(p, a); hits != 2 {
		t.Errorf("a after b: %d hits, want its first 2 blocks", hits)
	}
	// a's 4 blocks are now the most recent: b keeps its first 2.
	if hits := lookupBlocks(p, b); hits != 2 {
		t.Errorf("b after a: %d hits, want 2", hits)
	}
}

// A prompt longer than the cache leaves its first capacity blocks.
func TestPrefixCacheLongPrompt(t *testing.T) {
	p := newPrefixCache(3)
	long := promptOfBlocks("x", 5)
	lookupBlocks(p, long)
	if p.held() != 3 {
		t.Fatalf("%d blocks held, want 3", p.held())
	}
	if hits := lookupBlocks(p, long); hits != 3 {
		t.Errorf("%d hits, want 3", hits)
	}
}

// cachedTokens scales the blocks found to the prompt's tokens, leaves the
// last token uncached and rounds down to steps.
func TestPrefixCacheTokens(t *testing.T) {
	p := newPrefixCache(100)
	body := []byte(`{"prompt":"` + strings.Repeat("abcd", 62) + `"}`) // "…": 250 bytes, 3 blocks and a part
	if got := p.cachedTokens(body, 62, 0, 16); got != 0 {
		t.Errorf("first: %d cached", got)
	}
	// 3 × 64 of 250 bytes of 62 tokens = 47, in steps of 16
	if got := p.cachedTokens(body, 62, 0, 16); got != 32 {
		t.Errorf("again: %d cached, want 32", got)
	}
	exact := []byte(`{"prompt":"` + strings.Repeat("abcd", 31) + `ab"}`) // "…": 128 bytes, 2 blocks
	p.cachedTokens(exact, 32, 0, 1)
	if got := p.cachedTokens(exact, 32, 0, 1); got != 31 {
		t.Errorf("a whole prompt: %d cached, want all but its last token", got)
	}
	if got := p.cachedTokens(body, 62, 1024, 128); got != 0 {
		t.Errorf("below least: %d cached", got)
	}
}

// A lookup allocates nothing that grows with the prompt: a long prompt
// costs as many allocations as a short one.
func TestPrefixCacheAllocations(t *testing.T) {
	p := newPrefixCache(1000)
	short, long := promptOfBlocks("s", 2), promptOfBlocks("l", 200)
	lookupBlocks(p, short)
	lookupBlocks(p, long)
	allocs := func(body []byte) float64 {
		return testing.AllocsPerRun(100, func() { p.cachedTokens(body, 1000, 0, 16) })
	}
	if s, l := allocs(short), allocs(long); l > s {
		t.Errorf("allocations per lookup: %v for 2 blocks, %v for 200", s, l)
	}
}

// The first token comes TTFT + PrefillPerToken × the uncached prompt
// tokens after the slot.
func TestFirstTokenWait(t *testing.T) {
	v := NewVLLM(VLLMConfig{TTFT: 10 * time.Millisecond, PrefillPerToken: time.Millisecond})
	if got := v.firstTokenWait(100, -1); got != 110*time.Millisecond {
		t.Errorf("without prefix caching: %v", got)
	}
	if got := v.firstTokenWait(100, 64); got != 46*time.Millisecond {
		t.Errorf("64 of 100 cached: %v", got)
	}
	if got := NewVLLM(VLLMConfig{TTFT: time.Second}).firstTokenWait(100, 0); got != time.Second {
		t.Errorf("PrefillPerToken 0: %v", got)
	}
}
