// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The official OpenAI Go SDK, pointed at the gateway, sees one model,
// chat-main, wherever the request lands.
func TestOpenAISDK(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: time.Millisecond}, simulator.CloudConfig{ITL: time.Millisecond})
	e.load(defaultGateway + `
alias embed {
	target self ` + selfModel + `
}
`)
	var last *http.Response
	sdk := sdkClient("client-key-never-forwarded", &last)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := chatParams()

	t.Run("models", func(t *testing.T) {
		page, err := sdk.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, ",") != "chat-main,cloud-first,embed" {
			t.Errorf("models %v", ids)
		}
	})

	t.Run("chat", func(t *testing.T) {
		resp, err := sdk.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens != 6 {
			t.Errorf("answer %+v", resp)
		}
	})

	t.Run("stream", func(t *testing.T) {
		params := params
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := sdk.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || len(strings.Fields(acc.Choices[0].Message.Content)) != 6 || acc.Usage.CompletionTokens != 6 {
			t.Errorf("accumulated %+v", acc.ChatCompletion)
		}
	})

	t.Run("stream after fallback", func(t *testing.T) {
		_ = e.selfSrv.Refuse()
		defer func() { _ = e.selfSrv.Resume() }()
		stream := sdk.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if last.Header.Get("X-Hybrid-Target") != "cloud" || last.Header.Get("X-Hybrid-Fallback") != "true" {
			t.Errorf("target %q, fallback %q", last.Header.Get("X-Hybrid-Target"), last.Header.Get("X-Hybrid-Fallback"))
		}
	})

	t.Run("stream cut mid-way is an error", func(t *testing.T) {
		e.self.SetFailures(simulator.Failures{CutAfterChunks: 2})
		defer e.self.SetFailures(simulator.Failures{})
		stream := sdk.Chat.Completions.NewStreaming(ctx, params)
		n := 0
		for stream.Next() {
			n++
		}
		if stream.Err() == nil {
			t.Fatalf("the SDK saw a clean end after %d chunks", n)
		}
		if n != 2 {
			t.Errorf("%d chunks before the error, want 2", n)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		resp, err := sdk.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "embed",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Data) != 1 || len(resp.Data[0].Embedding) != simulator.EmbeddingDims {
			t.Errorf("embeddings %+v", resp)
		}
	})

	t.Run("unknown alias is an API error", func(t *testing.T) {
		params := params
		params.Model = "no-such-alias"
		_, err := sdk.Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err %v", err)
		}
		if apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Type != "invalid_request_error" {
			t.Errorf("error %d %q %q", apiErr.StatusCode, apiErr.Code, apiErr.Type)
		}
	})

	for _, r := range append(e.selfPosts(), e.cloudPosts()...) {
		if strings.Contains(r.Header.Get("Authorization"), "client-key") {
			t.Errorf("the client's key reached %s", r.Path)
		}
	}
}

// sdkClient is the official OpenAI Go SDK pointed at the gateway, without
// retries of its own, keeping each response (its headers) in last.
func sdkClient(key string, last **http.Response) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(gateway+"/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithResponseInto(last),
	)
}

// chatParams is a short chat completion for chat-main.
func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     "chat-main",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		MaxTokens: openai.Int(6),
	}
}
