// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"hash/crc32"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
)

// castagnoli is the CRC-32C table: computed by the CPU where it can.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxKeyPrompt caps what of a plain prompt or input a key reads.
const maxKeyPrompt = 4 << 10

// AffinityKey is a conversation's key, from the start of its prompt: the
// system prompt and the messages up to the first user message (chat, the
// Messages API, a Responses API input list), or the first 4 KiB of a
// plain prompt or input. Every turn of a conversation starts alike, and
// so has the same key; conversations that share only their system prompt
// have different ones. 0: the request has no prompt to key.
func (r *Request) AffinityKey() uint64 {
	crc, n := uint32(0), 0
	add := func(b []byte) {
		crc, n = crc32.Update(crc, castagnoli, b), n+len(b)
	}
	add(r.System)
	switch {
	case len(r.Messages) > 0 && r.Messages[0] == '[':
		add(untilFirstUser(r.Messages))
	case len(r.Input) > 0 && r.Input[0] == '[':
		add(untilFirstUser(r.Input))
	case len(r.Prompt) > 0:
		add(r.Prompt[:min(len(r.Prompt), maxKeyPrompt)])
	case len(r.Input) > 0:
		add(r.Input[:min(len(r.Input), maxKeyPrompt)])
	}
	if n == 0 {
		return 0
	}
	return (uint64(crc)<<32 | uint64(uint32(n))) | 1
}

// SessionKey is the key of a conversation a client names (a session id):
// never a prompt's key.
func SessionKey(name string) uint64 {
	crc := crc32.Update(0, castagnoli, []byte("session\x00"))
	crc = crc32.Update(crc, castagnoli, []byte(name))
	return (uint64(crc)<<32 | uint64(uint32(len(name)))<<1) | 1
}

// untilFirstUser is a message list's start up to the end of its first
// user message (all of it if it has none).
func untilFirstUser(list []byte) []byte {
	end := len(list)
	jsonscan.ArrayValues(list, func(i int) int {
		after, ok := jsonscan.SkipValue(list, i, jsonscan.MaxNesting)
		if !ok {
			return len(list)
		}
		if isUser(list, i) {
			end = after
			return len(list) // no further
		}
		return after
	})
	return list[:end]
}

// isUser reports whether the value at i is a message of role user.
func isUser(list []byte, i int) bool {
	user := false
	if list[i] == '{' {
		jsonscan.ObjectFields(list, i, jsonscan.MaxNesting, func(k, v []byte, _ int) {
			if string(k) == "role" {
				user = string(v) == `"user"`
			}
		})
	}
	return user
}
