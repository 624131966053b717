// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"hash/fnv"
	"sync"

	"github.com/tidwall/gjson"
)

// prefixCache models automatic prefix caching (vLLM's
// --enable-prefix-caching, OpenAI's prompt caching, Anthropic's cache
// reads): the start a prompt shares with prompts seen before is served
// from the cache. A prompt is its system prompt, tools and messages (or
// prompt, or input) in that order, taken in blocks of prefixBlock bytes;
// each block's hash covers every block before it.
type prefixCache struct {
	mu   sync.Mutex
	seen map[uint64]struct{}
}

// prefixBlock is a cache block, in prompt bytes.
const prefixBlock = 64

// maxPrefixBlocks caps the blocks remembered: past it, the cache starts
// over, as an evicted one would.
const maxPrefixBlocks = 1 << 20

// cachedTokens is how many of a prompt's tokens the cache holds: its
// blocks seen before, as a share of its tokens, in blocks of 16 tokens
// (vLLM's block size), at least min (OpenAI caches prompts of 1,024
// tokens or more) and in steps of step. Its blocks are remembered.
func (p *prefixCache) cachedTokens(body []byte, tokens, least, step int) int {
	text := promptText(body)
	if len(text) < prefixBlock || tokens < least {
		return 0
	}
	h := fnv.New64a()
	matched, hit := 0, true
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil || len(p.seen) > maxPrefixBlocks {
		p.seen = make(map[uint64]struct{})
	}
	for i := 0; i+prefixBlock <= len(text); i += prefixBlock {
		_, _ = h.Write(text[i : i+prefixBlock])
		sum := h.Sum64()
		if _, ok := p.seen[sum]; hit && ok {
			matched += prefixBlock
		} else {
			hit = false
			p.seen[sum] = struct{}{}
		}
	}
	cached := matched * tokens / len(text)
	return cached / step * step
}

// promptText is what a request's prompt is made of, in the order a chat
// template renders it: the system prompt, the tools, the conversation.
func promptText(body []byte) []byte {
	var text []byte
	for _, f := range gjson.GetManyBytes(body, "system", "instructions", "tools", "messages", "prompt", "input") {
		text = append(text, f.Raw...)
	}
	return text
}
