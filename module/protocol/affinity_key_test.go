// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"strconv"
	"strings"
	"testing"
)

// A conversation's turns have one key: the system prompt and the messages
// to the first user message; conversations that share only the system
// prompt have different keys; in every API's shape.
func TestAffinityKey(t *testing.T) {
	system := strings.Repeat("You are a careful coding agent. ", 100)
	chat := func(first string, more ...string) string {
		msgs := `{"role":"system","content":"` + system + `"},{"role":"user","content":"` + first + `"}`
		for _, m := range more {
			msgs += `,{"role":"assistant","content":"ok"},{"role":"user","content":"` + m + `"}`
		}
		return `{"model":"m","messages":[` + msgs + `]}`
	}
	anthropic := func(first string, more ...string) string {
		msgs := `{"role":"user","content":[{"type":"text","text":"` + first + `"}]}`
		for _, m := range more {
			msgs += `,{"role":"assistant","content":"ok"},{"role":"user","content":"` + m + `"}`
		}
		return `{"model":"m","max_tokens":9,"system":[{"type":"text","text":"` + system + `"}],"messages":[` + msgs + `]}`
	}
	responses := func(first string, more ...string) string {
		items := `{"role":"user","content":"` + first + `"}`
		for _, m := range more {
			items += `,{"role":"assistant","content":"ok"},{"role":"user","content":"` + m + `"}`
		}
		return `{"model":"m","instructions":"x","input":[` + items + `]}`
	}
	key := func(body string) uint64 {
		top, _ := Scan([]byte(body))
		return top.AffinityKey()
	}
	for name, shape := range map[string]func(string, ...string) string{"chat": chat, "messages": anthropic, "responses": responses} {
		a1, a2, a3 := key(shape("fix the parser")), key(shape("fix the parser", "and the tests")), key(shape("fix the parser", "and the tests", "now"))
		b := key(shape("write the docs"))
		if a1 == 0 || a1 != a2 || a2 != a3 || a1 == b {
			t.Errorf("%s: turns %x %x %x, another conversation %x", name, a1, a2, a3, b)
		}
	}
	if key(`{"model":"m","prompt":"once upon a time"}`) == key(`{"model":"m","prompt":"once upon a midnight"}`) || key(`{"model":"m"}`) != 0 {
		t.Error("completions: prompts told apart; none, no key")
	}
}

// A session a client names has a key of its own, never a prompt's.
func TestSessionKey(t *testing.T) {
	if SessionKey("s-1") != SessionKey("s-1") || SessionKey("s-1") == SessionKey("s-2") || SessionKey("s-1") == 0 {
		t.Error("sessions told apart, each alike")
	}
	top, _ := Scan([]byte(`{"model":"m","prompt":"s-1"}`))
	if top.AffinityKey() == SessionKey("s-1") {
		t.Error("a session's key is a prompt's")
	}
}

func BenchmarkAffinityKey(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("x", size) + `"},{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`)
		top, _ := Scan(body)
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if top.AffinityKey() == 0 {
					b.Fatal("no key")
				}
			}
		})
	}
}
