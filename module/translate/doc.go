// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package translate carries Anthropic's Messages API over an upstream that
// speaks only OpenAI's chat completions: a Messages request as a chat
// request (ToChat), a chat answer as a message (Answer), and a chat
// completion stream as the Messages API's named events (Stream).
//
// What chat cannot carry (extended thinking, documents, Anthropic's own
// tools, an unknown field) is a loss: Losses names each, so that a target
// can be passed over before the request is sent, and ToChat drops them
// only when told to (Options.Lossy). A prompt-caching hint (cache_control)
// and a service tier change no answer, and are left out without being a
// loss; a tool result's is_error is carried by its text only.
//
// The package is pure: bytes in, bytes out, no I/O.
package translate
