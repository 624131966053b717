// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package jsonscan validates JSON and finds values in it in one pass, without
// recursion and without allocating: the request body's hot path.
//
// It is a leaf: it imports nothing of the product.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// A request body is checked and read in one pass: ObjectFields validates
// an object (RFC 8259's grammar, as encoding/json.Valid and
// gjson.Valid do; UTF-8 is not checked) and records where its top-level
// fields are. It is the gateway's own because it is the hot path: gjson's
// validator runs at about 0.8 GB/s and recurses once per nesting level,
// so a body of a few MB of '[' overflows the goroutine stack and kills
// the process; this one skips string contents eight bytes at a time and
// refuses nesting deeper than MaxNesting. Values are still read with
// gjson, from the spans found here.

// MaxNesting is the deepest nesting of arrays and objects accepted, as in
// encoding/json.
const MaxNesting = 10000

// ObjectFields validates the object at i, no more than depth levels deep,
// and calls fn with each of its fields: the key (unescaped), the value
// and the value's offset. It returns the offset after the object.
func ObjectFields(data []byte, i, depth int, fn func(key, raw []byte, at int)) (int, bool) {
	if i >= len(data) || data[i] != '{' {
		return i, false
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, false
		}
		ks := i
		end, escaped, ok := ScanString(data, i+1)
		if !ok {
			return end, false
		}
		key := data[ks+1 : end-1]
		if escaped {
			key = []byte(gjson.ParseBytes(data[ks:end]).Str)
		}
		i = SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return i, false
		}
		vs := SkipSpace(data, i+1)
		ve, ok := SkipValue(data, vs, depth-1) // the object is a level
		if !ok {
			return ve, false
		}
		fn(key, data[vs:ve], vs)
		i = SkipSpace(data, ve)
		if i >= len(data) {
			return i, false
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// ArrayValues calls each with the offset of each value of a valid JSON
// array; each returns the offset after the value.
func ArrayValues(data []byte, each func(i int) int) {
	i := SkipSpace(data, 1)
	for i < len(data) && data[i] != ']' {
		i = SkipSpace(data, each(i))
		if i >= len(data) || data[i] != ',' {
			return
		}
		i = SkipSpace(data, i+1)
	}
}

// FieldAt returns the last field named key of the value at i (the one
// decoders keep), if that is an object (nil otherwise), and the offset
// after the value: one pass.
func FieldAt(data []byte, i int, key string) (raw []byte, end int) {
	if data[i] != '{' {
		end, _ = SkipValue(data, i, MaxNesting)
		return nil, end
	}
	end, _ = ObjectFields(data, i, MaxNesting, func(k, v []byte, _ int) {
		if string(k) == key {
			raw = v
		}
	})
	return raw, end
}

// LastField returns the value of the last top-level field named key of a
// valid JSON object (the one decoders keep), or nil.
func LastField(body []byte, key string) []byte {
	var v []byte
	ObjectFields(body, SkipSpace(body, 0), MaxNesting, func(k, raw []byte, _ int) {
		if string(k) == key {
			v = raw
		}
	})
	return v
}

// UnescapedLen returns the length in bytes of a valid JSON string (quotes
// included) once unescaped. Each half of a surrogate pair counts 2.
func UnescapedLen(raw []byte) int {
	s := raw[1 : len(raw)-1]
	n := len(s)
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 || i+1 >= len(s) {
			return n
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			r, _ := strconv.ParseUint(string(s[i+2:i+6]), 16, 32)
			size := utf8.RuneLen(rune(r))
			if size < 0 {
				size = 2 // a surrogate
			}
			n -= 6 - size
			s = s[i+6:]
			continue
		}
		n--
		s = s[i+2:]
	}
}

// Int reads an integer value, leniently like gjson (256.0, "256").
func Int(raw []byte) int64 {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n
	}
	return gjson.ParseBytes(raw).Int()
}

func SkipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SWAR constants: a byte of a word is '"', '\\' or a control character
// exactly when specialBytes reports it.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func specialBytes(w uint64) uint64 {
	// (x - ones) &^ x & highs flags the zero bytes of x (the lowest one
	// exactly); x is w with '"' or '\\' xored away, or w less 0x20 for
	// the control characters. The three x have w's high bits, so one
	// &^ w serves them all.
	q, b := w^(ones*'"'), w^(ones*'\\')
	return ((q - ones) | (b - ones) | (w - ones*0x20)) &^ w & highs
}

// ScanString reads a string whose opening quote is just before i. It
// returns the offset after the closing quote and whether the string has
// escapes.
func ScanString(data []byte, i int) (end int, escaped, ok bool) {
	for {
		// to the next special byte, sixteen bytes at a time: the lowest
		// flagged byte of a word is always a special one
		for i+16 <= len(data) {
			m1 := specialBytes(binary.LittleEndian.Uint64(data[i:]))
			m2 := specialBytes(binary.LittleEndian.Uint64(data[i+8:]))
			if m1|m2 != 0 {
				if m1 != 0 {
					i += bits.TrailingZeros64(m1) >> 3
				} else {
					i += 8 + bits.TrailingZeros64(m2)>>3
				}
				break
			}
			i += 16
		}
		if i >= len(data) {
			return i, escaped, false
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				return i, escaped, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) || !isHex(data[i+5]) {
					return i, escaped, false
				}
				i += 6
			default:
				return i, escaped, false
			}
		case c < 0x20:
			return i, escaped, false
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// SkipValue validates the value at i and returns the offset after it. It
// walks nested arrays and objects with a stack of its own, not recursion,
// and refuses more than depth levels of them.
func SkipValue(data []byte, i, depth int) (int, bool) {
	var inline [64]byte
	stack := inline[:0] // the open containers: '[' or '{'
	for {
		// a value is expected at i
		if i >= len(data) {
			return i, false
		}
		switch c := data[i]; c {
		case '{', '[':
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if len(stack) == depth {
				return i, false
			}
			i = SkipSpace(data, i+1)
			if i < len(data) && data[i] == closer {
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				var ok bool
				if i, ok = skipKey(data, i); !ok {
					return i, false
				}
			}
			continue
		case '"':
			var ok bool
			if i, _, ok = ScanString(data, i+1); !ok {
				return i, false
			}
		case 't':
			if !hasWord(data, i, "true") {
				return i, false
			}
			i += 4
		case 'f':
			if !hasWord(data, i, "false") {
				return i, false
			}
			i += 5
		case 'n':
			if !hasWord(data, i, "null") {
				return i, false
			}
			i += 4
		default:
			var ok bool
			if i, ok = skipNumber(data, i); !ok {
				return i, false
			}
		}
		// after a value: close containers, or find the next value
		for {
			if len(stack) == 0 {
				return i, true
			}
			i = SkipSpace(data, i)
			if i >= len(data) {
				return i, false
			}
			open := stack[len(stack)-1]
			if c := data[i]; c == ',' {
				i = SkipSpace(data, i+1)
				if open == '{' {
					var ok bool
					if i, ok = skipKey(data, i); !ok {
						return i, false
					}
				}
				break
			} else if open == '{' && c == '}' || open == '[' && c == ']' {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			return i, false
		}
	}
}

// skipKey reads an object key and its colon, and returns the offset of
// the value.
func skipKey(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return i, false
	}
	i, _, ok := ScanString(data, i+1)
	if !ok {
		return i, false
	}
	i = SkipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return i, false
	}
	return SkipSpace(data, i+1), true
}

func hasWord(data []byte, i int, word string) bool {
	return len(data)-i >= len(word) && string(data[i:i+len(word)]) == word
}

// skipNumber reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(data []byte, i int) (int, bool) {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return i, false
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
