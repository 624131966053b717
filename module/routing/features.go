// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/credentials"
	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// Rule sends a request straight to one of the alias's targets when all of
// its conditions hold; the targets after it in the list remain as
// fallbacks. Rules are evaluated in order before any upstream is tried;
// the first that matches wins.
type Rule struct {
	// The group of the target to start at (the first target of the alias
	// in that group).
	Group string `json:"group"`

	Pos string `json:"-"` // in a Caddyfile: where it is, for errors

	// Matches when the estimated prompt tokens (bytes of the text of the
	// messages, prompt or input, divided by 4) exceed this.
	PromptTokensOver int `json:"prompt_tokens_over,omitempty"`

	// Matches when max_tokens (or max_completion_tokens) exceeds this.
	MaxTokensOver int `json:"max_tokens_over,omitempty"`

	// Matches when each named request header has the given value
	// (case-insensitive).
	Header map[string]string `json:"header,omitempty"`

	// Matches when each of these top-level JSON fields is present (and
	// not null), e.g. "tools" or "response_format".
	Fields []string `json:"fields,omitempty"`

	start      int      // index of the target in the alias
	fieldBits  uint64   // the Fields protocol.Scan watches for
	slowFields []string // the others, looked up in the body
}

// Features are what routing needs to know of a request body, read with
// gjson on demand (never a full decode), from the top-level fields protocol.Scan
// found.
type Features struct {
	body         []byte
	Header       http.Header
	top          *protocol.Request
	promptTokens int // -1: not computed yet
	mediaParts   int // counted with promptTokens
}

func NewFeatures(body []byte, h http.Header, top *protocol.Request) Features {
	return Features{body: body, Header: h, top: top, promptTokens: -1}
}

// mediaPartTokens is what a media part of a prompt (an image, an audio
// clip, a file: see mediaPart) counts in the estimate limits are held to.
// Its bytes tell nothing of its tokens (a URL is a few dozen), and models
// bill one on the order of a thousand: OpenAI about 765 for a 1024x1024
// image at high detail, Anthropic about 1,600, more for a page of a PDF.
const mediaPartTokens = 1000

// prompt estimates the prompt's tokens: bytes of the messages' text,
// Anthropic's system prompt, the prompt or the input (unescaped), divided
// by 4, rounded up. The media parts it holds are counted apart (see
// PromptWithMedia).
func (f *Features) prompt() int {
	if f.promptTokens >= 0 {
		return f.promptTokens
	}
	chars, media := 0, 0
	if m := f.top.Messages; len(m) > 0 && m[0] == '[' {
		jsonscan.ArrayValues(m, func(i int) int {
			content, end := jsonscan.FieldAt(m, i, "content")
			n, k := textBytes(content)
			chars, media = chars+n, media+k
			return end
		})
	}
	for _, raw := range [...][]byte{f.top.System, f.top.Prompt, f.top.Input} {
		n, k := textBytes(raw)
		chars, media = chars+n, media+k
	}
	f.promptTokens, f.mediaParts = (chars+3)/4, media
	return f.promptTokens
}

// PromptWithMedia is prompt with each media part counted as
// mediaPartTokens.
func (f *Features) PromptWithMedia() int {
	return f.prompt() + f.mediaParts*mediaPartTokens
}

// textBytes returns the bytes of text in a value: a string, or an array
// of strings, of parts with a "text" string and of items with a
// "content" of those (the Responses API's input, an Anthropic
// tool_result); and how many media parts it holds (see mediaPart).
func textBytes(raw []byte) (n, media int) {
	switch {
	case len(raw) == 0:
		return 0, 0
	case raw[0] == '"':
		return jsonscan.UnescapedLen(raw), 0
	case raw[0] == '[':
		jsonscan.ArrayValues(raw, func(i int) int {
			switch raw[i] {
			case '"':
				end, _, _ := jsonscan.ScanString(raw, i+1)
				n += jsonscan.UnescapedLen(raw[i:end])
				return end
			case '{':
			default:
				end, _ := jsonscan.SkipValue(raw, i, jsonscan.MaxNesting)
				return end
			}
			var text, typ, content []byte
			end, _ := jsonscan.ObjectFields(raw, i, jsonscan.MaxNesting, func(k, v []byte, _ int) {
				switch string(k) { // the last of a repeated field, as decoders read it
				case "text":
					text = v
				case "type":
					typ = v
				case "content":
					content = v
				}
			})
			switch {
			case len(text) > 0 && text[0] == '"':
				n += jsonscan.UnescapedLen(text)
			case mediaPart(typ):
				media++
			case len(content) > 0 && content[0] != '{':
				// a Responses API input item: a message whose content
				// is a string or parts
				tn, tm := textBytes(content)
				n, media = n+tn, media+tm
			}
			return end
		})
		return n, media
	}
	return 0, 0
}

// mediaPart reports whether a part's type (raw JSON) is an image's, an
// audio clip's or a file's, in the chat completions, Responses or
// Anthropic Messages API.
func mediaPart(typ []byte) bool {
	switch string(typ) {
	case `"image_url"`, `"input_image"`, `"input_audio"`, `"file"`, `"input_file"`, `"image"`, `"document"`:
		return true
	}
	return false
}

// exceeds reports whether the prompt and the requested tokens overflow a
// context window. The body's length bounds the prompt's characters, so
// the messages are walked only when the body is near the window.
func (f *Features) exceeds(window int) bool {
	room := window - f.Requested() // no sum to overflow on a huge max_tokens
	if room < 0 {
		return true
	}
	if (len(f.body)+3)/4 <= room {
		return false
	}
	return f.prompt() > room
}

// Choices returns the number of choices asked for (n), at least 1.
func (f *Features) Choices() int {
	return int(min(max(f.top.N, 1), 128))
}

// Requested returns max_tokens or max_completion_tokens, or 0.
func (f *Features) Requested() int {
	return int(max(f.top.MaxTokens, 0))
}

func (r *Rule) matches(f *Features) bool {
	if r.PromptTokensOver > 0 && f.prompt() <= r.PromptTokensOver {
		return false
	}
	if r.MaxTokensOver > 0 && f.Requested() <= r.MaxTokensOver {
		return false
	}
	for name, want := range r.Header {
		if !strings.EqualFold(f.Header.Get(name), want) {
			return false
		}
	}
	if f.top.Present&r.fieldBits != r.fieldBits {
		return false
	}
	for _, field := range r.slowFields {
		if v := jsonscan.LastField(f.body, field); v == nil || string(v) == "null" {
			return false
		}
	}
	return true
}

// maxWatched is how many rule fields protocol.Scan notes; rules name few.
const maxWatched = 64

// watchedFields are the top-level fields protocol.Scan notes, in the
// order of their bits.
type watchedFields []string

// bit returns the bit protocol.Scan sets when the top-level field is
// present and not null, or 0 when maxWatched fields are watched already.
func (w *watchedFields) bit(name string) uint64 {
	i := slices.Index(*w, name)
	if i < 0 {
		if len(*w) == maxWatched {
			return 0
		}
		i = len(*w)
		*w = append(*w, name)
	}
	return 1 << i
}

func (r *Rule) Provision(s *AliasSetup, al *Alias) error {
	r.fieldBits, r.slowFields = 0, nil
	for name := range r.Header {
		if credentials.CredentialLike(name) {
			s.RuleCredentials = true
		}
	}
	for _, field := range r.Fields {
		if bit := s.Watch.bit(field); bit != 0 {
			r.fieldBits |= bit
		} else {
			r.slowFields = append(r.slowFields, field)
		}
	}
	for i, t := range al.Targets {
		if t.Group == r.Group {
			r.start = i
			if r.PromptTokensOver < 0 || r.MaxTokensOver < 0 {
				return fmt.Errorf("route to %q: thresholds must not be negative", r.Group)
			}
			if r.PromptTokensOver == 0 && r.MaxTokensOver == 0 && len(r.Header) == 0 && len(r.Fields) == 0 {
				return fmt.Errorf("route to %q has no condition", r.Group)
			}
			return nil
		}
	}
	return fmt.Errorf("route to %q: the alias has no target in that group", r.Group)
}

// Plan returns the targets to try, in order: from the first matching
// rule's target on, or all of them.
func (al *Alias) Plan(f *Features) ([]*Target, *Rule) {
	for _, r := range al.Routes {
		if r.matches(f) {
			return al.Targets[r.start:], r
		}
	}
	return al.Targets, nil
}
