// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// endpoint is an inference endpoint.
type endpoint uint8

const (
	epChat endpoint = iota
	epCompletion
	epEmbedding
	epMessages    // Anthropic's Messages API, as vLLM serves it
	epCountTokens // its token count
)

// anthropic reports whether the endpoint is one of Anthropic's API.
func (ep endpoint) anthropic() bool { return ep == epMessages || ep == epCountTokens }

// dialect selects vLLM's or OpenAI's variant of the response shapes.
type dialect uint8

const (
	dialectVLLM dialect = iota
	dialectOpenAI
)

// EmbeddingDims is the length of every simulated embedding vector.
const EmbeddingDims = 8

// inferenceRequest is the part of a request body the simulators look at.
type inferenceRequest struct {
	model        string
	hasModel     bool
	stream       bool
	includeUsage bool
	maxTokens    int64 // valid when hasMaxTokens
	hasMaxTokens bool
	base64       bool // embeddings: encoding_format "base64"
	// priority is vLLM's priority field of chat, completions and
	// embeddings (default 0); vLLM's Messages API has none.
	priority int64
}

// requestError describes a request rejected before generation.
type requestError struct {
	kind  reqErrKind
	field string // errMissing, errMaxTokens: the parameter
	value int64  // errMaxTokens: the value sent
}

type reqErrKind uint8

const (
	errNone reqErrKind = iota
	errJSON
	errMissing
	errMaxTokens
)

var requiredField = [...]string{epChat: "messages", epCompletion: "prompt", epEmbedding: "input", epMessages: "messages", epCountTokens: "messages"}

// parseRequest extracts the fields the simulators use.
func parseRequest(body []byte, ep endpoint) (inferenceRequest, requestError) {
	var req inferenceRequest
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !gjson.ValidBytes(body) {
		return req, requestError{kind: errJSON}
	}
	res := gjson.GetManyBytes(body, "model", "stream", "stream_options.include_usage",
		"max_completion_tokens", "max_tokens", requiredField[ep], "encoding_format", "priority")
	if res[0].Type == gjson.String {
		req.model, req.hasModel = res[0].Str, true
	}
	req.stream = ep != epEmbedding && ep != epCountTokens && res[1].Type == gjson.True
	req.includeUsage = req.stream && res[2].Type == gjson.True
	if ep == epMessages && res[4].Type != gjson.Number {
		return req, requestError{kind: errMissing, field: "max_tokens"} // required there
	}
	if ep == epChat && res[3].Type == gjson.Number {
		req.maxTokens, req.hasMaxTokens = res[3].Int(), true
		if req.maxTokens < 1 {
			return req, requestError{kind: errMaxTokens, field: "max_completion_tokens", value: req.maxTokens}
		}
	} else if ep != epEmbedding && ep != epCountTokens && res[4].Type == gjson.Number {
		req.maxTokens, req.hasMaxTokens = res[4].Int(), true
		if req.maxTokens < 1 {
			return req, requestError{kind: errMaxTokens, field: "max_tokens", value: req.maxTokens}
		}
	}
	if f := res[5]; !f.Exists() || f.Type == gjson.Null || (ep == epChat && !f.IsArray()) {
		return req, requestError{kind: errMissing, field: requiredField[ep]}
	}
	req.base64 = res[6].Str == "base64"
	if !ep.anthropic() && res[7].Type == gjson.Number {
		req.priority = res[7].Int()
	}
	return req, requestError{}
}

// outputTokens decides how many tokens to generate and the finish reason:
// exactly max_tokens when set (capped at MaxGeneratedTokens, which then
// finishes with "stop"), otherwise defaultTokens; when the context window
// leaves less room after the prompt, that room (at least 1) with "length".
func outputTokens(req *inferenceRequest, defaultTokens, prompt, maxModelLen int) (int, string) {
	n, finish := min(defaultTokens, MaxGeneratedTokens), "stop"
	if req.hasMaxTokens {
		if req.maxTokens <= MaxGeneratedTokens {
			n, finish = int(req.maxTokens), "length"
		} else {
			n = MaxGeneratedTokens
		}
	}
	if room := maxModelLen - prompt; n > room {
		n, finish = max(room, 1), "length"
	}
	return max(n, 1), finish
}

// completion describes one response being produced.
type completion struct {
	d            dialect
	ep           endpoint
	id           string
	created      int64
	model        string
	promptTokens int
	cached       int // prompt tokens from the prefix cache; -1: not reported
	tokens       int
	finish       string
	includeUsage bool
	stream       bool
	base64       bool
	body         []byte // the request, for embeddings
	eol          string // the line ending of events, if not "\n"
}

const openAIFingerprint = "fp_0d4f3c1b9e"

// head appends the fields shared by every chat or completion event and
// body, up to and including `"choices":[`.
func (c *completion) head(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, c.id)
	b = append(b, `,"object":`...)
	switch {
	case c.ep == epChat && c.stream:
		b = append(b, `"chat.completion.chunk"`...)
	case c.ep == epChat:
		b = append(b, `"chat.completion"`...)
	default:
		b = append(b, `"text_completion"`...)
	}
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, c.model)
	if c.d == dialectOpenAI {
		b = append(b, `,"service_tier":"default","system_fingerprint":"`+openAIFingerprint+`"`...)
	}
	return append(b, `,"choices":[`...)
}

func (c *completion) appendUsage(b []byte, completionTokens int) []byte {
	total := c.promptTokens + completionTokens
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens), 10)
	if c.d == dialectVLLM {
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(total), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(completionTokens), 10)
		switch {
		case c.cached >= 0:
			b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
			b = strconv.AppendInt(b, int64(c.cached), 10)
			b = append(b, '}')
		case !c.stream:
			b = append(b, `,"prompt_tokens_details":null`...)
		}
		return append(b, '}')
	}
	if c.ep == epEmbedding {
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(total), 10)
		return append(b, '}')
	}
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(max(c.cached, 0)), 10)
	return append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

// appendFinish appends a finish_reason value ("stop", "length" or null).
func appendFinish(b []byte, finish string) []byte {
	if finish == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, finish)
}

// appendChunk appends one SSE event. token < 0 is the chat role event;
// finish is empty except on the last token.
func (c *completion) appendChunk(b, head []byte, token int, finish string) []byte {
	b = append(b, "data: "...)
	b = append(b, head...)
	if c.ep == epChat {
		b = append(b, `{"index":0,"delta":{`...)
		switch {
		case token < 0 && c.d == dialectOpenAI:
			b = append(b, `"role":"assistant","content":"","refusal":null`...)
		case token < 0:
			b = append(b, `"role":"assistant","content":""`...)
		default:
			b = append(b, `"content":`...)
			b = appendJSONString(b, tokenText(token))
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
		b = appendFinish(b, finish)
		if finish != "" && c.d == dialectVLLM {
			b = append(b, `,"stop_reason":null`...)
		}
	} else {
		b = append(b, `{"index":0,"text":`...)
		b = appendJSONString(b, tokenText(token))
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		b = appendFinish(b, finish)
		if c.d == dialectVLLM {
			b = append(b, `,"stop_reason":null`...)
		}
	}
	b = append(b, "}]"...)
	if c.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// appendUsageChunk appends the final usage event of an include_usage stream.
func (c *completion) appendUsageChunk(b, head []byte) []byte {
	b = append(b, "data: "...)
	b = append(b, head...)
	b = append(b, "],"...)
	b = c.appendUsage(b, c.tokens)
	return append(b, "}\n\n"...)
}

// appendBody appends the complete non-streamed response body.
func (c *completion) appendBody(b []byte) []byte {
	switch c.ep {
	case epEmbedding:
		return c.appendEmbeddings(b)
	case epMessages:
		return c.appendMessage(b)
	}
	b = c.head(b)
	text := GeneratedText(c.tokens)
	if c.ep == epChat {
		b = append(b, `{"index":0,"message":{"role":"assistant","content":`...)
		b = appendJSONString(b, text)
		if c.d == dialectVLLM {
			b = append(b, `,"reasoning_content":null,"tool_calls":[]},"logprobs":null,"finish_reason":`...)
		} else {
			b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":`...)
		}
		b = appendFinish(b, c.finish)
	} else {
		b = append(b, `{"index":0,"text":`...)
		b = appendJSONString(b, text)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		b = appendFinish(b, c.finish)
	}
	if c.d == dialectVLLM {
		b = append(b, `,"stop_reason":null`...)
		if c.ep == epCompletion {
			b = append(b, `,"prompt_logprobs":null`...)
		}
	}
	b = append(b, "}],"...)
	b = c.appendUsage(b, c.tokens)
	if c.d == dialectVLLM && c.ep == epChat {
		b = append(b, `,"prompt_logprobs":null`...)
	}
	return append(b, '}')
}

// appendEmbeddings appends an embeddings response: one vector per input.
func (c *completion) appendEmbeddings(b []byte) []byte {
	if c.d == dialectVLLM {
		b = append(b, `{"id":`...)
		b = appendJSONString(b, c.id)
		b = append(b, `,"object":"list","created":`...)
		b = strconv.AppendInt(b, c.created, 10)
		b = append(b, `,"model":`...)
		b = appendJSONString(b, c.model)
		b = append(b, `,"data":[`...)
	} else {
		b = append(b, `{"object":"list","data":[`...)
	}
	input := gjson.GetBytes(c.body, "input")
	idx := 0
	emit := func(raw string) {
		if idx > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(idx), 10)
		b = append(b, `,"object":"embedding","embedding":`...)
		if c.base64 {
			b = appendEmbeddingBase64(b, raw)
		} else {
			b = appendEmbeddingFloats(b, raw)
		}
		b = append(b, '}')
		idx++
	}
	// A flat array of strings or of token arrays is a batch; a string or a
	// single array of token ids is one input.
	if input.IsArray() {
		first := input.Get("0")
		if first.Type == gjson.Number {
			emit(input.Raw)
		} else {
			input.ForEach(func(_, e gjson.Result) bool {
				if e.Type == gjson.String {
					emit(e.Str)
				} else {
					emit(e.Raw)
				}
				return true
			})
		}
	} else {
		emit(input.Str)
	}
	b = append(b, "],"...)
	if c.d == dialectOpenAI {
		b = append(b, `"model":`...)
		b = appendJSONString(b, c.model)
		b = append(b, ',')
	}
	b = c.appendUsage(b, 0)
	return append(b, '}')
}

// Embedding returns the deterministic unit vector the simulators answer for
// an input string.
func Embedding(input string) [EmbeddingDims]float32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(input))
	x := h.Sum64()
	var v [EmbeddingDims]float32
	var norm float64
	for i := range v {
		// splitmix64 step
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		f := float64(z>>11)/float64(1<<53)*2 - 1
		v[i] = float32(f)
		norm += f * f
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		norm = 1
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}

// appendEmbeddingBase64 appends input's embedding as the base64 of its
// little-endian float32s, as encoding_format "base64" asks.
func appendEmbeddingBase64(b []byte, input string) []byte {
	var raw [EmbeddingDims * 4]byte
	for i, f := range Embedding(input) {
		binary.LittleEndian.PutUint32(raw[i*4:], math.Float32bits(f))
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, raw[:])
	return append(b, '"')
}

// appendEmbeddingFloats appends input's embedding as a JSON array.
func appendEmbeddingFloats(b []byte, input string) []byte {
	b = append(b, '[')
	for i, f := range Embedding(input) {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return append(b, ']')
}

// respond writes c after the first token became due: a stream of events or
// a whole body, waiting itl between tokens. cut > 0 aborts the connection as
// described for Failures.CutAfterChunks. It returns how many tokens reached
// the client (for a body: c.tokens once written) and whether the response
// completed.
func (c *completion) respond(ctx context.Context, w http.ResponseWriter, itl time.Duration, cut int) (int, bool) {
	var timer *time.Timer
	defer func() { stopTimer(timer) }()

	if c.ep == epMessages && c.stream {
		return c.respondMessages(ctx, w, itl, cut)
	}
	if !c.stream {
		if c.ep != epEmbedding && !pause(ctx, time.Duration(c.tokens-1)*itl, &timer) {
			return 0, false
		}
		body := c.appendBody(make([]byte, 0, 512+c.tokens*8))
		if cut > 0 {
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(body[:len(body)/2])
			abortConn(w)
			return 0, false
		}
		writeBody(w, http.StatusOK, body)
		return c.tokens, true
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	if c.d == dialectOpenAI {
		h.Set("Cache-Control", "no-cache")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	head := c.head(make([]byte, 0, 160))
	buf := make([]byte, 0, 512)
	events := 0
	// send writes buf as one event; it reports false when the response
	// must stop. The [DONE] sentinel does not count towards cut.
	send := func(countable bool) bool {
		out := buf
		if c.eol != "" && c.eol != "\n" {
			out = bytes.ReplaceAll(buf, []byte("\n"), []byte(c.eol))
		}
		if _, err := w.Write(out); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		if countable {
			events++
			if cut > 0 && events >= cut {
				abortConn(w)
				return false
			}
		}
		return true
	}
	if c.ep == epChat {
		buf = c.appendChunk(buf[:0], head, -1, "")
		if !send(true) {
			return 0, false
		}
	}
	for i := 0; i < c.tokens; i++ {
		if i > 0 && !pause(ctx, itl, &timer) {
			return i, false
		}
		finish := ""
		if i == c.tokens-1 {
			finish = c.finish
		}
		buf = c.appendChunk(buf[:0], head, i, finish)
		if !send(true) {
			return i + 1, false
		}
	}
	if c.includeUsage {
		buf = c.appendUsageChunk(buf[:0], head)
		if !send(true) {
			return c.tokens, false
		}
	}
	buf = append(buf[:0], "data: [DONE]\n\n"...)
	if !send(false) {
		return c.tokens, false
	}
	return c.tokens, true
}
