// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry/registrytest"
)

const prefix = "/hybrid-llm/test"

// joined subscribes to f until the test ends; each snapshot handed to it
// comes on the channel.
func joined(t *testing.T, f *Fleet) <-chan *registry.Snapshot {
	t.Helper()
	snaps := make(chan *registry.Snapshot, 64)
	sub := f.Join(func(s *registry.Snapshot) {
		select {
		case snaps <- s:
		default:
		}
	})
	t.Cleanup(func() { f.Leave(sub) })
	return snaps
}

func acquire(t *testing.T, te *registrytest.Etcd, st certmagic.Storage) *Fleet {
	t.Helper()
	f, err := Acquire(Options{Endpoints: []string{te.URL}, Prefix: prefix, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A drain written through the fleet reaches whoever joined it, with the
// process among the members; one that left gets no more; the last
// snapshot stays in storage, so that a start without etcd begins from it.
func TestAFleetHandsItsSnapshotsToWhoJoined(t *testing.T) {
	te := registrytest.Start(t)
	st := &certmagic.FileStorage{Path: t.TempDir()}
	f := acquire(t, te, st)
	first := f.Join(func(*registry.Snapshot) {})
	left := make(chan *registry.Snapshot, 64)
	gone := f.Join(func(s *registry.Snapshot) { left <- s })
	snaps := joined(t, f)
	f.Begin()
	if _, err := f.WriteDrain(context.Background(), "self", "", true); err != nil {
		t.Fatal(err)
	}
	s := registrytest.Until(t, snaps, "self drained and this process a member", func(s *registry.Snapshot) bool {
		return s.Groups["self"].Drained && len(s.Members) == 1
	})
	if sh := f.Share(s); sh != (Share{Rank: 0, N: 1}) {
		t.Errorf("share %+v, want the only member", sh)
	}
	if st := f.State(s.Revision, nil); st.Members != 1 || st.Prefix != prefix || st.Revision != s.Revision {
		t.Errorf("state %+v", st)
	}
	f.Leave(gone)
	if _, err := f.WriteDrain(context.Background(), "self", "10.0.0.5:8000", true); err != nil {
		t.Fatal(err)
	}
	registrytest.Until(t, snaps, "the endpoint drained", func(s *registry.Snapshot) bool {
		eps := s.Groups["self"].Endpoints
		return len(eps) == 1 && eps[0].Drained
	})
	// snapshots are handed on one at a time: those before this one are
	// all handed, and none after the leave went to the one that left
	for len(left) > 0 {
		if eps := (<-left).Groups["self"].Endpoints; len(eps) > 0 {
			t.Error("a subscription that left was handed a snapshot")
		}
	}
	f.Leave(first)
	f.Release()

	te.Stop()
	again := acquire(t, te, st)
	defer again.Release()
	if s := again.Snapshot(); !s.Groups["self"].Drained {
		t.Errorf("started without etcd: %+v, want the last snapshot kept", s.Groups)
	}
}

// The writes a fleet makes besides drains, on one etcd: the spend books
// and the admin API's keys.
func TestWrites(t *testing.T) {
	te := registrytest.Start(t)
	f := acquire(t, te, &certmagic.FileStorage{Path: t.TempDir()})
	defer f.Release()
	t.Run("spend books", func(t *testing.T) { spendBooksAndWhatWasPublished(t, te, f) })
	t.Run("admin writes", func(t *testing.T) { adminWritesAreChecked(t, f) })
}

// Each process's book is its own key; what a journal's process
// published is read back from the books of its gateway only.
func spendBooksAndWhatWasPublished(t *testing.T, te *registrytest.Etcd, f *Fleet) {
	ctx := context.Background()
	for name, b := range map[string]registry.Book{
		"p1.gw":    {Gateway: "gw", Journal: "j1", JournalSeq: 7},
		"p2.gw":    {Gateway: "gw", Journal: "j2", JournalSeq: 9},
		"p1.other": {Gateway: "other", Journal: "j1", JournalSeq: 11},
	} {
		if err := f.PutSpend(ctx, name, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.PublishedFrom("gw", "j1", zap.NewNop()); got != 7 {
		t.Errorf("published from j1: %d, want 7", got)
	}
	if got := f.PublishedFrom("gw", "j3", zap.NewNop()); got != 0 {
		t.Errorf("a journal no book names: %d", got)
	}
	var b registry.Book
	if err := json.Unmarshal([]byte(te.Get(registry.Key(prefix, registry.KindSpend, "p1.gw"))), &b); err != nil || b.JournalSeq != 7 {
		t.Errorf("stored book %+v (%v)", b, err)
	}
}

// The admin API writes groups' and aliases' keys, checked as the watch
// checks them, and never the keys the gateways hold themselves.
func adminWritesAreChecked(t *testing.T, f *Fleet) {
	ctx := context.Background()
	for _, req := range []adminapi.RegistryWrite{
		{Key: "members/x", Value: json.RawMessage(`{}`)},
		{Key: "spend/x", Value: json.RawMessage(`{}`)},
		{Key: "groups/self", Value: json.RawMessage(`{"drained":"yes"}`)},
		{Key: "nowhere/self", Value: json.RawMessage(`{}`)},
	} {
		var ae caddy.APIError
		if _, err := f.Write(ctx, req); !errors.As(err, &ae) || ae.HTTPStatus != http.StatusBadRequest {
			t.Errorf("%s: %v, want a 400", req.Key, err)
		}
	}
	if _, err := f.Write(ctx, adminapi.RegistryWrite{Key: "aliases/chat", Value: json.RawMessage(`{"weights":{"cloud":3}}`)}); err != nil {
		t.Fatal(err)
	}
	entries, _, err := f.Read(ctx, "aliases/chat")
	if err != nil || len(entries) != 1 || string(entries[0].Value) != `{"weights":{"cloud":3}}` {
		t.Fatalf("read back %+v (%v)", entries, err)
	}
	var ae caddy.APIError
	if _, _, err := f.Read(ctx, "aliases/none"); !errors.As(err, &ae) || ae.HTTPStatus != http.StatusNotFound {
		t.Errorf("a missing key: %v, want a 404", err)
	}
}
