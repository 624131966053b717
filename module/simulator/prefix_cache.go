// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"math"
	"sync"

	"github.com/tidwall/gjson"
)

// prefixCache models automatic prefix caching (vLLM's
// --enable-prefix-caching, OpenAI's prompt caching, Anthropic's cache
// reads): the start a prompt shares with prompts seen before is served
// from the cache. A prompt is its system prompt, tools and messages (or
// prompt, or input) in that order, taken in blocks of prefixBlock bytes;
// each block's hash covers every block before it, so a block is only
// found after the same start.
//
// The cache holds at most capacity blocks and evicts the least recently
// used. A lookup moves the prompt's blocks to the front in prompt order,
// its first block most recent, so a prompt's tail is evicted before its
// start (as vLLM frees a request's blocks tail first) and a block is never
// evicted before the block it follows.
type prefixCache struct {
	mu       sync.Mutex
	capacity int
	index    map[uint64]int32 // block hash -> its node
	// nodes is an intrusive doubly linked list, most recently used first;
	// nodes[0] is its sentinel (next: the most, prev: the least recently
	// used block).
	nodes []prefixNode
}

type prefixNode struct {
	hash       uint64
	prev, next int32
}

// prefixBlock is a cache block, in prompt bytes: at the simulators' ~4
// bytes a token (EstimateTokens), vLLM's block of 16 tokens.
const prefixBlock = 4 * vllmBlockSize

// maxPrefixBlocks is the Cloud's cache size, in blocks (64 MiB of
// prompts).
const maxPrefixBlocks = 1 << 20

// newPrefixCache returns a cache of capacity blocks (at least 1). Its
// memory grows with the blocks it holds, not with capacity.
func newPrefixCache(capacity int) *prefixCache {
	return &prefixCache{capacity: min(max(capacity, 1), math.MaxInt32-1)}
}

// FNV-1a, 64 bits (hash/fnv's New64a), computed inline.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// promptFields are the parts of a request body its prompt is made of, in
// the order a chat template renders them: the system prompt, the tools,
// the conversation.
func promptFields(body []byte) []gjson.Result {
	return gjson.GetManyBytes(body, "system", "instructions", "tools", "messages", "prompt", "input")
}

// cachedTokens is how many of a prompt's tokens the cache holds: its
// leading blocks found in the cache, as a share of its tokens, at most
// tokens-1 (the last token is always computed) and in steps of step; 0
// below least tokens (OpenAI caches prompts of 1,024 tokens or more),
// without a lookup. The prompt's blocks are then the most recently used.
func (p *prefixCache) cachedTokens(body []byte, tokens, least, step int) int {
	fields := promptFields(body)
	size := 0
	for _, f := range fields {
		size += len(f.Raw)
	}
	if size < prefixBlock || tokens < least {
		return 0
	}
	hits := p.lookup(fields)
	cached := min(hits*prefixBlock*tokens/size, tokens-1)
	return max(cached, 0) / step * step
}

// lookup walks the prompt's blocks in order and returns how many leading
// ones the cache held. Every block it walks (up to capacity) becomes most
// recently used, in prompt order; those not held are inserted, evicting
// the least recently used blocks when the cache is full.
func (p *prefixCache) lookup(fields []gjson.Result) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes == nil {
		p.nodes = make([]prefixNode, 1, min(p.capacity+1, 1024))
		p.index = make(map[uint64]int32)
	}
	var (
		h       uint64 = fnvOffset64
		n, hits int
		at      int32 // the node the next block goes after
		hit     = true
	)
	for _, f := range fields {
		raw := f.Raw
		for i := 0; i < len(raw); i++ {
			h ^= uint64(raw[i])
			h *= fnvPrime64
			if n++; n%prefixBlock != 0 {
				continue
			}
			if n/prefixBlock > p.capacity {
				return hits
			}
			node, ok := p.index[h]
			switch {
			case !ok:
				hit = false
				node = p.insert(h)
			case node == at: // a hash collision within the prompt
				continue
			default:
				if hit {
					hits++
				}
				p.unlink(node)
			}
			p.linkAfter(node, at)
			at = node
		}
	}
	return hits
}

// insert returns a node for hash, unlinked: a new one while the cache has
// room, else the least recently used block's.
func (p *prefixCache) insert(hash uint64) int32 {
	var node int32
	if len(p.nodes)-1 < p.capacity {
		node = int32(len(p.nodes))
		p.nodes = append(p.nodes, prefixNode{})
	} else {
		node = p.nodes[0].prev
		p.unlink(node)
		delete(p.index, p.nodes[node].hash)
	}
	p.nodes[node].hash = hash
	p.index[hash] = node
	return node
}

func (p *prefixCache) unlink(node int32) {
	n := &p.nodes[node]
	p.nodes[n.prev].next = n.next
	p.nodes[n.next].prev = n.prev
}

func (p *prefixCache) linkAfter(node, at int32) {
	next := p.nodes[at].next
	p.nodes[node].prev, p.nodes[node].next = at, next
	p.nodes[next].prev = node
	p.nodes[at].next = node
}

// held returns the number of blocks held.
func (p *prefixCache) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.index)
}
