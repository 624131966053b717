// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// MaxGeneratedTokens caps the number of tokens any simulated completion
// produces, whatever max_tokens or OutputTokens ask for.
const MaxGeneratedTokens = 4096

// wordText holds the generated text "tok0 tok1 tok2 …"; wordEnd[i] is the
// end offset of word i, so the text of the first n tokens is
// wordText[:wordEnd[n-1]] and token i (with its leading space for i > 0) is
// wordText[wordEnd[i-1]:wordEnd[i]]. Slicing it costs no allocation.
var wordText, wordEnd = buildWords(MaxGeneratedTokens)

func buildWords(n int) (string, []int) {
	b := make([]byte, 0, n*9)
	ends := make([]int, n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, "tok"...)
		b = strconv.AppendInt(b, int64(i), 10)
		ends[i] = len(b)
	}
	return string(b), ends
}

// GeneratedText returns the deterministic completion text of n tokens:
// "tok0 tok1 … tok<n-1>". n is clamped to [0, MaxGeneratedTokens].
func GeneratedText(n int) string {
	n = min(max(n, 0), MaxGeneratedTokens)
	if n == 0 {
		return ""
	}
	return wordText[:wordEnd[n-1]]
}

// tokenText returns token i of GeneratedText, including its leading space
// for i > 0, so that concatenating tokens 0..n-1 gives GeneratedText(n).
func tokenText(i int) string {
	if i == 0 {
		return wordText[:wordEnd[0]]
	}
	return wordText[wordEnd[i-1]:wordEnd[i]]
}

// EstimateTokens returns the simulators' prompt-token count for a request
// body: the number of characters (Unicode code points) of the prompt text
// divided by 4, rounded up, and at least 1. The prompt text is, in order of
// precedence:
//   - chat and messages: every messages[].content string, the "text" of
//     every part of a content array, a tool call's input and a tool
//     result's content; the top-level system prompt (the Messages API's)
//     and the tools' definitions;
//   - completions: "prompt" (a string or an array of strings);
//   - embeddings: "input" (a string or an array of strings).
//
// Where prompt or input holds token ids (an array of integers, or an array
// of such arrays) each id counts as one token.
func EstimateTokens(body []byte) int {
	res := gjson.GetManyBytes(body, "messages", "prompt", "input", "system", "tools")
	var chars, tokens int
	switch {
	case res[0].IsArray():
		res[0].ForEach(func(_, msg gjson.Result) bool {
			chars += contentChars(msg.Get("content"))
			return true
		})
		chars += contentChars(res[3])
		if res[4].IsArray() {
			chars += utf8.RuneCountInString(res[4].Raw)
		}
	case res[1].Exists():
		chars, tokens = countPrompt(res[1])
	case res[2].Exists():
		chars, tokens = countPrompt(res[2])
	}
	tokens += (chars + 3) / 4
	return max(tokens, 1)
}

// contentChars counts the characters of a message's content: a string, or
// the text of its parts, a tool call's input and a tool result's content.
func contentChars(c gjson.Result) int {
	chars := 0
	switch {
	case c.Type == gjson.String:
		chars += utf8.RuneCountInString(c.Str)
	case c.IsArray():
		c.ForEach(func(_, part gjson.Result) bool {
			if t := part.Get("text"); t.Type == gjson.String {
				chars += utf8.RuneCountInString(t.Str)
			}
			if in := part.Get("input"); in.IsObject() {
				chars += utf8.RuneCountInString(in.Raw)
			}
			if inner := part.Get("content"); inner.Exists() {
				chars += contentChars(inner)
			}
			return true
		})
	}
	return chars
}

// countPrompt counts the characters of string prompts and the ids of
// token-id prompts in a "prompt" or "input" value.
func countPrompt(v gjson.Result) (chars, tokens int) {
	switch {
	case v.Type == gjson.String:
		return utf8.RuneCountInString(v.Str), 0
	case v.IsArray():
		v.ForEach(func(_, e gjson.Result) bool {
			switch {
			case e.Type == gjson.String:
				chars += utf8.RuneCountInString(e.Str)
			case e.Type == gjson.Number:
				tokens++
			case e.IsArray():
				e.ForEach(func(_, id gjson.Result) bool {
					if id.Type == gjson.Number {
						tokens++
					}
					return true
				})
			}
			return true
		})
	}
	return chars, tokens
}
