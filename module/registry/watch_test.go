// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry/registrytest"
)

// watching runs a watcher until the test ends; each snapshot it applies
// comes on the channel.
func watching(t *testing.T, te *registrytest.Etcd, logger *zap.Logger) (*Watcher, <-chan *Snapshot) {
	t.Helper()
	snaps := make(chan *Snapshot, 256)
	w := &Watcher{Client: te.Client, Prefix: prefix, Logger: logger, Retry: 50 * time.Millisecond, Check: 100 * time.Millisecond,
		OnSnapshot: func(s *Snapshot) {
			select {
			case snaps <- s:
			default:
			}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, snaps
}

// A change reaches the watcher without a reload; a deletion too; the
// delay from the put to the snapshot is measured.
func TestWatcherAppliesChanges(t *testing.T) {
	te := registrytest.Start(t)
	te.Put(Key(prefix, KindGroup, "self"), `{"endpoints":[{"address":"10.0.0.5:8000"}]}`)
	w, snaps := watching(t, te, zap.NewNop())
	registrytest.Until(t, snaps, "the first read", func(s *Snapshot) bool { return len(s.Groups["self"].Endpoints) == 1 })

	var worst time.Duration
	for i := range 20 {
		began := time.Now()
		rev := te.Put(Key(prefix, KindGroup, "self"), `{"drained":`+map[bool]string{true: "true", false: "false"}[i%2 == 0]+`}`)
		registrytest.Until(t, snaps, "the put", func(s *Snapshot) bool { return s.Revision >= rev })
		worst = max(worst, time.Since(began))
	}
	t.Logf("a put reached the watcher within %v (worst of 20, loopback)", worst)
	rev := te.Delete(Key(prefix, KindGroup, "self"))
	s := registrytest.Until(t, snaps, "the deletion", func(s *Snapshot) bool { return s.Revision >= rev })
	if _, ok := s.Groups["self"]; ok {
		t.Errorf("the deleted group is still there: %+v", s.Groups)
	}
	if w.Resyncs() != 1 {
		t.Errorf("%d full reads, want 1 (the first)", w.Resyncs())
	}
}

// A compaction past the watch's revision: the watch says so, nothing of
// it is applied, and a full read brings every change of the gap, the
// deletions included.
func TestWatcherResyncsAfterCompaction(t *testing.T) {
	te := registrytest.Start(t)
	te.Put(Key(prefix, KindGroup, "gone"), `{"drained":true}`)
	w := &Watcher{Client: te.Client, Prefix: prefix, Logger: zap.NewNop()}
	ctx := context.Background()
	rev, err := w.resync(ctx)
	if err != nil || len(w.Snapshot().Groups) != 1 {
		t.Fatalf("first read: %v %+v", err, w.Snapshot())
	}
	te.Put(Key(prefix, KindGroup, "self"), `{"drained":true}`)
	te.Delete(Key(prefix, KindGroup, "gone"))
	last := te.Put(Key(prefix, KindAlias, "chat"), `{"weights":{"a":1}}`)
	if _, err := te.Client.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	err = w.watch(ctx, rev)
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("watch from a compacted revision: %v", err)
	}
	if s := w.Snapshot(); s.Revision != rev || len(s.Groups) != 1 {
		t.Errorf("the failed watch applied something: %+v", s)
	}
	began := time.Now()
	if _, err := w.resync(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the full read after the compaction took %v", time.Since(began))
	s := w.Snapshot()
	if _, gone := s.Groups["gone"]; gone || !s.Groups["self"].Drained || s.Aliases["chat"].Weights["a"] != 1 || s.Revision < last {
		t.Errorf("after the full read: %+v", s)
	}
}

// etcd stopped: the last snapshot stays and serves; etcd back: the
// watch resumes where it was and follows new changes.
func TestWatcherSurvivesEtcdRestart(t *testing.T) {
	te := registrytest.Start(t)
	te.Put(Key(prefix, KindGroup, "self"), `{"drained":true}`)
	_, snaps := watching(t, te, zap.NewNop())
	registrytest.Until(t, snaps, "the first read", func(s *Snapshot) bool { return s.Groups["self"].Drained })
	te.Stop()
	te.Restart()
	rev := te.Put(Key(prefix, KindGroup, "self"), `{"drained":false}`)
	registrytest.Until(t, snaps, "the change after the restart", func(s *Snapshot) bool { return s.Revision >= rev && !s.Groups["self"].Drained })
}

// An etcd that comes back without its data (restored from an old backup,
// or started afresh) is at a lower revision: the watcher sees the history
// changed and reads everything again, instead of waiting for a revision
// that will not come.
func TestWatcherResyncsWhenEtcdLosesItsHistory(t *testing.T) {
	te := registrytest.Start(t)
	for i := range 5 {
		te.Put(Key(prefix, KindGroup, "old"), `{"drained":`+map[bool]string{true: "true", false: "false"}[i%2 == 0]+`}`)
	}
	w, snaps := watching(t, te, zap.NewNop())
	registrytest.Until(t, snaps, "the first read", func(s *Snapshot) bool { _, ok := s.Groups["old"]; return ok })
	te.Stop()
	te.Dir = t.TempDir()
	te.Restart()
	te.Put(Key(prefix, KindAlias, "chat"), `{"weights":{"a":1}}`)
	s := registrytest.Until(t, snaps, "the new history", func(s *Snapshot) bool { return s.Aliases["chat"].Weights["a"] == 1 })
	if _, ok := s.Groups["old"]; ok || w.Resyncs() < 2 {
		t.Errorf("after etcd lost its data: %+v, %d full reads", s, w.Resyncs())
	}
}

// A malformed value is refused with a log naming its key, and the key
// keeps its last good value, through a watch and through a full read.
func TestWatcherRefusesMalformed(t *testing.T) {
	te := registrytest.Start(t)
	core, logs := observer.New(zap.ErrorLevel)
	key := Key(prefix, KindAlias, "chat")
	te.Put(key, `{"weights":{"a":60,"b":40}}`)
	w, snaps := watching(t, te, zap.New(core))
	registrytest.Until(t, snaps, "the first read", func(s *Snapshot) bool { return s.Aliases["chat"].Weights["a"] == 60 })
	rev := te.Put(key, `{"weights":{"a":"sixty"}}`)
	s := registrytest.Until(t, snaps, "the bad put", func(s *Snapshot) bool { return s.Revision >= rev })
	if s.Aliases["chat"].Weights["a"] != 60 {
		t.Errorf("the bad value replaced the good one: %+v", s.Aliases)
	}
	found := logs.FilterMessageSnippet("value refused").FilterField(zap.String("key", key)).Len()
	if found != 1 {
		t.Errorf("%d refusal lines naming %s, want 1: %v", found, key, logs.All())
	}
	// the same on a full read
	if _, err := w.resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.Snapshot().Aliases["chat"].Weights["b"] != 40 {
		t.Errorf("a full read dropped the last good value: %+v", w.Snapshot().Aliases)
	}
}
