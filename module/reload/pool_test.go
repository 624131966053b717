// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package reload

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

type book struct {
	spent     float64
	destroyed *atomic.Int32
}

func (b *book) Destruct() error { b.destroyed.Add(1); return nil }

// A value survives a reload: the new config acquires it before the old
// one releases it, and gets the old one's value, not a new one; after the
// last release it is destroyed, once, and the next acquire makes a new one.
func TestAValueOutlivesAReloadAndGoesAfterTheLast(t *testing.T) {
	p := NewPool[*book]()
	var destroyed atomic.Int32
	made := 0
	mk := func() (*book, error) { made++; return &book{destroyed: &destroyed}, nil }
	old, first, err := p.Acquire("gw", mk)
	if err != nil || !first {
		t.Fatalf("first acquire: made %v, %v", first, err)
	}
	old.spent = 1.5
	next, again, _ := p.Acquire("gw", mk) // the next config, provisioned first
	if again || next != old || next.spent != 1.5 {
		t.Fatalf("the next config made %v, got %+v; want the old value", again, next)
	}
	if err := p.Release("gw"); err != nil || destroyed.Load() != 0 || p.Holds("gw") != 1 {
		t.Fatalf("the old config's release: %v, destroyed %d, holds %d", err, destroyed.Load(), p.Holds("gw"))
	}
	_ = p.Release("gw")
	if destroyed.Load() != 1 || p.Holds("gw") != 0 {
		t.Fatalf("after the last release: destroyed %d, holds %d", destroyed.Load(), p.Holds("gw"))
	}
	fresh, _, _ := p.Acquire("gw", mk)
	if fresh == old || fresh.spent != 0 || made != 2 {
		t.Fatalf("after it went: %+v, made %d", fresh, made)
	}
}

// A value that cannot be made leaves nothing held: the next acquire
// tries again.
func TestAFailedMakeHoldsNothing(t *testing.T) {
	p := NewPool[int]()
	if _, _, err := p.Acquire("k", func() (int, error) { return 0, errors.New("no") }); err == nil {
		t.Fatal("no error")
	}
	if p.Holds("k") != 0 {
		t.Fatalf("holds %d after a failed make", p.Holds("k"))
	}
	v, made, err := p.Acquire("k", func() (int, error) { return 7, nil })
	if err != nil || !made || v != 7 {
		t.Fatalf("after a failed make: %d, %v, %v", v, made, err)
	}
}

// Fifty acquire a key at once: one value is made, all get it.
func TestConcurrentAcquiresMakeOneValue(t *testing.T) {
	p := NewPool[*int]()
	var made atomic.Int32
	var wg sync.WaitGroup
	got := make([]*int, 50)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, _ = p.Acquire("k", func() (*int, error) { made.Add(1); return new(int), nil })
		}()
	}
	wg.Wait()
	if made.Load() != 1 || p.Holds("k") != 50 {
		t.Fatalf("made %d, holds %d", made.Load(), p.Holds("k"))
	}
	for _, v := range got {
		if v != got[0] {
			t.Fatal("two values for one key")
		}
	}
}

// What is kept is made once and stays, whoever asks.
func TestKeptValuesStay(t *testing.T) {
	p := NewPool[*int]()
	a := p.Keep("k", func() *int { return new(int) })
	*a = 3
	if b := p.Keep("k", func() *int { return new(int) }); b != a || *b != 3 {
		t.Fatalf("kept %v, then %v", a, b)
	}
	seen := map[string]int{}
	p.Range(func(k string, v *int) bool { seen[k] = *v; return true })
	if len(seen) != 1 || seen["k"] != 3 {
		t.Fatalf("range: %v", seen)
	}
}

// Keys made of different parts differ, even when the parts hold a
// separator another key format used.
func TestKeysOfDifferentPartsDiffer(t *testing.T) {
	if Key("gw/1", "team") == Key("gw", "1/team") || Key("a", "b") == Key("ab") {
		t.Fatal("two lists of parts made one key")
	}
	if Key("gw", "team") != Key("gw", "team") {
		t.Fatal("one list of parts made two keys")
	}
}
