// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package proclock

import "os"

// tryLock takes no lock where flock is not: the file only names the pid.
func tryLock(*os.File) error { return nil }

func unlockFile(f *os.File) error { return f.Close() }
