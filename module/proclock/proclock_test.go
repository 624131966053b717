// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package proclock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// other takes the lock at path as another process would: flock locks an
// open file, so a second open of it in this process stands for one.
func other(t *testing.T, path string, pid int) (release func()) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := tryLock(f); err != nil {
		t.Fatalf("the other process's lock: %v", err)
	}
	if pid > 0 {
		_, _ = f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0)
	}
	return func() { _ = unlockFile(f) }
}

// A lock is held by the process with its pid in it, as many times as it
// is taken, and unlocked after the last release.
func TestHoldRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks", "g.lock")
	for range 2 {
		if pid, err := Hold(path); err != nil || pid != 0 {
			t.Fatalf("hold: pid %d, %v", pid, err)
		}
	}
	if !Held(path) {
		t.Fatal("not held")
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Fatalf("the lock file holds %q (%v), want the pid", b, err)
	}
	Release(path)
	if !Held(path) {
		t.Fatal("let go with one hold left")
	}
	f, _ := os.Open(path)
	if err := tryLock(f); !errors.Is(err, ErrHeld) {
		t.Fatalf("another process locked it while held: %v", err)
	}
	_ = f.Close()
	Release(path)
	if Held(path) {
		t.Fatal("held after the last release")
	}
	other(t, path, 0)()
}

// A lock another process holds is refused with its pid.
func TestHeldByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.lock")
	release := other(t, path, 4242)
	pid, err := Hold(path)
	if !errors.Is(err, ErrHeld) || pid != 4242 {
		t.Fatalf("pid %d, %v; want 4242, %v", pid, err, ErrHeld)
	}
	if Held(path) {
		t.Fatal("a refused lock is held")
	}
	release()
	if _, err := Hold(path); err != nil {
		t.Fatalf("once the other let go: %v", err)
	}
	Release(path)
}

func TestOtherProcess(t *testing.T) {
	if got := OtherProcess(4242); got != "another process (pid 4242)" {
		t.Errorf("%q", got)
	}
	if got := OtherProcess(0); got != "another process" {
		t.Errorf("%q", got)
	}
}

// The admin address is locked once for the life of the process, under
// the user's directory and the network namespace; a socket is not.
func TestHoldAdmin(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	for _, addr := range []string{"", "unix//run/caddy.sock", "unixgram//run/c.sock", "fd/3"} {
		if path, pid, err := HoldAdmin(addr); path != "" || pid != 0 || err != nil {
			t.Errorf("%q: %q %d %v", addr, path, pid, err)
		}
	}
	path, pid, err := HoldAdmin("localhost:2019")
	want := filepath.Join(os.TempDir(), "caddy-hybrid-llm-"+strconv.Itoa(os.Getuid()), "admin-"+NetNamespace()+"localhost_2019.lock")
	if path != want || pid != 0 || err != nil {
		t.Fatalf("%q %d %v, want %q", path, pid, err, want)
	}
	if path2, _, err := HoldAdmin("localhost:2019"); path2 != path || err != nil {
		t.Fatalf("again: %q %v", path2, err)
	}
	if n := locks.Holds(path); n != 1 {
		t.Fatalf("held %d times, want once", n)
	}
	Release(path)

	held := "127.0.0.1:2999"
	release := other(t, filepath.Join(os.TempDir(), "caddy-hybrid-llm-"+strconv.Itoa(os.Getuid()), "admin-"+NetNamespace()+FileName(held)+".lock"), 77)
	defer release()
	if _, pid, err := HoldAdmin(held); !errors.Is(err, ErrHeld) || pid != 77 {
		t.Fatalf("held elsewhere: pid %d, %v", pid, err)
	}
}

func TestNetNamespace(t *testing.T) {
	ns := NetNamespace()
	if _, err := os.Readlink("/proc/self/ns/net"); err != nil {
		if ns != "" {
			t.Fatalf("%q without /proc", ns)
		}
		return
	}
	if n, ok := strings.CutSuffix(ns, "-"); !ok || n == "" || strings.ContainsAny(n, "[]:") {
		t.Fatalf("%q", ns)
	}
}

func TestFileName(t *testing.T) {
	if got := FileName("[::1]:2019/x y.Z-9"); got != "___1__2019_x_y.Z-9" {
		t.Errorf("%q", got)
	}
}
