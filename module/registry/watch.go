// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Watcher keeps a snapshot of the registry under a prefix: a full read
// at a revision, then a watch from the next one. After a compaction past
// the watch's revision, or a lost connection, it reads everything again,
// so that no change is skipped and none applied twice.
type Watcher struct {
	Client *clientv3.Client
	Prefix string
	Logger *zap.Logger
	// OnSnapshot is called, from the watcher's goroutine, with each new
	// snapshot; optional.
	OnSnapshot func(*Snapshot)
	// Retry is the wait before reading again after an error (default 1s).
	Retry time.Duration
	// Check is how often the watcher asks etcd for its revision while the
	// watch is quiet (default 5s): an etcd restored from a backup, or
	// started afresh, is at a revision below the snapshot's, and a watch
	// resumed by the client would wait for it forever.
	Check time.Duration

	cur     atomic.Pointer[Snapshot]
	cluster uint64 // the etcd cluster of the last full read
	resyncs atomic.Int64
	synced  atomic.Int64 // Unix nanoseconds of the last contact with etcd
}

// Snapshot is the registry as last applied, never nil.
func (w *Watcher) Snapshot() *Snapshot {
	if s := w.cur.Load(); s != nil {
		return s
	}
	return Empty()
}

// Seed sets the snapshot to start from, before Run: the last one applied
// before a restart, kept on disk for when etcd cannot be reached.
func (w *Watcher) Seed(s *Snapshot) { w.cur.Store(s) }

// Resyncs is how many full reads the watcher has made.
func (w *Watcher) Resyncs() int64 { return w.resyncs.Load() }

// LastContact is when etcd last answered the watcher (zero before it did).
func (w *Watcher) LastContact() time.Time {
	if n := w.synced.Load(); n > 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Run reads and watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	retry := w.Retry
	if retry <= 0 {
		retry = time.Second
	}
	for ctx.Err() == nil {
		rev, err := w.resync(ctx)
		if err == nil {
			err = w.watch(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		w.Logger.Warn("registry: reading etcd again", zap.String("prefix", w.Prefix), zap.Error(err),
			zap.Duration("after", retry))
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// resync reads the whole prefix and replaces the snapshot.
func (w *Watcher) resync(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := w.Client.Get(rctx, w.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", w.Prefix, err)
	}
	w.resyncs.Add(1)
	w.synced.Store(time.Now().UnixNano())
	w.cluster = resp.Header.ClusterId
	kvs := make([]Change, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		kvs = append(kvs, Change{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision})
	}
	s, rejected := Load(w.Prefix, resp.Header.Revision, kvs, w.cur.Load())
	w.refuse(rejected)
	w.publish(s)
	return resp.Header.Revision, nil
}

// watch applies changes from rev+1 on, until the watch fails.
func (w *Watcher) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := w.Client.Watch(wctx, w.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	every := w.Check
	if every <= 0 {
		every = 5 * time.Second
	}
	check := time.NewTicker(every)
	defer check.Stop()
	for {
		var resp clientv3.WatchResponse
		var open bool
		select {
		case resp, open = <-ch:
		case <-check.C:
			if err := w.sameHistory(wctx); err != nil {
				return err
			}
			continue
		}
		if !open {
			break
		}
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return fmt.Errorf("the watch's revision %d was compacted (at %d): %w", rev+1, resp.CompactRevision, err)
			}
			return err
		}
		w.synced.Store(time.Now().UnixNano())
		if len(resp.Events) == 0 {
			continue // progress
		}
		changes := make([]Change, 0, len(resp.Events))
		for _, ev := range resp.Events {
			c := Change{Key: string(ev.Kv.Key), Value: ev.Kv.Value, Revision: ev.Kv.ModRevision}
			if ev.Type == mvccpb.DELETE {
				c.Value, c.Revision = nil, ev.Kv.ModRevision
			}
			changes = append(changes, c)
		}
		s, rejected := w.Snapshot().Apply(w.Prefix, resp.Header.Revision, changes)
		w.refuse(rejected)
		w.publish(s)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("the watch ended (connection lost or leader gone)")
}

// sameHistory asks etcd for its revision: below the snapshot's, or from
// another cluster, the history the watch follows is gone.
func (w *Watcher) sameHistory(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := w.Client.Get(cctx, w.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil // unreachable: the watch resumes when it is back
	}
	w.synced.Store(time.Now().UnixNano())
	if rev := w.Snapshot().Revision; resp.Header.Revision < rev || resp.Header.ClusterId != w.cluster {
		return fmt.Errorf("etcd's history changed: revision %d (the snapshot's %d), cluster %x (was %x)",
			resp.Header.Revision, rev, resp.Header.ClusterId, w.cluster)
	}
	return nil
}

func (w *Watcher) publish(s *Snapshot) {
	w.cur.Store(s)
	if w.OnSnapshot != nil {
		w.OnSnapshot(s)
	}
}

func (w *Watcher) refuse(rejected []Rejected) {
	for _, r := range rejected {
		w.Logger.Error("registry: value refused; the key keeps its last good value",
			zap.String("key", r.Key), zap.Error(r.Err))
	}
}
