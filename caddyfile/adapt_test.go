// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package caddyfile_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/hybridllm/caddy-hybrid-llm"
)

// TestAdaptFixtures runs testdata/*.caddyfiletest: a Caddyfile, a line of
// dashes, then the JSON it must adapt to, or "error: <substring>".
func TestAdaptFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, expected, ok := strings.Cut(string(data), "----------")
			if !ok {
				t.Fatal("fixture has no ---------- separator")
			}
			expected = strings.TrimSpace(expected)
			if want, isErr := strings.CutPrefix(expected, "error:"); isErr {
				_, _, err := adapt(input)
				if err == nil {
					t.Fatalf("adapted without error, want one containing %q", strings.TrimSpace(want))
				}
				if !strings.Contains(err.Error(), strings.TrimSpace(want)) {
					t.Fatalf("error %q does not contain %q", err, strings.TrimSpace(want))
				}
				return
			}
			if !caddytest.CompareAdapt(t, f, input, "caddyfile", expected) {
				t.Fail()
			}
		})
	}
}

// TestExamplesAdaptAndProvision adapts every example Caddyfile and
// provisions the result, as `caddy adapt --validate` does, with the
// upstreams' keys the examples read from the environment set.
func TestExamplesAdaptAndProvision(t *testing.T) {
	for _, v := range []string{"CLOUD_API_KEY", "CLOUD_A_API_KEY", "CLOUD_B_API_KEY", "CLOUD_C_API_KEY", "MIRROR_API_KEY", "CANARY_API_KEY"} {
		t.Setenv(v, "sk-test-placeholder")
	}
	files, err := filepath.Glob("../examples/*Caddyfile*")
	nested, _ := filepath.Glob("../examples/*/Caddyfile")
	files = append(files, nested...)
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "../examples/"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfgJSON, warnings, err := adapt(string(data))
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			for _, w := range warnings {
				t.Errorf("warning: %s", w.String())
			}
			var cfg caddy.Config
			if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
				t.Fatal(err)
			}
			if err := caddy.Validate(&cfg); err != nil {
				t.Fatalf("validate: %v", err)
			}
		})
	}
}

func adapt(input string) ([]byte, []caddyconfig.Warning, error) {
	return caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
}

// Provisioning refuses a chain, a color or a mirror that cannot work,
// saying why.
func TestProvisionRefusesBrokenChainsColorsAndMirrors(t *testing.T) {
	const groups = `
			group big {
				kind openai
				model_check off
				proxy 127.0.0.1:1
			}
			group small {
				kind openai
				model_check off
				proxy 127.0.0.1:2
			}
`
	for _, tc := range []struct{ name, alias, want string }{
		{"tier first", "tier small s\ntarget big b", "the first target is a tier"},
		{"unknown format", "target big b\ntier small s {\nformats yaml\n}", `unknown tier format "yaml"`},
		{"degrade without tiers", "target big b\ndegrade {\ncap 10%\n}", "degrade needs tiers"},
		{"bad at_cap", "target big b\ntier small s\ndegrade {\nat_cap maybe\n}", "at_cap must be refuse or allow"},
		{"color nobody may use", "target big b\ncolor canary small s", "nobody may use it"},
		{"color range", "target big b\ncolor canary small s {\ntrusted_ranges 10.0.0.0/33\n}", "neither a CIDR range nor an IP"},
		{"two colors one tag", "target big b\ncolor c small s {\ntrusted_ranges 10.0.0.0/8\n}\ncolor c big b {\ntrusted_ranges 10.0.0.0/8\n}", `color "c" twice`},
		{"mirror without timeout", "target big b\nmirror small s {\nratio 5%\ntimeout off\n}", "a mirror needs a timeout"},
		{"a working chain", "target big b\ntier small s {\nmax_tokens 100\nformats tools\n}\ndegrade {\ncap off\n}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := ":9080 {\n\thandle /v1/* {\n\t\thybrid_llm {\n" + groups + "alias a {\n" + tc.alias + "\n}\n\t\t}\n\t}\n}\n"
			cfgJSON, _, err := adapt(input)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			var cfg caddy.Config
			if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
				t.Fatal(err)
			}
			err = caddy.Validate(&cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("provisioned, want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
