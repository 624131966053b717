// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/tidwall/sjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// The choices of max_tokens_mode.
const (
	ceilingClamp  = "clamp"
	ceilingRefuse = "refuse"
)

// ceilingRefusal is a request over its client's ceiling.
type ceilingRefusal struct {
	param, msg string
}

// ceil applies a client's max_tokens and n ceilings to a request body: a
// length field over the ceiling is clamped to it (or the request refused,
// with max_tokens_mode refuse), one that is missing is set to it, and n
// over its ceiling is refused. It returns the body to send (body itself
// when nothing changed). The body's length fields and n are JSON integers
// or null: serveInference refuses any other (see protocol.Request.mistyped), so
// jsonscan.Int reads them as the upstream does.
func (c *client) ceil(body []byte, api *protocol.API) ([]byte, *ceilingRefusal) {
	fields := api.LengthFields
	if c.maxTokens <= 0 {
		fields = nil
	}
	if len(fields) == 0 && c.maxN <= 0 {
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
			return nil, &ceilingRefusal{keys[i], "the request body has more than one " + keys[i] + " field"}
		}
	}
	if raw := values[len(keys)-1]; c.maxN > 0 && raw != nil && string(raw) != "null" && jsonscan.Int(raw) > int64(c.maxN) {
		return nil, &ceilingRefusal{"n", fmt.Sprintf("n must be at most %d for this client", c.maxN)}
	}
	if c.ceilingMode == ceilingRefuse {
		for i, f := range fields {
			if raw := values[i]; raw != nil && string(raw) != "null" && jsonscan.Int(raw) > int64(c.maxTokens) {
				return nil, &ceilingRefusal{f, fmt.Sprintf("%s must be at most %d for this client", f, c.maxTokens)}
			}
		}
	}
	if len(fields) == 0 {
		return body, nil
	}
	out, _, err := clampTokens(body, fields, c.maxTokens, fields[0])
	if err != nil {
		return nil, &ceilingRefusal{fields[0], "could not apply the client's " + fields[0] + " ceiling"}
	}
	return out, nil
}

// clampTokens bounds an answer's length in a request body: a length
// field (of fields) over limit is set to it, and without any, the field
// fill is, unless fill is "". It returns the body to send (body itself
// when nothing changed) and whether it changed. Like ceil, it reads
// length fields that are JSON integers or null.
func clampTokens(body []byte, fields []string, limit int, fill string) ([]byte, bool, error) {
	out, set, changed := body, false, false
	for _, f := range fields {
		raw := fieldRaw(body, f)
		if raw == nil || string(raw) == "null" {
			continue
		}
		set = true
		if jsonscan.Int(raw) <= int64(limit) {
			continue
		}
		var err error
		if out, err = sjson.SetRawBytes(out, f, []byte(strconv.Itoa(limit))); err != nil {
			return nil, false, err
		}
		changed = true
	}
	if !set && fill != "" {
		var err error
		if out, err = sjson.SetRawBytes(out, fill, []byte(strconv.Itoa(limit))); err != nil {
			return nil, false, err
		}
		changed = true
	}
	return out, changed, nil
}

// fieldRaw returns the raw value of a top-level field, the last when it
// repeats (as an upstream decoder reads it); nil when absent.
func fieldRaw(body []byte, name string) []byte {
	var v []byte
	jsonscan.ObjectFields(body, jsonscan.SkipSpace(body, 0), jsonscan.MaxNesting, func(key, raw []byte, _ int) {
		if string(key) == name {
			v = raw
		}
	})
	return v
}
