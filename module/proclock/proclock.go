// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package proclock keeps what a process must not share with another one
// (a gateway's books, its admin address) to itself: each is an exclusive
// lock on a file, with the holder's pid written in it. A lock is held in
// a reload.Pool, so that the configs of one process that use it take it
// again at no cost, and the last to let go unlocks it; a second process
// is refused with the first one's pid. The kernel lets go of a lock when
// its process ends, however it ends. It is a leaf: it imports nothing of
// the product.
package proclock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// ErrHeld is what Hold returns when another process holds the lock.
var ErrHeld = errors.New("held by another process")

// locks are the locks this process holds, by file.
var locks = reload.NewPool[*heldLock]()

// heldLock is a lock file this process holds; its pid is written in it.
type heldLock struct{ f *os.File }

func (l *heldLock) Destruct() error { return unlockFile(l.f) }

// Hold takes the lock file at path for this process, making its
// directory if need be, or reports the pid of the process that holds it
// (0 when it cannot be read) with ErrHeld. A lock the process holds
// already is held once more. Each Hold that succeeded is matched by one
// Release.
func Hold(path string) (pid int, err error) {
	_, _, err = locks.Acquire(path, func() (*heldLock, error) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := tryLock(f); err != nil {
			if errors.Is(err, ErrHeld) {
				var b [32]byte
				n, _ := f.ReadAt(b[:], 0)
				_, _ = fmt.Sscan(string(b[:n]), &pid)
			}
			_ = f.Close()
			return nil, err
		}
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
		return &heldLock{f: f}, nil
	})
	return pid, err
}

// Release lets go of one hold on each of the locks at paths; the last
// hold of the process to let go unlocks it.
func Release(paths ...string) {
	for _, p := range paths {
		_ = locks.Release(p)
	}
}

// Held reports whether this process holds the lock at path.
func Held(path string) bool { return locks.Holds(path) > 0 }

// OtherProcess names the process that holds a lock, by the pid Hold
// reported (0: unknown).
func OtherProcess(pid int) string {
	if pid > 0 {
		return fmt.Sprintf("another process (pid %d)", pid)
	}
	return "another process"
}

// adminMu makes HoldAdmin one at a time.
var adminMu sync.Mutex

// HoldAdmin takes the lock on an admin address (host:port) for the life
// of the process, keyed by the address in the system's temporary
// directory: one directory per user (only one user's processes can share
// a port), one name per network namespace (only there is the port the
// same). It returns the lock's path, and what Hold returns; nil when the
// process holds it already. A socket file or a descriptor (unix/...,
// unixgram/..., fd/...), or no address, is the system's to share or not:
// it is not locked, and its path is "".
func HoldAdmin(addr string) (path string, pid int, err error) {
	if addr == "" || strings.HasPrefix(addr, "unix/") || strings.HasPrefix(addr, "unixgram/") || strings.HasPrefix(addr, "fd/") {
		return "", 0, nil
	}
	path = filepath.Join(os.TempDir(), "caddy-hybrid-llm-"+strconv.Itoa(os.Getuid()),
		"admin-"+NetNamespace()+FileName(addr)+".lock")
	adminMu.Lock()
	defer adminMu.Unlock()
	if Held(path) {
		return path, 0, nil // held already, for the life of the process
	}
	pid, err = Hold(path)
	return path, pid, err
}

// NetNamespace names the process's network namespace where the system
// says (Linux), followed by a dash; "" elsewhere.
func NetNamespace() string {
	link, err := os.Readlink("/proc/self/ns/net") // net:[4026531840]
	if err != nil {
		return ""
	}
	i, j := strings.IndexByte(link, '['), strings.IndexByte(link, ']')
	if i < 0 || j < i+2 {
		return ""
	}
	return link[i+1:j] + "-"
}

// FileName turns a name (an address, a gateway's, a registry's endpoints)
// into a file name: every byte but letters, digits, '-' and '.' becomes
// '_'.
func FileName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, s)
}
