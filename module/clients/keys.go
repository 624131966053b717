// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
)

// MaxKeyLength bounds an API key; longer ones are refused before they are
// hashed.
const MaxKeyLength = 4 << 10

// KeyHash is the SHA-256 of an API key: what the gateway keeps of a key.
type KeyHash [sha256.Size]byte

// HashOf hashes a presented key in place: the key is never copied.
func HashOf(key string) KeyHash {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// ParseKey returns the hash of a configured key: `sha256:<hex>`, or a key
// (after repl has replaced its placeholders).
func ParseKey(repl *caddy.Replacer, key string) (KeyHash, error) {
	var h KeyHash
	if hx, ok := strings.CutPrefix(key, "sha256:"); ok {
		b, err := hex.DecodeString(hx)
		if err != nil || len(b) != len(h) {
			return h, fmt.Errorf("sha256: wants 64 hex digits")
		}
		copy(h[:], b)
		return h, nil
	}
	k := repl.ReplaceKnown(key, "")
	switch {
	case k == "":
		return h, fmt.Errorf("the key %s is empty", key)
	case len(k) > MaxKeyLength:
		return h, fmt.Errorf("the key is longer than %d bytes", MaxKeyLength)
	case strings.TrimSpace(k) != k || strings.ContainsAny(k, " \t\r\n"):
		return h, fmt.Errorf("the key has spaces")
	}
	return sha256.Sum256([]byte(k)), nil
}

// WithKeys adds the clients of `name=key` pairs to the configured ones: a
// name that has settings gets the key, others become clients of their
// own. The configured clients are left as they are.
func WithKeys(configured map[string]*Client, pairs string) (map[string]*Client, error) {
	fields := strings.Fields(pairs)
	if len(fields) == 0 {
		return configured, nil
	}
	out := make(map[string]*Client, len(configured)+len(fields))
	for name, c := range configured {
		out[name] = c
	}
	for _, f := range fields {
		name, key, ok := strings.Cut(f, "=")
		if !ok || name == "" || key == "" {
			return nil, fmt.Errorf("want name=key pairs separated by spaces, got a pair without a name or key")
		}
		if strings.ContainsAny(key, ",;") && strings.Contains(key, "=") {
			// "a=k1,b=k2": one client whose key would be "k1,b=k2"
			return nil, fmt.Errorf("client %q: its key holds another name=key pair: separate the pairs with spaces, not commas", name)
		}
		c, found := out[name]
		switch {
		case !found:
			out[name] = &Client{Key: key}
		case c.Key != "":
			return nil, fmt.Errorf("client %q has a key already", name)
		default:
			cc := *c
			cc.Key = key
			out[name] = &cc
		}
	}
	return out, nil
}

// IsPlaceholder reports whether s is one placeholder, such as {env.NAME}.
func IsPlaceholder(s string) bool {
	return len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && strings.Count(s, "{") == 1 && strings.Count(s, "}") == 1
}
