// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launch runs the command until the test ends and returns its base URL,
// its stderr and a function that stops it and returns its exit status.
func launch(t *testing.T, args ...string) (string, *syncBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		code := run(ctx, args, pw, stderr)
		pw.Close()
		exit <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no start line (%v); stderr: %s", err, stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`^llmsim (vllm|cloud) listening on (http://127\.0\.0\.1:\d+) serving \[(.*)\]\n$`).FindStringSubmatch(line)
	if m == nil {
		cancel()
		t.Fatalf("start line %q", line)
	}
	var once sync.Once
	code := -1
	stop := func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-exit:
			case <-time.After(10 * time.Second):
				t.Fatal("llmsim did not stop")
			}
		})
		return code
	}
	t.Cleanup(func() { stop() })
	t.Logf("%s", strings.TrimSpace(line))
	return m[2], stderr, stop
}

func request(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestVLLMCommand(t *testing.T) {
	url, stderr, stop := launch(t, "vllm", "--listen", "127.0.0.1:0", "--served-model-name", "m1",
		"--served-model-name", "m2", "--ttft", "0", "--itl", "0", "--max-num-seqs", "2", "--output-tokens", "2",
		"--kv-cache-tokens", "1600", "--scheduling-policy", "priority", "--prefill-per-token", "1ms")
	if code, body := request(t, "GET", url+"/v1/models", ""); code != 200 || !strings.Contains(body, `"id":"m2"`) {
		t.Errorf("models: %d %s", code, body)
	}
	code, body := request(t, "POST", url+"/v1/chat/completions", `{"model":"m2","messages":[{"role":"user","content":"hi"}]}`)
	if code != 200 || !strings.Contains(body, `"model":"m1"`) || !strings.Contains(body, `"content":"tok0 tok1"`) {
		t.Errorf("chat: %d %s", code, body)
	}
	// 400 characters: 100 prompt tokens of 1ms prefill each.
	begin := time.Now()
	code, body = request(t, "POST", url+"/v1/completions", `{"priority":3,"max_tokens":1,"prompt":"`+strings.Repeat("abcd", 100)+`"}`)
	if el := time.Since(begin); code != 200 || el < 100*time.Millisecond {
		t.Errorf("completion with priority 3 and 100 prompt tokens: %d after %v (want 200 after at least 100ms): %s", code, el, body)
	}
	if code, _ := request(t, "POST", url+"/_sim/health", `{"healthy":false}`); code != 200 {
		t.Errorf("control: %d", code)
	}
	if code, _ := request(t, "GET", url+"/health", ""); code != 503 {
		t.Errorf("health after control: %d", code)
	}
	if code, body := request(t, "GET", url+"/metrics", ""); code != 200 || !strings.Contains(body, `num_gpu_blocks="100"`) {
		t.Errorf("metrics without num_gpu_blocks 1600/16: %d %s", code, body)
	}
	if code, body := request(t, "POST", url+"/_sim/kv", `{"usage":0.5}`); code != 200 || !strings.Contains(body, `"kv_cache_usage_perc":[0.5]`) {
		t.Errorf("kv control: %d %s", code, body)
	}
	if _, body := request(t, "GET", url+"/metrics", ""); !strings.Contains(body, `vllm:kv_cache_usage_perc{engine="0",model_name="m1"} 0.5`+"\n") {
		t.Errorf("metrics after the kv floor: %s", body)
	}
	if code, _ := request(t, "POST", url+"/_sim/failures", `{"error_rate":1,"error_status":502}`); code != 200 {
		t.Errorf("failures control: %d", code)
	}
	if code, _ := request(t, "POST", url+"/v1/completions", `{"prompt":"x"}`); code != 502 {
		t.Errorf("completion with failures: %d", code)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit status %d", code)
	}
	if log := stderr.String(); !strings.Contains(log, `POST /v1/chat/completions model="m2" status=200 dur=`) {
		t.Errorf("access log:\n%s", log)
	}
}

// By default vllm's scheduling policy is fcfs: a priority is refused.
func TestVLLMCommandFCFS(t *testing.T) {
	url, _, _ := launch(t, "vllm", "--listen", "127.0.0.1:0", "--ttft", "0", "--itl", "0", "--quiet")
	code, body := request(t, "POST", url+"/v1/chat/completions", `{"priority":1,"messages":[{"role":"user","content":"hi"}]}`)
	if code != 400 || !strings.Contains(body, `"message":"Got priority 1 but Priority scheduling is not enabled."`) {
		t.Errorf("priority under fcfs: %d %s", code, body)
	}
}

func TestCloudCommand(t *testing.T) {
	const key = "sk-demo-secret-0001"
	url, stderr, stop := launch(t, "cloud", "--listen", "127.0.0.1:0", "--model", "gpt-4o-mini", "--model", "gpt-4o",
		"--api-key", key, "--ttft", "0", "--itl", "0", "--rate-limit", "1000", "--error-rate", "0")
	if code, _ := request(t, "POST", url+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`); code != 401 {
		t.Errorf("without key: %d", code)
	}
	code, body := request(t, "POST", url+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`, "Authorization", "Bearer "+key)
	if code != 200 || !strings.Contains(body, `"model":"gpt-4o"`) {
		t.Errorf("chat: %d %s", code, body)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit status %d", code)
	}
	log := stderr.String()
	if !strings.Contains(log, `POST /v1/chat/completions model="gpt-4o" status=401`) ||
		!strings.Contains(log, `POST /v1/chat/completions model="gpt-4o" status=200`) {
		t.Errorf("access log:\n%s", log)
	}
	if strings.Contains(log, key) || strings.Contains(log, "Authorization") {
		t.Errorf("access log reveals the key:\n%s", log)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"tgi"}, "unknown simulator"},
		{[]string{"vllm", "--listen", "0.0.0.0:8001"}, "refusing to listen"},
		{[]string{"cloud", "--listen", ":8002"}, "refusing to listen"},
		{[]string{"vllm", "--listen", "192.0.2.7:8001"}, "refusing to listen"},
		{[]string{"vllm", "--bogus"}, "flag provided but not defined"},
		{[]string{"cloud", "--error-rate", "1.5"}, "error_rate"},
		{[]string{"vllm", "extra"}, "unexpected arguments"},
		{[]string{"vllm", "--scheduling-policy", "lifo"}, "must be fcfs or priority"},
		{[]string{"vllm", "--prefill-per-token", "fast"}, "invalid value"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, stderr.String(), tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"vllm", "-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	if h := stderr.String(); !strings.Contains(h, "-served-model-name") || !strings.Contains(h, "-kv-cache-tokens") ||
		!strings.Contains(h, "-prefill-per-token") || !strings.Contains(h, "-scheduling-policy") {
		t.Errorf("-h output: %s", stderr.String())
	}
}
