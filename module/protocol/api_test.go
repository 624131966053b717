// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import "testing"

// A path names its API by its last segments, whatever comes before them;
// chat completions are not the legacy completions, and a path that only
// ends like an endpoint is none.
func TestForPath(t *testing.T) {
	for path, want := range map[string]*API{
		"/v1/chat/completions":        ChatCompletions,
		"/openai/v1/chat/completions": ChatCompletions,
		"/v1/completions":             Completions,
		"/v1/embeddings":              Embeddings,
		"/v1/responses":               Responses,
		"/v1/rerank":                  Other,
		"/v1/mycompletions":           Other,
		"completions":                 Other,
		"/v1/messages":                Messages,
		"/anthropic/v1/messages":      Messages,
		"/v1/messages/count_tokens":   CountTokens,
		"/v1/count_tokens":            Other,
		"/v1/mymessages":              Other,
	} {
		if got := ForPath(path); got != want {
			t.Errorf("%s: %q, want %q", path, got.Endpoint, want.Endpoint)
		}
	}
}

// What the request core reads of each API.
func TestTheAPIsFacts(t *testing.T) {
	if got := ChatCompletions.LengthFields; len(got) != 2 || got[0] != "max_completion_tokens" {
		t.Errorf("chat completions fill %v", got)
	}
	if !Completions.ShortByDefault || ChatCompletions.ShortByDefault || Responses.ShortByDefault {
		t.Error("only the legacy completions answer short by default")
	}
	if !ChatCompletions.StreamUsage || !Completions.StreamUsage || Responses.StreamUsage || Embeddings.StreamUsage {
		t.Error("stream usage is (chat) completions'")
	}
	if !Embeddings.PromptOnly || len(Embeddings.LengthFields) != 0 || len(Other.LengthFields) != 0 {
		t.Error("embeddings count prompt tokens only, and nothing bounds an unknown endpoint's answer")
	}
	if Messages.Errors != AnthropicErrors || CountTokens.Errors != AnthropicErrors || Messages.Events != EventsAnthropic ||
		!Messages.StreamEnds || Messages.StreamUsage || len(Messages.LengthFields) != 1 || !CountTokens.Free || Messages.Free {
		t.Error("the Messages API: Anthropic's errors and events, a stream that ends with message_stop, max_tokens; its token count free")
	}
}
