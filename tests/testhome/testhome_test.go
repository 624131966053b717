// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package testhome

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func TestMain(m *testing.M) { Main(m) }

// Under Main, whatever Caddy writes by default (storage, the instance id,
// the autosaved config) lands in the tests' own temporary directory.
func TestCaddyDirectoriesAreTemporary(t *testing.T) {
	tmp := filepath.Clean(os.TempDir()) + string(filepath.Separator)
	for what, p := range map[string]string{
		"data": caddy.AppDataDir(), "config": caddy.AppConfigDir(),
		"storage": caddy.DefaultStorage.Path, "autosave": caddy.ConfigAutosavePath,
	} {
		if !strings.HasPrefix(p, tmp) || !strings.Contains(p, "hybrid-llm-home-") {
			t.Errorf("Caddy's %s is %s, outside the tests' temporary directory", what, p)
		}
	}
}
