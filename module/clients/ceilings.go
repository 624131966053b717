// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"fmt"
	"slices"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// The choices of max_tokens_mode.
const (
	Clamp  = "clamp"
	Refuse = "refuse"
)

// Ceilings bound what one request of a client may ask for.
type Ceilings struct {
	// The most tokens an answer may ask for; 0: no ceiling.
	MaxTokens int
	// The most answers (n); 0: no ceiling.
	MaxN int
	// Clamp (or "") lowers a length over MaxTokens, Refuse refuses it.
	Mode string
}

// Active reports whether there is any ceiling to apply.
func (c Ceilings) Active() bool { return c.MaxTokens > 0 || c.MaxN > 0 }

// Refusal is a request over its client's ceiling: the parameter, and
// what the client is told.
type Refusal struct {
	Param, Msg string
}

// Apply applies a client's max_tokens and n ceilings to a request body: a
// length field over the ceiling is clamped to it (or the request refused,
// with max_tokens_mode refuse), one that is missing is set to it, and n
// over its ceiling is refused. It returns the body to send (body itself
// when nothing changed). The body's length fields and n are JSON integers
// or null: the gateway refuses any other before (see protocol.Request), so
// jsonscan.Int reads them as the upstream does.
func (c Ceilings) Apply(body []byte, api *protocol.API) ([]byte, *Refusal) {
	fields := api.LengthFields
	if c.MaxTokens <= 0 {
		fields = nil
	}
	if len(fields) == 0 && c.MaxN <= 0 {
		return body, nil
	}
	// the values as an upstream decoder reads them (the last of a
	// repeated field), and how often each field is given: the length
	// fields, then n
	keys := append(fields[:len(fields):len(fields)], "n")
	var counts [4]int
	var values [4][]byte
	jsonscan.ObjectFields(body, jsonscan.SkipSpace(body, 0), jsonscan.MaxNesting, func(key, raw []byte, _ int) {
		if i := slices.Index(keys, string(key)); i >= 0 {
			counts[i]++
			values[i] = raw
		}
	})
	for i, n := range counts[:len(keys)] {
		if n > 1 {
			return nil, &Refusal{keys[i], "the request body has more than one " + keys[i] + " field"}
		}
	}
	if raw := values[len(keys)-1]; c.MaxN > 0 && raw != nil && string(raw) != "null" && jsonscan.Int(raw) > int64(c.MaxN) {
		return nil, &Refusal{"n", fmt.Sprintf("n must be at most %d for this client", c.MaxN)}
	}
	if c.Mode == Refuse {
		for i, f := range fields {
			if raw := values[i]; raw != nil && string(raw) != "null" && jsonscan.Int(raw) > int64(c.MaxTokens) {
				return nil, &Refusal{f, fmt.Sprintf("%s must be at most %d for this client", f, c.MaxTokens)}
			}
		}
	}
	if len(fields) == 0 {
		return body, nil
	}
	out, _, err := protocol.ClampTokens(body, fields, c.MaxTokens, fields[0])
	if err != nil {
		return nil, &Refusal{fields[0], "could not apply the client's " + fields[0] + " ceiling"}
	}
	return out, nil
}
