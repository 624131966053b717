// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/hybridllm/caddy-hybrid-llm/module/proclock"
	"go.uber.org/zap"
)

// A gateway process owns what it must not share with another process:
// its books (the ledger, the client books and the cloud spend it keeps in
// Caddy's storage, and their journal, keyed by the gateway's name and by Caddy's instance
// ID, which the data directory holds) and its admin address (Caddy listens
// with SO_REUSEPORT, so a second process on the same address starts
// without an error, and the kernel splits the connections between the
// two). Each is an exclusive lock on a file (package proclock), taken
// when a config is provisioned and held while a config of the process
// uses it: a reload in the same process takes it again at no cost, and a
// second process is refused with the first one's pid.

// lockBooks takes the lock (its path) on the books of gateway gw in
// Caddy's storage st, when that is a directory (file_system storage,
// Caddy's data directory by default), for a config that runs; other
// storage modules keep their own locks. owns says the config runs: its
// books are its own to keep.
func lockBooks(ctx caddy.Context, st certmagic.Storage, gw string) (owns bool, lock string, err error) {
	if !runs(ctx) {
		return false, "", nil
	}
	fs, ok := st.(*certmagic.FileStorage)
	if !ok || fs.Path == "" {
		return true, "", nil
	}
	path := filepath.Join(fs.Path, "hybrid_llm", "locks", proclock.FileName(gw)+".lock")
	pid, err := proclock.Hold(path)
	switch {
	case errors.Is(err, proclock.ErrHeld):
		return true, "", fmt.Errorf("%s runs gateway %q on the data directory %s (lock %s): two processes would keep one ledger and one cloud spend "+
			"and overwrite each other's, and in a fleet count each other's spend as their own; "+
			"stop the other process, or give this gateway another name (name <gateway>) or another storage (storage file_system { root <dir> }, or another XDG_DATA_HOME)",
			proclock.OtherProcess(pid), gw, fs.Path, path)
	case err != nil:
		return true, "", fmt.Errorf("locking the gateway's books in %s: %v", path, err)
	}
	return true, path, nil
}

// lockAdmin takes the lock on the admin address of a config that runs,
// keyed by the address in the system's temporary directory. The admin
// endpoint provisions its routers (adminAPI among them) just before it
// listens, and only for a config that runs, never for one that is only
// validated; the lock is then held for the life of the process.
func lockAdmin(ctx caddy.Context) error {
	cfg, addr, on := adminListen(ctx)
	if cfg == 0 || !on {
		return nil
	}
	runningConfig.Store(cfg)
	path, pid, err := proclock.HoldAdmin(addr)
	switch {
	case errors.Is(err, proclock.ErrHeld):
		return fmt.Errorf("%s serves the admin address %s (lock %s): Caddy would start beside it, and the two processes would "+
			"each answer a share of the admin calls and of the requests on their common addresses; "+
			"stop the other process, or give this one another admin address (admin <host:port> in the global options) and other listen addresses",
			proclock.OtherProcess(pid), addr, path)
	case errors.Is(err, fs.ErrPermission):
		// a directory that is not ours to write: the lock is a guard,
		// not a condition of running
		caddy.Log().Warn("cannot lock the admin address; a second process on it would not be refused",
			zap.String("address", addr), zap.Error(err))
		return nil
	case err != nil:
		return fmt.Errorf("locking the admin address %s in %s: %v", addr, path, err)
	}
	return nil
}

// runningConfig is the config whose admin endpoint was provisioned last:
// the one that runs, or is about to.
var runningConfig atomic.Uintptr

// runs reports whether the config being provisioned is one the process
// runs: its admin endpoint was provisioned (see lockAdmin), or it has
// none and the process is not one that only checks configs (caddy
// validate, caddy adapt --validate), which are not refused beside a
// running gateway.
func runs(ctx caddy.Context) bool {
	cfg, _, on := adminListen(ctx)
	if cfg == 0 {
		return false // a context of no config: unit tests
	}
	if on {
		return runningConfig.Load() == cfg
	}
	return len(os.Args) < 2 || (os.Args[1] != "validate" && os.Args[1] != "adapt")
}

// adminListen identifies the config being provisioned, and says its admin
// address and whether the admin endpoint is on. caddy.Context keeps its
// config to itself; it is read, never changed, through reflection, and
// where that finds no config, cfg is 0.
func adminListen(ctx caddy.Context) (cfg uintptr, listen string, on bool) {
	v := reflect.ValueOf(ctx).FieldByName("cfg")
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() {
		return 0, "", false
	}
	cfg, listen = v.Pointer(), caddy.DefaultAdminListen
	admin := v.Elem().FieldByName("Admin")
	if !admin.IsValid() || admin.Kind() != reflect.Pointer || admin.IsNil() {
		return cfg, listen, true
	}
	if d := admin.Elem().FieldByName("Disabled"); d.IsValid() && d.Kind() == reflect.Bool && d.Bool() {
		return cfg, "", false
	}
	if l := admin.Elem().FieldByName("Listen"); l.IsValid() && l.Kind() == reflect.String && l.String() != "" {
		listen = l.String()
	}
	return cfg, listen, true
}
