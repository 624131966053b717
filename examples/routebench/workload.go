// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// message is one chat message.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the body every request sends: a streamed chat
// completion that asks for its usage chunk.
type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages"`
	MaxTokens     int            `json:"max_tokens"`
	Stream        bool           `json:"stream"`
	StreamOptions map[string]any `json:"stream_options"`
}

func requestBody(model string, msgs []message, maxTokens int) []byte {
	b, err := json.Marshal(chatRequest{
		Model: model, Messages: msgs, MaxTokens: maxTokens,
		Stream: true, StreamOptions: map[string]any{"include_usage": true},
	})
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return b
}

// conversation is one user's chat: the shared system prompt, its own user
// messages (one a turn), and the answers so far.
type conversation struct {
	id       int
	users    []string
	messages []message // the history: system, user, assistant, user, ...
}

// next returns the messages of turn t (0-based): the history and the
// turn's user message.
func (c *conversation) next(t int) []message {
	return append(c.messages[:len(c.messages):len(c.messages)], message{Role: "user", Content: c.users[t]})
}

// answered records turn t's user message and the answer as returned.
func (c *conversation) answered(t int, answer string) {
	c.messages = append(c.messages, message{Role: "user", Content: c.users[t]}, message{Role: "assistant", Content: answer})
}

// workload is the seeded multi-turn workload.
type workload struct {
	system string
	convs  []*conversation
	turns  int
}

// newWorkload builds n conversations of turns turns: one shared system
// prompt of about 300 words, each conversation's own first user message
// of 50 to 100 words, and later user messages of 30 to 80 words. The same
// seed gives the same texts.
func newWorkload(seed uint64, n, turns int) *workload {
	rng := rand.New(rand.NewPCG(seed, 0x726f757465626e63))
	w := &workload{system: "You are a careful assistant for an engineering team. " + words(rng, 290), turns: turns}
	for i := range n {
		c := &conversation{id: i}
		for t := range turns {
			k := 30 + rng.IntN(51)
			if t == 0 {
				k = 50 + rng.IntN(51)
			}
			c.users = append(c.users, words(rng, k))
		}
		w.convs = append(w.convs, c)
	}
	w.reset()
	return w
}

// reset forgets the answers, for the next row.
func (w *workload) reset() {
	for _, c := range w.convs {
		c.messages = []message{{Role: "system", Content: w.system}}
	}
}

// subset returns a workload of the first n conversations (fresh).
func (w *workload) subset(n int) *workload {
	s := &workload{system: w.system, turns: w.turns}
	for _, c := range w.convs[:min(n, len(w.convs))] {
		s.convs = append(s.convs, &conversation{id: c.id, users: c.users})
	}
	s.reset()
	return s
}

// words returns k words of the vocabulary, capitalised and punctuated a
// little, as prose.
func words(rng *rand.Rand, k int) string {
	var b strings.Builder
	start := true
	for i := range k {
		if i > 0 {
			b.WriteByte(' ')
		}
		wd := vocabulary[rng.IntN(len(vocabulary))]
		if start {
			wd = strings.ToUpper(wd[:1]) + wd[1:]
			start = false
		}
		b.WriteString(wd)
		if i == k-1 || rng.IntN(12) == 0 {
			b.WriteByte('.')
			start = true
		}
	}
	return b.String()
}

var vocabulary = strings.Fields(`the a of to and in that is for it with as on be at by this from or have an
	they which one you were all we when your can said there use each she do how their if will up other about out
	many then them these so some her would make like him into time has look two more write go see number way could
	people than first water been call who oil its now find long down day did get come made may part server cache
	request latency token model prompt replica queue gateway cluster deploy rollout config metric alert budget
	window stream answer review module tenant region failover capacity schedule batch interactive priority engine
	memory kernel network storage backup restore migration version release branch commit merge test build compile
	profile trace span logger handler router policy weight health probe timeout retry circuit breaker quota limit
	invoice ledger customer support ticket incident postmortem runbook oncall pager dashboard panel graph query
	index table column schema shard partition lease election snapshot journal segment offset checkpoint`)

// workingSet returns the distinct prefix-cache blocks of all the
// conversations' final prompts (their last turn's request, the answers
// being the simulator's deterministic text of maxTokens tokens), counted
// as the simulator counts them: the raw JSON of the messages in blocks of
// 64 bytes, each keyed by everything before it. It also returns the fleet
// hit rate a cache that never evicts would give the workload, sent turn by
// turn, and the hit rate of the shared system prompt alone (what every
// replica serves from its cache once it has seen it, wherever the turns
// go).
func (w *workload) workingSet(model string, maxTokens int) (blocks int, ideal, system float64) {
	answer := simulator.GeneratedText(maxTokens)
	seen := map[uint64]bool{}  // every request's blocks
	final := map[uint64]bool{} // the last turns' blocks
	var prompt, cached, shared int
	// the bytes every prompt starts with
	common, _ := json.Marshal([]message{{Role: "system", Content: w.system}, {Role: "user"}})
	commonBlocks := bytes.Index(common, []byte(`{"role":"user"`)) / blockBytes
	// turn by turn, every conversation's turn before the next turn
	hist := make([][]message, len(w.convs))
	for i := range w.convs {
		hist[i] = []message{{Role: "system", Content: w.system}}
	}
	for t := range w.turns {
		for i, c := range w.convs {
			msgs := append(hist[i], message{Role: "user", Content: c.users[t]})
			body := requestBody(model, msgs, maxTokens)
			raw, _ := json.Marshal(msgs)
			tokens := simulator.EstimateTokens(body)
			matched := 0
			hit := true
			h := fnv.New64a()
			for j := 0; j+blockBytes <= len(raw); j += blockBytes {
				_, _ = h.Write(raw[j : j+blockBytes])
				sum := h.Sum64()
				if t == w.turns-1 {
					final[sum] = true
				}
				if seen[sum] && hit {
					matched += blockBytes
				} else {
					hit = false
					seen[sum] = true
				}
			}
			prompt += tokens
			cached += matched * tokens / len(raw) / 16 * 16
			shared += commonBlocks * blockBytes * tokens / len(raw) / 16 * 16
			hist[i] = append(msgs, message{Role: "assistant", Content: answer})
		}
	}
	return len(final), float64(cached) / float64(prompt), float64(shared) / float64(prompt)
}

// blockBytes is the simulator's prefix-cache block, in prompt bytes.
const blockBytes = 64
