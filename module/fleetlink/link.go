// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package fleetlink is a gateway's tie to a registry: its config (the
// etcd endpoints, prefix, TLS), its membership in the fleet, the
// registry's snapshots applied to its groups (drains, endpoints, shares)
// and aliases (weights), and its spend book there. The request path never
// calls etcd: it reads what the last snapshot set.
//
// It must not import the request core nor the Caddy face (package
// hybridllm).
package fleetlink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// RegistryConfig is where several gateways share their runtime state: an
// etcd cluster, watched. Drains and weights set through the admin API (or
// with etcdctl under the prefix) reach every gateway of the fleet within
// the watch's delay, without a reload; structure and credentials stay in
// each gateway's config. The request path never calls etcd: it reads what
// the watcher last applied. With etcd unreachable, the last snapshot
// applied (kept in Caddy's storage) stays, and requests are served
// as before.
type RegistryConfig struct {
	// etcd's client URLs, as etcdctl's --endpoints.
	Endpoints []string `json:"endpoints"`

	// The keys' prefix. Default: /hybrid-llm/<gateway name>.
	Prefix string `json:"prefix,omitempty"`

	// etcd's user and password, if it authenticates (placeholders such
	// as {env.ETCD_PASSWORD} are resolved at start-up).
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	// How long to wait for etcd when connecting. Default: 5s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`

	// TLS to etcd (https:// endpoints): a private CA, and a client
	// certificate when etcd asks for one.
	TLS *RegistryTLS `json:"tls,omitempty"`
}

// RegistryTLS is how the gateway speaks TLS to etcd.
type RegistryTLS struct {
	// PEM files: the CA that signed etcd's certificate (default: the
	// system's roots), and the client certificate and its key.
	CA   string `json:"ca,omitempty"`
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
	// The name etcd's certificate must carry. Default: the endpoint's host.
	ServerName string `json:"server_name,omitempty"`
}

// Config builds the TLS configuration.
func (rt *RegistryTLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: rt.ServerName}
	if rt.CA != "" {
		pem, err := os.ReadFile(rt.CA)
		if err != nil {
			return nil, fmt.Errorf("registry tls ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry tls ca %s: no PEM certificate in it", rt.CA)
		}
		cfg.RootCAs = pool
	}
	if (rt.Cert == "") != (rt.Key == "") {
		return nil, fmt.Errorf("registry tls: cert and key go together")
	}
	if rt.Cert != "" {
		pair, err := tls.LoadX509KeyPair(rt.Cert, rt.Key)
		if err != nil {
			return nil, fmt.Errorf("registry tls: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Link is a gateway's tie to its registry: the fleet it is a
// member of, what it applied of the registry's snapshots to its groups
// and aliases, and its spend book there.
type Link struct {
	Fleet   *fleet.Fleet
	sub     *fleet.Subscription
	Book    *money.FleetBook             // with a spend book: the process's book in the registry
	Share   *atomic.Pointer[fleet.Share] // its place among the live gateways, as last applied
	Gateway string
	Groups  map[string]*upstream.Group
	Aliases map[string]*routing.Alias
	Logger  *zap.Logger

	mu      sync.Mutex   // one snapshot applied at a time
	Rev     atomic.Int64 // the revision last applied
	notes   sync.Map     // names the registry has and the gateway lacks, logged
	weights sync.Map     // alias|group: the weight last set from the registry
}

func (rc *RegistryConfig) prefix(gw string) string {
	if rc.Prefix != "" {
		return strings.TrimSuffix(rc.Prefix, "/")
	}
	return "/hybrid-llm/" + gw
}

// Options are the fleet's options of gateway gw (st: where the fleet
// keeps its snapshot), the registry's placeholders replaced.
func (rc *RegistryConfig) Options(gw string, st certmagic.Storage, logger *zap.Logger) (fleet.Options, error) {
	if len(rc.Endpoints) == 0 {
		return fleet.Options{}, fmt.Errorf("registry: no etcd endpoints")
	}
	repl := caddy.NewReplacer()
	endpoints := make([]string, 0, len(rc.Endpoints))
	for _, e := range rc.Endpoints {
		for _, e := range strings.FieldsFunc(repl.ReplaceAll(e, ""), func(r rune) bool { return r == ',' || r == ' ' }) {
			endpoints = append(endpoints, e)
		}
	}
	if len(endpoints) == 0 {
		return fleet.Options{}, fmt.Errorf("registry: the etcd endpoints %q resolve to none", rc.Endpoints)
	}
	o := fleet.Options{Endpoints: endpoints, Prefix: rc.prefix(gw), DialTimeout: time.Duration(rc.DialTimeout),
		Username: repl.ReplaceAll(rc.Username, ""), Password: repl.ReplaceAll(rc.Password, ""), Storage: st, Logger: logger}
	if rc.TLS != nil {
		o.TLS = rc.TLS.Config
	}
	return o, nil
}

// Join joins the gateway to its registry: the watcher starts (or is
// shared), and the gateway applies the registry's state now and on every
// change. With a spend book (spend), the process keeps a book of its own
// there.
func (l *Link) Join(o fleet.Options, spend *books.SpendBook, c clock.Clock) error {
	f, err := fleet.Acquire(o)
	if err != nil {
		return err
	}
	l.Fleet = f
	if spend != nil {
		l.Book = money.NewFleetBook(f, spend, l.Gateway, c, l.Logger)
	}
	l.sub = f.Join(l.apply)
	// the watcher stores a snapshot before it hands it to the gateways,
	// which now include this one: read under the lock, the snapshot
	// applied here is never older than one the watcher applies after
	l.mu.Lock()
	l.applyLocked(f.Snapshot())
	l.mu.Unlock()
	return nil
}

// Begin starts the watch and the membership, and the publishing of the
// process's book.
func (l *Link) Begin(ctx context.Context) {
	l.Fleet.Begin()
	l.Book.Publish(ctx)
}

// Release leaves the fleet.
func (l *Link) Release() {
	l.Fleet.Leave(l.sub)
	l.Fleet.Release()
}

// apply sets the gateway's drains and weights from the snapshot: a
// group or endpoint is drained when the registry says so, and not when
// it does not; an alias's weights are the registry's where it has them,
// else the config's. Names the gateway does not have are logged.
func (l *Link) apply(s *registry.Snapshot) {
	// the watcher and the gateway's provisioning may both apply, one at
	// a time (provisioning reads the watcher's snapshot under the lock:
	// see provisionRegistry). Not ordered by revision: an etcd restored
	// or started afresh is at a lower one, and its snapshots must apply.
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyLocked(s)
}

func (l *Link) applyLocked(s *registry.Snapshot) {
	share := l.Fleet.Share(s)
	l.Share.Store(&share)
	l.Book.Apply(s)
	for name, grp := range l.Groups {
		if grp.Shared == nil {
			continue
		}
		if vg := grp.VLLM; vg != nil {
			vg.Share.Store(&share)
		}
		rg := s.Groups[name]
		grp.Shared.Drained.Store(rg.Drained)
		if vg := grp.VLLM; vg != nil {
			vg.ApplyEndpoints(rg.Endpoints, l.Logger)
			vg.WakeQueue() // a share grown, an endpoint added: room, perhaps
		} else if len(rg.Endpoints) > 0 {
			l.note("registry: endpoints are listed for vllm groups only; the group's are its config's", zap.String("group", name))
		}
	}
	for name := range s.Groups {
		if l.Groups[name] == nil {
			l.note("registry: a group the gateway does not have", zap.String("group", name))
		}
	}
	for name, al := range l.Aliases {
		ra := s.Aliases[name]
		for _, ws := range al.WeightedSets {
			for i, t := range al.Targets[ws.Start:ws.End] {
				if w, ok := ra.Weights[t.Group]; ok {
					l.setWeight(al, t.Group, w)
				} else {
					l.restoreWeight(al, t.Group, ws.Configured[i])
				}
			}
		}
	}
	for name := range s.Aliases {
		if l.Aliases[name] == nil {
			l.note("registry: an alias the gateway does not have", zap.String("alias", name))
		}
	}
	l.Rev.Store(s.Revision)
}

// note logs what a snapshot names that the gateway lacks, once per
// message and name.
func (l *Link) note(msg string, field zap.Field) {
	key := msg + "|" + field.String
	if _, seen := l.notes.LoadOrStore(key, true); !seen {
		l.Logger.Warn(msg, field)
	}
}

// setWeight sets a member's weight from the registry; unchanged
// weights are left alone, so that the health scheduler's own moves are
// not reset on every snapshot.
func (l *Link) setWeight(al *routing.Alias, group string, w int) {
	key := al.Name + "|" + group
	if prev, had := l.weights.Load(key); had && prev.(int) == w {
		return
	}
	l.weights.Store(key, w)
	al.SetWeight(l.Gateway, group, w)
}

// restoreWeight sets a member's weight back to its configured one, w,
// once the registry no longer names it; a member the registry never
// weighed keeps the config's weight, as provisioned, and the health
// scheduler's moves.
func (l *Link) restoreWeight(al *routing.Alias, group string, w int) {
	key := al.Name + "|" + group
	if prev, had := l.weights.Load(key); !had || prev.(int) == w {
		return
	}
	l.weights.Store(key, w)
	al.SetWeight(l.Gateway, group, w)
}

// Await waits, up to two seconds, until the watch has applied the
// registry's revision rev here: an operator who drained sees it in this
// gateway's state when the call returns.
func (l *Link) Await(rev int64) {
	for deadline := time.Now().Add(2 * time.Second); l.Rev.Load() < rev && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// State is the registry's part of the admin state (nil without one).
func (l *Link) State() *adminapi.RegistryState {
	if l == nil {
		return nil
	}
	// the share the gateway's limits are divided by, not the snapshot's
	// the watcher may hold ahead of it
	return l.Fleet.State(l.Rev.Load(), l.Share.Load())
}
