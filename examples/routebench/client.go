// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// result is one request's outcome as the client saw it.
type result struct {
	status  int           // the HTTP status; 0 when none came
	err     error         // anything but a whole 200 stream with content and usage
	ttft    time.Duration // to the first content chunk
	prompt  int           // usage.prompt_tokens
	cached  int           // usage.prompt_tokens_details.cached_tokens
	answer  string        // the assistant's content, as returned
	target  string        // X-Hybrid-Target: the group that answered (gateways only)
	retryIn time.Duration // Retry-After of a 429
}

// streamChunk is what the client reads of each event.
type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// requestTimeout bounds every request, stream included.
const requestTimeout = 30 * time.Second

func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: 0, DisableCompression: true,
		ResponseHeaderTimeout: requestTimeout,
	}}
}

// chat sends one streamed chat completion to url and reads it to its end.
func chat(ctx context.Context, client *http.Client, url, key string, body []byte) result {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode, target: resp.Header.Get("X-Hybrid-Target")}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			r.retryIn = time.Duration(s) * time.Second
		}
		r.err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return r
	}
	var answer strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	usage, done := false, false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			break
		}
		var ch streamChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			r.err = fmt.Errorf("bad event %q: %v", data, err)
			return r
		}
		if len(ch.Error) > 0 {
			r.err = fmt.Errorf("error event: %s", ch.Error)
			return r
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" && r.ttft == 0 {
				r.ttft = time.Since(start)
			}
			answer.WriteString(c.Delta.Content)
		}
		if ch.Usage != nil {
			usage = true
			r.prompt = ch.Usage.PromptTokens
			if d := ch.Usage.PromptTokensDetails; d != nil {
				r.cached = d.CachedTokens
			}
		}
	}
	r.answer = answer.String()
	switch {
	case sc.Err() != nil:
		r.err = sc.Err()
	case !done:
		r.err = errors.New("the stream ended without [DONE]")
	case r.ttft == 0:
		r.err = errors.New("no content")
	case !usage:
		r.err = errors.New("no usage chunk")
	}
	return r
}

// percentile returns the p-th percentile (0..100, nearest rank) of ds in
// milliseconds; 0 when ds is empty.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}
