// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import "strings"

// API is one inference API the gateway speaks, as the request core needs
// to know it: what differs from one API's requests and answers to
// another's. The request core reads these facts and never a path.
type API struct {
	// The endpoint, the end of a request's path: "chat/completions".
	// Empty for an endpoint the gateway forwards without knowing it
	// (Other).
	Endpoint string

	// The GenAI operation, gen_ai.operation.name in traces.
	Operation string

	// The request fields that bound an answer's length, the first the one
	// a ceiling fills in when a request gives none. None: answers are not
	// bounded by the request (embeddings).
	LengthFields []string

	// A stream's usage can be asked for (stream_options.include_usage),
	// and its chunks carry a finish_reason that tells a whole answer from
	// one cut short.
	StreamUsage bool

	// A stream says when it is whole: the finish_reason of the chat and
	// completions chunks, Anthropic's message_stop, the Responses API's
	// response.completed (or response.incomplete at its length, or
	// response.failed and error, which tell their failure themselves).
	StreamEnds bool

	// How the API's streams name their events and carry the model and the
	// usage (EventsOpenAI: data-only events, the model and the usage at
	// the top of a chunk; EventsAnthropic: named events, the model in
	// message_start's message, the usage in parts).
	Events Events

	// Answers count prompt tokens only (embeddings).
	PromptOnly bool

	// Answers use no tokens and are charged nothing (a token count).
	Free bool

	// The endpoint answers a few tokens (16) when a request gives no
	// length: a tier's ceiling is no reason to ask for more (the legacy
	// completions).
	ShortByDefault bool

	// How the API's clients are told of errors.
	Errors ErrorShape
}

// Events is how an API's stream is framed and where its chunks carry the
// model and the usage.
type Events uint8

const (
	// EventsOpenAI: data-only events, each chunk's model and usage at its
	// top, a usage-only chunk and [DONE] at the end.
	EventsOpenAI Events = iota
	// EventsAnthropic: named events (message_start, content_block_*,
	// message_delta, message_stop, error), the model in message_start's
	// message, the input tokens there and the output tokens, a running
	// total, in each message_delta.
	EventsAnthropic
	// EventsResponses: the Responses API's named events (response.created,
	// response.output_text.delta, ..., response.completed), the model in
	// the response object of each lifecycle event, the usage in
	// response.completed's.
	EventsResponses
)

// The OpenAI APIs the gateway reads and meters.
var (
	ChatCompletions = &API{Endpoint: "chat/completions", Operation: "chat", StreamUsage: true, StreamEnds: true, Errors: OpenAIErrors,
		// max_completion_tokens: what OpenAI's reasoning models accept
		// (they refuse max_tokens), and vLLM too
		LengthFields: []string{"max_completion_tokens", "max_tokens"}}
	Completions = &API{Endpoint: "completions", Operation: "text_completion", StreamUsage: true, StreamEnds: true, Errors: OpenAIErrors,
		LengthFields: []string{"max_tokens"}, ShortByDefault: true}
	Embeddings = &API{Endpoint: "embeddings", Operation: "embeddings", PromptOnly: true, Errors: OpenAIErrors}
	Responses  = &API{Endpoint: "responses", Operation: "chat", LengthFields: []string{"max_output_tokens"}, Errors: OpenAIErrors,
		StreamEnds: true, Events: EventsResponses}

	// Other is an endpoint the gateway forwards and meters as it can
	// without knowing its shape (one a config's paths add).
	Other = &API{Operation: "chat", Errors: OpenAIErrors}
)

// The Anthropic APIs: Messages (what Claude Code and the Anthropic SDKs
// speak), and its token count, which generates nothing and is charged
// nothing.
var (
	Messages = &API{Endpoint: "messages", Operation: "chat", StreamEnds: true, Events: EventsAnthropic,
		Errors: AnthropicErrors, LengthFields: []string{"max_tokens"}}
	CountTokens = &API{Endpoint: "messages/count_tokens", Operation: "count_tokens", Free: true, Errors: AnthropicErrors}
)

// known are the APIs ForPath tells apart, the longest endpoint first
// where one ends another.
var known = [...]*API{ChatCompletions, Completions, Embeddings, Responses, Messages, CountTokens}

// ForPath returns the API whose endpoint the request path ends with
// ("/v1/chat/completions" is ChatCompletions); Other for any other.
func ForPath(path string) *API {
	for _, a := range known {
		if strings.HasSuffix(path, a.Endpoint) && len(path) > len(a.Endpoint) && path[len(path)-len(a.Endpoint)-1] == '/' {
			return a
		}
	}
	return Other
}
