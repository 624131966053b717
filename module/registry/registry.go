// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package registry is the runtime state that several gateways share
// through etcd: per group its endpoints, their weights and drains, and
// per alias its targets' weights. Structure and credentials stay in each
// gateway's config; the registry holds what an operator or a control
// plane changes all day.
//
// Keys are readable JSON under a prefix, so that etcdctl works as well
// as the gateway's own tools:
//
//	<prefix>/groups/<group>    {"drained": false, "endpoints": [{"address": "10.0.0.5:8000", "weight": 1, "drained": false}]}
//	<prefix>/aliases/<alias>   {"weights": {"cloud-a": 60, "cloud-b": 40}}
//	<prefix>/members/<id>      {"host": "gw-1", "since": "2026-12-01T10:00:00Z"}, under the member's lease
//	<prefix>/spend/<id>        {"gateway": "main", "total": {"day": "2026-12-01", "month": "2026-12", "day_usd": 1.5, "month_usd": 20}, "clients": {...}}
//
// A member's key lives as long as its lease. A spend key is one gateway
// process's cloud spend (its Caddy instance and gateway name), which the
// others add to their own; it is not leased, since a month's spend must
// outlive the process.
//
// A group's "endpoints" drain or weigh the config's endpoints, and add
// the addresses the config lacks (vLLM groups); an added endpoint the
// registry no longer lists leaves the group, its requests in flight
// finishing. A malformed or wrongly typed value is refused
// with an error naming its key; the key's last good value stays.
//
// It is a leaf: it imports nothing of the product.
package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"strings"
	"time"
)

// Endpoint is one address of a group.
type Endpoint struct {
	Address string `json:"address"`
	// Its share of the group's requests against the others' (as the
	// config's endpoint weight); 0 takes it out like a drain. Default: the
	// config's weight, or 1.
	Weight *float64 `json:"weight,omitempty"`
	// Drained takes it out of the selection; requests in flight finish.
	Drained bool `json:"drained,omitempty"`
}

// Group is a group's runtime state.
type Group struct {
	Drained bool `json:"drained,omitempty"`
	// Endpoints are the config's endpoints the registry drains (or
	// keeps in).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// Alias is an alias's runtime state: its targets' weights by group.
type Alias struct {
	Weights map[string]int `json:"weights"`
}

// Member is a live gateway process: its key lives as long as its lease.
type Member struct {
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

// Spend is cloud spend in USD in a UTC day and month.
type Spend struct {
	Day      string  `json:"day"`   // 2006-01-02
	Month    string  `json:"month"` // 2006-01
	DayUSD   float64 `json:"day_usd"`
	MonthUSD float64 `json:"month_usd"`
}

// Book is one gateway process's cloud spend, in all and per client.
type Book struct {
	Gateway string           `json:"gateway"`
	Total   Spend            `json:"total"`
	Clients map[string]Spend `json:"clients,omitempty"`
	// the books' journal the book's charges come from, and its last
	// record the book includes: a process restarted on that journal
	// counts only the records after it
	Journal    string `json:"journal,omitempty"`
	JournalSeq uint64 `json:"journal_seq,omitempty"`
}

// Snapshot is the registry at one etcd revision. It is never changed once
// handed out: an update makes a new one.
type Snapshot struct {
	Revision int64             `json:"revision"`
	Groups   map[string]Group  `json:"groups"`
	Aliases  map[string]Alias  `json:"aliases"`
	Members  map[string]Member `json:"members"`
	Spend    map[string]Book   `json:"spend,omitempty"`
}

// Empty is the registry before anything was read.
func Empty() *Snapshot {
	return &Snapshot{Groups: map[string]Group{}, Aliases: map[string]Alias{}, Members: map[string]Member{}, Spend: map[string]Book{}}
}

// Kind is what a key names.
type Kind string

const (
	KindGroup  Kind = "groups"
	KindAlias  Kind = "aliases"
	KindMember Kind = "members"
	KindSpend  Kind = "spend"
)

// Key is the etcd key of a group's or an alias's state.
func Key(prefix string, kind Kind, name string) string {
	return strings.TrimSuffix(prefix, "/") + "/" + string(kind) + "/" + name
}

// ParseKey splits a key under prefix into its kind and name.
func ParseKey(prefix, key string) (Kind, string, error) {
	rest, ok := strings.CutPrefix(key, strings.TrimSuffix(prefix, "/")+"/")
	if !ok {
		return "", "", fmt.Errorf("key %q is not under the prefix %q", key, prefix)
	}
	kind, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("key %q: want %s/groups/<group> or %s/aliases/<alias>", key, prefix, prefix)
	}
	switch Kind(kind) {
	case KindGroup, KindAlias, KindMember, KindSpend:
		return Kind(kind), name, nil
	}
	return "", "", fmt.Errorf("key %q: unknown kind %q (groups, aliases, members, spend)", key, kind)
}

// DecodeGroup reads a group's value, strictly: unknown fields, wrong
// types, a bad address or a negative weight are errors.
func DecodeGroup(value []byte) (Group, error) {
	var g Group
	if err := decodeStrict(value, &g); err != nil {
		return g, err
	}
	seen := map[string]bool{}
	for i, ep := range g.Endpoints {
		if _, port, err := net.SplitHostPort(ep.Address); err != nil || port == "" {
			return g, fmt.Errorf("endpoints[%d].address %q: want host:port", i, ep.Address)
		}
		if seen[ep.Address] {
			return g, fmt.Errorf("endpoints[%d].address %q is listed twice", i, ep.Address)
		}
		seen[ep.Address] = true
		if ep.Weight != nil && (*ep.Weight < 0 || *ep.Weight > 1000) {
			return g, fmt.Errorf("endpoints[%d].weight %g: want 0 to 1000", i, *ep.Weight)
		}
	}
	return g, nil
}

// DecodeAlias reads an alias's value, strictly.
func DecodeAlias(value []byte) (Alias, error) {
	var a Alias
	if err := decodeStrict(value, &a); err != nil {
		return a, err
	}
	if a.Weights == nil {
		return a, fmt.Errorf(`want {"weights": {"<group>": <weight>, ...}}`)
	}
	for g, w := range a.Weights {
		if w < 0 || w > 1000 {
			return a, fmt.Errorf("weights[%q] %d: want 0 to 1000", g, w)
		}
	}
	return a, nil
}

func decodeStrict(value []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// Change is one key's new value at a revision; a nil value deletes it.
type Change struct {
	Key      string
	Value    []byte
	Revision int64 // the key's modification revision
}

// Rejected is a change refused: the key keeps its last good value.
type Rejected struct {
	Key string
	Err error
}

func (r Rejected) Error() string { return fmt.Sprintf("registry key %s: %v", r.Key, r.Err) }

// Apply returns the snapshot with the changes made, at revision rev. The
// changes must come after the snapshot's revision; one at or before it is
// already in it and is skipped, so a change is never applied twice.
// Refused changes leave their keys as they were and are returned.
func (s *Snapshot) Apply(prefix string, rev int64, changes []Change) (*Snapshot, []Rejected) {
	next := &Snapshot{Revision: max(rev, s.Revision), Groups: maps.Clone(s.Groups), Aliases: maps.Clone(s.Aliases),
		Members: maps.Clone(s.Members), Spend: maps.Clone(s.Spend)}
	if next.Members == nil {
		next.Members = map[string]Member{}
	}
	if next.Spend == nil {
		next.Spend = map[string]Book{}
	}
	var rejected []Rejected
	for _, c := range changes {
		if c.Revision != 0 && c.Revision <= s.Revision {
			continue
		}
		if err := next.set(prefix, c); err != nil {
			rejected = append(rejected, Rejected{Key: c.Key, Err: err})
		}
	}
	return next, rejected
}

// Load builds a snapshot from a full read at revision rev. A key refused
// keeps its value from prev, the snapshot before, if it had one.
func Load(prefix string, rev int64, kvs []Change, prev *Snapshot) (*Snapshot, []Rejected) {
	s := Empty()
	s.Revision = rev
	var rejected []Rejected
	for _, c := range kvs {
		if err := s.set(prefix, c); err != nil {
			rejected = append(rejected, Rejected{Key: c.Key, Err: err})
			if prev != nil {
				s.keep(prefix, c.Key, prev)
			}
		}
	}
	return s, rejected
}

func (s *Snapshot) set(prefix string, c Change) error {
	kind, name, err := ParseKey(prefix, c.Key)
	if err != nil {
		return err
	}
	switch kind {
	case KindGroup:
		return setKey(s.Groups, name, c.Value, DecodeGroup)
	case KindAlias:
		return setKey(s.Aliases, name, c.Value, DecodeAlias)
	case KindMember:
		return setKey(s.Members, name, c.Value, decodeMember)
	case KindSpend:
		return setKey(s.Spend, name, c.Value, DecodeBook)
	}
	return nil
}

// setKey puts the decoded value under name, or deletes name for a nil
// value; a value that does not decode leaves the map as it was.
func setKey[T any](m map[string]T, name string, value []byte, decode func([]byte) (T, error)) error {
	if value == nil {
		delete(m, name)
		return nil
	}
	v, err := decode(value)
	if err != nil {
		return err
	}
	m[name] = v
	return nil
}

// DecodeBook reads a spend key's value, strictly: amounts are finite and
// not negative, days and months are dates.
func DecodeBook(value []byte) (Book, error) {
	var b Book
	if err := decodeStrict(value, &b); err != nil {
		return b, err
	}
	check := func(what string, s Spend) error {
		if s.DayUSD < 0 || s.MonthUSD < 0 || math.IsInf(s.DayUSD+s.MonthUSD, 0) {
			return fmt.Errorf("%s: amounts must be finite and not negative", what)
		}
		if _, err := time.Parse(time.DateOnly, s.Day); err != nil {
			return fmt.Errorf("%s: day %q is not a date (2006-01-02)", what, s.Day)
		}
		if _, err := time.Parse("2006-01", s.Month); err != nil {
			return fmt.Errorf("%s: month %q is not a month (2006-01)", what, s.Month)
		}
		return nil
	}
	if err := check("total", b.Total); err != nil {
		return b, err
	}
	for name, s := range b.Clients {
		if err := check(fmt.Sprintf("clients[%q]", name), s); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Spent is what the books of a gateway, other than the one under key
// self, say was spent on day and in month, in all and by client; books
// of another day or month count nothing for it.
func (s *Snapshot) Spent(gateway, self, day, month string) (total Spend, clients map[string]Spend) {
	total = Spend{Day: day, Month: month}
	clients = map[string]Spend{}
	add := func(to *Spend, from Spend) {
		if from.Day == day {
			to.DayUSD += from.DayUSD
		}
		if from.Month == month {
			to.MonthUSD += from.MonthUSD
		}
	}
	for key, b := range s.Spend {
		if key == self || b.Gateway != gateway {
			continue
		}
		add(&total, b.Total)
		for name, cs := range b.Clients {
			c := clients[name]
			c.Day, c.Month = day, month
			add(&c, cs)
			clients[name] = c
		}
	}
	return total, clients
}

func decodeMember(value []byte) (Member, error) {
	var m Member
	err := decodeStrict(value, &m)
	return m, err
}

// Share is what one of n members gets of a limit: the limit split as
// evenly as whole numbers allow, the first limit%n members by ID one
// more, so that the shares add up to the limit exactly. With more members
// than the limit, the last get none.
func Share(limit int, rank, n int) int {
	if n <= 1 {
		return limit
	}
	q, r := limit/n, limit%n
	if rank < r {
		return q + 1
	}
	return q
}

func (s *Snapshot) keep(prefix, key string, prev *Snapshot) {
	kind, name, err := ParseKey(prefix, key)
	if err != nil {
		return
	}
	switch kind {
	case KindGroup:
		if g, ok := prev.Groups[name]; ok {
			s.Groups[name] = g
		}
	case KindAlias:
		if a, ok := prev.Aliases[name]; ok {
			s.Aliases[name] = a
		}
	case KindSpend:
		if b, ok := prev.Spend[name]; ok {
			s.Spend[name] = b
		}
	}
}
