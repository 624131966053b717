// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"strconv"

	"github.com/tidwall/sjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
)

// ClampTokens bounds an answer's length in a request body: a length
// field (of fields) over limit is set to it, and without any, the field
// fill is, unless fill is "". It returns the body to send (body itself
// when nothing changed) and whether it changed. It reads
// length fields that are JSON integers or null.
func ClampTokens(body []byte, fields []string, limit int, fill string) ([]byte, bool, error) {
	out, set, changed := body, false, false
	for _, f := range fields {
		raw := FieldRaw(body, f)
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

// FieldRaw returns the raw value of a top-level field, the last when it
// repeats (as an upstream decoder reads it); nil when absent.
func FieldRaw(body []byte, name string) []byte {
	var v []byte
	jsonscan.ObjectFields(body, jsonscan.SkipSpace(body, 0), jsonscan.MaxNesting, func(key, raw []byte, _ int) {
		if string(key) == name {
			v = raw
		}
	})
	return v
}
