// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "errors"

// pinning is Linux's only (sched_setaffinity).
type pinning struct{}

func newPinning(string) (*pinning, error) { return nil, errors.New("-pin needs Linux") }

func (*pinning) proxyEnv() []string { return nil }

func (*pinning) pin(int) error { return nil }

func (*pinning) String() string { return "" }
