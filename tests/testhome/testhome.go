// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package testhome keeps tests off the user's own Caddy directories: a
// test that provisions a gateway writes its ledger, and Caddy its instance
// id and autosaved config, under Caddy's data and config directories.
package testhome

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// Main runs a package's tests, as its TestMain, with HOME and the XDG
// directories pointed at a fresh temporary directory, and Caddy's default
// storage with them; it refuses to run them if Caddy would still write
// elsewhere, and removes the directory after.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit: it returns the tests' exit status.
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hybrid-llm-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testhome:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	return run(m, dir)
}

func run(m *testing.M, dir string) int {
	// the go command, should a test run it, keeps its own settings and caches
	home, _ := os.UserHomeDir()
	config, _ := os.UserConfigDir()
	cache, _ := os.UserCacheDir()
	for k, v := range map[string]string{
		"GOENV":      filepath.Join(config, "go", "env"),
		"GOCACHE":    filepath.Join(cache, "go-build"),
		"GOPATH":     filepath.Join(home, "go"),
		"GOMODCACHE": filepath.Join(home, "go", "pkg", "mod"),
	} {
		if os.Getenv(k) == "" && home != "" {
			_ = os.Setenv(k, v)
		}
	}
	for k, sub := range map[string]string{
		"HOME": "home", "XDG_DATA_HOME": "data", "XDG_CONFIG_HOME": "config", "XDG_CACHE_HOME": "cache",
		"AppData": "appdata", "USERPROFILE": "home",
	} {
		if err := os.Setenv(k, filepath.Join(dir, sub)); err != nil {
			fmt.Fprintln(os.Stderr, "testhome:", err)
			return 1
		}
	}
	// computed when Caddy's package was initialized, from the real HOME
	caddy.DefaultStorage.Path = caddy.AppDataDir()
	caddy.ConfigAutosavePath = filepath.Join(caddy.AppConfigDir(), "autosave.json")
	for what, p := range map[string]string{
		"Caddy's data directory":   caddy.AppDataDir(),
		"Caddy's config directory": caddy.AppConfigDir(),
		"Caddy's default storage":  caddy.DefaultStorage.Path,
		"Caddy's autosaved config": caddy.ConfigAutosavePath,
	} {
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			fmt.Fprintf(os.Stderr, "testhome: %s is %s, outside the tests' own %s: the tests would write into the user's\n", what, p, dir)
			return 1
		}
	}
	return m.Run()
}
