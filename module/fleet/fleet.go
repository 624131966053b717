// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package fleet is a gateway's registry: one etcd cluster, watched, and
// shared by every gateway (and reload) that names the same endpoints and
// prefix. It holds the connection, the watch and the last snapshot kept
// in Caddy's storage, the process's membership under a lease, its share
// among the live members, and the writes the gateways make: drains,
// weights, the admin API's keys, and each process's spend book. What a
// snapshot means to a gateway is the gateway's: it subscribes (Join),
// and the fleet hands it every snapshot.
//
// It imports the product's registry (the documents and the watch) and
// adminapi (its answers), never the Caddy face.
package fleet

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/proclock"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// Options say how to reach a registry.
type Options struct {
	// Endpoints are etcd's client URLs, placeholders resolved.
	Endpoints []string
	// Prefix is the keys' prefix, without a trailing slash.
	Prefix string
	// Username and Password, if etcd authenticates.
	Username, Password string
	// DialTimeout bounds connecting. Default: 5s.
	DialTimeout time.Duration
	// TLS builds the TLS to etcd when the fleet is first made; nil for
	// plain connections.
	TLS func() (*tls.Config, error)
	// Storage keeps the last snapshot applied, for a start without etcd.
	Storage certmagic.Storage
	Logger  *zap.Logger
}

// Fleet is one watched registry, shared by the gateways (and their
// reloads) that name the same endpoints and prefix.
type Fleet struct {
	key     string
	prefix  string
	client  *clientv3.Client
	watcher *registry.Watcher
	cancel  context.CancelFunc
	done    chan struct{}
	// where the last snapshot applied is kept (Caddy's storage, by
	// default its data directory), for a start without etcd
	storage certmagic.Storage
	file    string
	logger  *zap.Logger

	member string // this process's key under members/, held by its lease
	host   string
	ctx    context.Context // ends when the last gateway on it goes
	began  sync.Once

	mu   sync.Mutex
	subs []*Subscription // every provisioned gateway on it; each applies its groups
}

// Subscription is a gateway's place among those the fleet hands its
// snapshots to.
type Subscription struct{ apply func(*registry.Snapshot) }

// memberTTL is the lease of a gateway's membership: a replica that dies
// leaves the others' count within it.
const memberTTL = 5

var fleets = reload.NewPool[*Fleet]()

// Acquire returns the fleet of a registry, connecting to it (and
// starting from the last snapshot kept in storage) the first time.
// Release lets it go.
func Acquire(o Options) (*Fleet, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	key := strings.Join(o.Endpoints, ",") + "|" + o.Prefix
	f, _, err := fleets.Acquire(key, func() (*Fleet, error) {
		dial := o.DialTimeout
		if dial <= 0 {
			dial = 5 * time.Second
		}
		cc := clientv3.Config{
			Endpoints: o.Endpoints, DialTimeout: dial, Username: o.Username, Password: o.Password,
			Logger: o.Logger.Named("etcd").WithOptions(zap.IncreaseLevel(zap.ErrorLevel)),
		}
		if o.TLS != nil {
			var err error
			if cc.TLS, err = o.TLS(); err != nil {
				return nil, err
			}
		}
		cli, err := clientv3.New(cc)
		if err != nil {
			return nil, fmt.Errorf("registry: %v", err)
		}
		f := &Fleet{key: key, prefix: o.Prefix, client: cli, done: make(chan struct{}), logger: o.Logger,
			storage: o.Storage, file: "hybrid_llm/registry/" + proclock.FileName(key) + ".json"}
		f.watcher = &registry.Watcher{Client: cli, Prefix: o.Prefix, Logger: o.Logger, OnSnapshot: f.apply}
		if s, err := f.readSnapshot(); err == nil {
			f.watcher.Seed(s)
			o.Logger.Info("registry: starting from the last snapshot applied", zap.String("file", f.file), zap.Int64("revision", s.Revision))
		}
		f.host, _ = os.Hostname()
		var suffix [4]byte
		_, _ = rand.Read(suffix[:])
		f.member = fmt.Sprintf("%s-%d-%x", proclock.FileName(f.host), os.Getpid(), suffix)
		f.ctx, f.cancel = context.WithCancel(context.Background())
		return f, nil
	})
	return f, err
}

// Release lets the fleet go: the last gateway on it closes it.
func (f *Fleet) Release() { _ = fleets.Release(f.key) }

// Destruct ends the watch and the membership, and closes the client.
func (f *Fleet) Destruct() error {
	f.cancel()
	f.began.Do(func() { close(f.done) }) // never begun: nothing to wait for
	<-f.done
	return f.client.Close()
}

// Begin starts the watch and the membership, once: when the first
// gateway on the registry runs (a config that is only validated never
// joins the fleet, even briefly).
func (f *Fleet) Begin() {
	f.began.Do(func() {
		members := make(chan struct{})
		go func() {
			defer close(members)
			defer logPanic(f.logger, "registry membership")
			f.keepMember(f.ctx, f.host)
		}()
		go func() {
			defer close(f.done)
			defer func() { <-members }()
			defer logPanic(f.logger, "registry watcher")
			f.watcher.Run(f.ctx)
		}()
	})
}

func logPanic(logger *zap.Logger, what string) {
	if err := recover(); err != nil {
		logger.Error(what+" panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
	}
}

// Join hands every snapshot from now on to apply, until Leave. The
// watcher stores a snapshot before it hands it on: one read from Snapshot
// after Join is never older than one the watcher hands apply after.
func (f *Fleet) Join(apply func(*registry.Snapshot)) *Subscription {
	s := &Subscription{apply: apply}
	f.mu.Lock()
	f.subs = append(f.subs, s)
	f.mu.Unlock()
	return s
}

// Leave stops handing snapshots to s.
func (f *Fleet) Leave(s *Subscription) {
	f.mu.Lock()
	if i := slices.Index(f.subs, s); i >= 0 {
		f.subs = slices.Delete(f.subs, i, i+1)
	}
	f.mu.Unlock()
}

// Snapshot is the registry as last watched.
func (f *Fleet) Snapshot() *registry.Snapshot { return f.watcher.Snapshot() }

// Prefix is the registry's keys' prefix.
func (f *Fleet) Prefix() string { return f.prefix }

// apply hands a new snapshot to the fleet's gateways and keeps it on disk.
func (f *Fleet) apply(s *registry.Snapshot) {
	f.mu.Lock()
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, sub := range subs {
		sub.apply(s)
	}
	if err := f.writeSnapshot(s); err != nil {
		f.logger.Warn("registry: could not keep the snapshot on disk", zap.String("file", f.file), zap.Error(err))
	}
}

// keepMember holds the process's membership key under a lease, and
// takes a new lease whenever the old one is lost (etcd restarted or
// unreachable longer than the lease); at the end it revokes it, so that
// the others count one fewer at once.
func (f *Fleet) keepMember(ctx context.Context, host string) {
	key := registry.Key(f.prefix, registry.KindMember, f.member)
	value, _ := json.Marshal(registry.Member{Host: host, Since: time.Now().UTC().Truncate(time.Second)})
	for ctx.Err() == nil {
		lease, err := f.client.Grant(ctx, memberTTL)
		if err == nil {
			_, err = f.client.Put(ctx, key, string(value), clientv3.WithLease(lease.ID))
			if err == nil {
				var ch <-chan *clientv3.LeaseKeepAliveResponse
				if ch, err = f.client.KeepAlive(ctx, lease.ID); err == nil {
					for range ch {
					}
				}
			}
			if ctx.Err() != nil {
				rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = f.client.Revoke(rctx, lease.ID)
				cancel()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Share is a process's place among the fleet's live members.
type Share struct{ Rank, N int }

// Share is the process's place among the members the snapshot lists (and
// itself, before its own key is seen).
func (f *Fleet) Share(s *registry.Snapshot) Share {
	ids := make([]string, 0, len(s.Members)+1)
	for id := range s.Members {
		ids = append(ids, id)
	}
	if _, ok := s.Members[f.member]; !ok {
		ids = append(ids, f.member)
	}
	slices.Sort(ids)
	return Share{Rank: slices.Index(ids, f.member), N: len(ids)}
}

// State is the registry's part of the admin state, with the revision
// the gateway last applied and the share it applied with it (nil: the
// share of the snapshot last read), which its limits are divided by.
func (f *Fleet) State(applied int64, sh *Share) *adminapi.RegistryState {
	if sh == nil {
		s := f.Share(f.watcher.Snapshot())
		sh = &s
	}
	st := &adminapi.RegistryState{Prefix: f.prefix, Revision: applied, Resyncs: f.watcher.Resyncs(), Member: f.member, Members: sh.N}
	if at := f.watcher.LastContact(); !at.IsZero() {
		age := time.Since(at).Seconds()
		st.LastContact, st.StaleSeconds = &at, &age
	}
	return st
}

func (f *Fleet) readSnapshot() (*registry.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := f.storage.Load(ctx, f.file)
	if err != nil {
		return nil, err
	}
	s := registry.Empty()
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

func (f *Fleet) writeSnapshot(s *registry.Snapshot) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return f.storage.Store(ctx, f.file, b)
}
