// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The quickstart's access log, written by its hybrid_llm encoder, holds
// no client key: neither the one that authenticated (in Api-Key or
// X-Api-Key, which Caddy does not redact) nor one in a URL a header
// carries; the other headers are written as they came.
func TestQuickstartLogHoldsNoKey(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	logPath := filepath.Join(t.TempDir(), "access.log")
	loadQuickstart(t, e, func(cfg string) string {
		edited := strings.Replace(cfg, "\tlog {\n", "\tlog {\n\t\toutput file "+logPath+"\n", 1)
		if edited == cfg || !strings.Contains(cfg, "format hybrid_llm") {
			t.Fatal("the quickstart's log block has changed")
		}
		return edited
	})
	const marker = "sk-refmarker-0123456789"
	for _, h := range []string{"Api-Key", "X-Api-Key"} {
		resp, body := post(t, "/v1/chat/completions", chatBody, h, quickstartKey, "Referer", "https://app.example/chat?api_key="+marker,
			"User-Agent", "OpenAI/Python 1.99.0")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", h, resp.StatusCode, body)
		}
	}
	waitFor(t, "two access log records", func() bool {
		raw, _ := os.ReadFile(logPath)
		return strings.Count(string(raw), `"handled request"`) >= 2
	})
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), quickstartKey) || strings.Contains(string(raw), marker) {
		t.Errorf("a key in the access log: %s", raw)
	}
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var rec struct {
			Msg     string `json:"msg"`
			Request struct {
				Headers map[string][]string `json:"headers"`
			} `json:"request"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "handled request" {
			continue
		}
		n++
		h := rec.Request.Headers
		key := h["Api-Key"]
		if key == nil {
			key = h["X-Api-Key"]
		}
		if len(key) != 1 || key[0] != "REDACTED" || len(h["Referer"]) != 1 || h["Referer"][0] != "https://app.example/chat?api_key=REDACTED" ||
			len(h["User-Agent"]) != 1 || h["User-Agent"][0] != "OpenAI/Python 1.99.0" {
			t.Errorf("record %s", line)
		}
	}
	if n != 2 {
		t.Errorf("%d records: %s", n, raw)
	}
}
