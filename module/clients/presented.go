// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"net/http"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/credentials"
)

// Presented returns the API key a request carries, or why it carries
// none that can be used. A key may come in more than one header only if
// it is the same key.
func Presented(h http.Header) (key, problem string) {
	if v, ok := h["Authorization"]; ok {
		if len(v) != 1 {
			return "", "more than one Authorization header"
		}
		scheme, k, _ := strings.Cut(v[0], " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", "the Authorization header is not `Bearer <key>`"
		}
		if key = strings.TrimSpace(k); key == "" {
			return "", "the Authorization header has no key"
		}
	}
	for _, name := range credentials.KeyHeaders {
		v, ok := h[name]
		if !ok {
			continue
		}
		if len(v) != 1 || strings.TrimSpace(v[0]) == "" {
			return "", "the " + name + " header must hold one key"
		}
		switch k := strings.TrimSpace(v[0]); {
		case key == "":
			key = k
		case k != key:
			return "", "two different API keys in one request"
		}
	}
	switch {
	case key == "":
		return "", "no API key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`"
	case len(key) > MaxKeyLength:
		return "", "the API key is too long"
	}
	return key, ""
}
