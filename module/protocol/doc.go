// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package protocol is what an inference API's requests and answers look
// like, as the gateway reads and rewrites them on their way: the facts a
// route needs of a request (Request, read in one pass by Scan: its model
// and where it is, stream, length fields, prompt size), the API of an
// endpoint (API: its length fields, whether a stream's usage can be asked
// for, what its answers count), the usage of an answer and of a stream
// (UsageScanner, over any SSE framing, OpenAI's chunks or Anthropic's
// named events), the alias put into an answer's model (ModelRewriter),
// where a stream ends and how (its [DONE], an error event, a finish_reason
// or a message_stop), and the shape of its errors (API.Errors, an
// ErrorShape: the gateway's own Error as a body and a stream event, an
// upstream's error rewritten; OpenAIErrors for the OpenAI APIs,
// AnthropicErrors for the Messages API), which API.WriteError answers
// with.
//
// It is a leaf: it imports nothing of the product but module/jsonscan,
// and nothing of Caddy. The request core gives it bytes and gets facts
// back; it never sees a route, a target or a gateway.
package protocol
