// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "os/exec"

// dieWithParent is Linux's only (PR_SET_PDEATHSIG); elsewhere the run
// kills its Caddys as it ends.
func dieWithParent(*exec.Cmd) {}
