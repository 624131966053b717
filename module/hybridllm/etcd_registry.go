// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/proclock"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
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

// config builds the TLS configuration.
func (rt *RegistryTLS) config() (*tls.Config, error) {
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

// fleet is one watched registry, shared by the gateways (and their
// reloads) that name the same endpoints and prefix.
type fleet struct {
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

	mu       sync.Mutex
	gateways []*Gateway // every provisioned gateway on it; each applies its groups
}

// memberTTL is the lease of a gateway's membership: a replica that dies
// leaves the others' count within it.
const memberTTL = 5

// fleetShare is a process's place among the fleet's live members.
type fleetShare struct{ rank, n int }

var fleets = reload.NewPool[*fleet]()

// registryApplied is what a gateway applied of its registry.
type registryApplied struct {
	mu      sync.Mutex   // one snapshot applied at a time
	rev     atomic.Int64 // the revision last applied
	notes   sync.Map     // names the registry has and the gateway lacks, logged
	weights sync.Map     // alias|group: the weight last set from the registry
}

// begin starts the watch and the membership, once: when the first
// gateway on the registry runs (a config that is only validated never
// joins the fleet, even briefly).
func (f *fleet) begin() {
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

func (f *fleet) Destruct() error {
	f.cancel()
	f.began.Do(func() { close(f.done) }) // never begun: nothing to wait for
	<-f.done
	return f.client.Close()
}

func (rc *RegistryConfig) prefix(gw string) string {
	if rc.Prefix != "" {
		return strings.TrimSuffix(rc.Prefix, "/")
	}
	return "/hybrid-llm/" + gw
}

// provisionRegistry joins the gateway to its registry: the watcher starts
// (or is shared), and the gateway applies the registry's state now and on
// every change.
func (g *Gateway) provisionRegistry() error {
	rc := g.Registry
	if len(rc.Endpoints) == 0 {
		return fmt.Errorf("registry: no etcd endpoints")
	}
	repl := caddy.NewReplacer()
	endpoints := make([]string, 0, len(rc.Endpoints))
	for _, e := range rc.Endpoints {
		for _, e := range strings.FieldsFunc(repl.ReplaceAll(e, ""), func(r rune) bool { return r == ',' || r == ' ' }) {
			endpoints = append(endpoints, e)
		}
	}
	if len(endpoints) == 0 {
		return fmt.Errorf("registry: the etcd endpoints %q resolve to none", rc.Endpoints)
	}
	prefix := rc.prefix(g.Name)
	key := strings.Join(endpoints, ",") + "|" + prefix
	f, _, err := fleets.Acquire(key, func() (*fleet, error) {
		dial := time.Duration(rc.DialTimeout)
		if dial <= 0 {
			dial = 5 * time.Second
		}
		cc := clientv3.Config{
			Endpoints: endpoints, DialTimeout: dial,
			Username: repl.ReplaceAll(rc.Username, ""), Password: repl.ReplaceAll(rc.Password, ""),
			Logger: g.logger.Named("etcd").WithOptions(zap.IncreaseLevel(zap.ErrorLevel)),
		}
		if rc.TLS != nil {
			var err error
			if cc.TLS, err = rc.TLS.config(); err != nil {
				return nil, err
			}
		}
		cli, err := clientv3.New(cc)
		if err != nil {
			return nil, fmt.Errorf("registry: %v", err)
		}
		f := &fleet{key: key, prefix: prefix, client: cli, done: make(chan struct{}), logger: g.logger,
			storage: g.storage, file: "hybrid_llm/registry/" + proclock.FileName(key) + ".json"}
		f.watcher = &registry.Watcher{Client: cli, Prefix: prefix, Logger: g.logger, OnSnapshot: f.apply}
		if s, err := f.readSnapshot(); err == nil {
			f.watcher.Seed(s)
			g.logger.Info("registry: starting from the last snapshot applied", zap.String("file", f.file), zap.Int64("revision", s.Revision))
		}
		f.host, _ = os.Hostname()
		var suffix [4]byte
		_, _ = rand.Read(suffix[:])
		f.member = fmt.Sprintf("%s-%d-%x", proclock.FileName(f.host), os.Getpid(), suffix)
		f.ctx, f.cancel = context.WithCancel(context.Background())
		return f, nil
	})
	if err != nil {
		return err
	}
	g.fleet, g.applied = f, new(registryApplied)
	if g.money.spend != nil {
		g.spendName = spendName(g.Name)
	}
	f.mu.Lock()
	f.gateways = append(f.gateways, g)
	f.mu.Unlock()
	// the watcher stores a snapshot before it hands it to the gateways,
	// which now include this one: read under the lock, the snapshot
	// applied here is never older than one the watcher applies after
	g.applied.mu.Lock()
	g.applyRegistryLocked(f.watcher.Snapshot())
	g.applied.mu.Unlock()
	return nil
}

func (g *Gateway) releaseRegistry() {
	f := g.fleet
	if f == nil {
		return
	}
	f.mu.Lock()
	if i := slices.Index(f.gateways, g); i >= 0 {
		f.gateways = slices.Delete(f.gateways, i, i+1)
	}
	f.mu.Unlock()
	_ = fleets.Release(f.key)
}

// keepMember holds the process's membership key under a lease, and
// takes a new lease whenever the old one is lost (etcd restarted or
// unreachable longer than the lease); at the end it revokes it, so that
// the others count one fewer at once.
func (f *fleet) keepMember(ctx context.Context, host string) {
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

// share is the process's place among the members the snapshot lists (and
// itself, before its own key is seen).
func (f *fleet) share(s *registry.Snapshot) fleetShare {
	ids := make([]string, 0, len(s.Members)+1)
	for id := range s.Members {
		ids = append(ids, id)
	}
	if _, ok := s.Members[f.member]; !ok {
		ids = append(ids, f.member)
	}
	slices.Sort(ids)
	return fleetShare{rank: slices.Index(ids, f.member), n: len(ids)}
}

// apply hands a new snapshot to the fleet's gateways and keeps it on disk.
func (f *fleet) apply(s *registry.Snapshot) {
	f.mu.Lock()
	gws := slices.Clone(f.gateways)
	f.mu.Unlock()
	for _, g := range gws {
		g.applyRegistry(s)
	}
	if err := f.writeSnapshot(s); err != nil {
		f.logger.Warn("registry: could not keep the snapshot on disk", zap.String("file", f.file), zap.Error(err))
	}
}

// applyRegistry sets the gateway's drains and weights from the snapshot:
// a group or endpoint is drained when the registry says so, and not when
// it does not; an alias's weights are the registry's where it has them,
// else the config's. Names the gateway does not have are logged.
func (g *Gateway) applyRegistry(s *registry.Snapshot) {
	// the watcher and the gateway's provisioning may both apply, one at
	// a time (provisioning reads the watcher's snapshot under the lock:
	// see provisionRegistry). Not ordered by revision: an etcd restored
	// or started afresh is at a lower one, and its snapshots must apply.
	g.applied.mu.Lock()
	defer g.applied.mu.Unlock()
	g.applyRegistryLocked(s)
}

func (g *Gateway) applyRegistryLocked(s *registry.Snapshot) {
	share := g.fleet.share(s)
	g.fleetShare.Store(&share)
	g.applySpend(s)
	for name, grp := range g.Groups {
		if grp.shared == nil {
			continue
		}
		if vg := grp.vllm; vg != nil {
			vg.share.Store(&share)
		}
		rg := s.Groups[name]
		grp.shared.drained.Store(rg.Drained)
		if vg := grp.vllm; vg != nil {
			vg.applyEndpoints(rg.Endpoints, g.logger)
		} else if len(rg.Endpoints) > 0 {
			g.registryNote("registry: endpoints are listed for vllm groups only; the group's are its config's", zap.String("group", name))
		}
	}
	for name := range s.Groups {
		if g.Groups[name] == nil {
			g.registryNote("registry: a group the gateway does not have", zap.String("group", name))
		}
	}
	for name, al := range g.aliases {
		ra := s.Aliases[name]
		for _, ws := range al.sets {
			for i, t := range al.Targets[ws.start:ws.end] {
				if w, ok := ra.Weights[t.Group]; ok {
					g.setRegistryWeight(al, t.Group, w)
				} else {
					g.restoreWeight(al, t.Group, ws.configured[i])
				}
			}
		}
	}
	for name := range s.Aliases {
		if g.aliases[name] == nil {
			g.registryNote("registry: an alias the gateway does not have", zap.String("alias", name))
		}
	}
	g.applied.rev.Store(s.Revision)
}

// registryNote logs what a snapshot names that the gateway lacks, once
// per message and name.
func (g *Gateway) registryNote(msg string, field zap.Field) {
	key := msg + "|" + field.String
	if _, seen := g.applied.notes.LoadOrStore(key, true); !seen {
		g.logger.Warn(msg, field)
	}
}

// setRegistryWeight sets a member's weight from the registry; unchanged
// weights are left alone, so that the health scheduler's own moves are
// not reset on every snapshot.
func (g *Gateway) setRegistryWeight(al *Alias, group string, w int) {
	key := al.name + "|" + group
	if prev, had := g.applied.weights.Load(key); had && prev.(int) == w {
		return
	}
	g.applied.weights.Store(key, w)
	g.setWeight(al, group, w)
}

// restoreWeight sets a member's weight back to its configured one, w,
// once the registry no longer names it; a member the registry never
// weighed keeps the config's weight, as provisioned, and the health
// scheduler's moves.
func (g *Gateway) restoreWeight(al *Alias, group string, w int) {
	key := al.name + "|" + group
	if prev, had := g.applied.weights.Load(key); !had || prev.(int) == w {
		return
	}
	g.applied.weights.Store(key, w)
	g.setWeight(al, group, w)
}

// writeDrain records a group's or endpoint's drain flag, drained, in the
// registry; the watch applies it, on this gateway as on the others.
func (f *fleet) writeDrain(ctx context.Context, group, endpoint string, drained bool) (int64, error) {
	return f.update(ctx, registry.Key(f.prefix, registry.KindGroup, group), func(raw []byte) ([]byte, error) {
		var rg registry.Group
		if raw != nil {
			var err error
			if rg, err = registry.DecodeGroup(raw); err != nil {
				return nil, err
			}
		}
		if endpoint == "" {
			rg.Drained = drained
		} else {
			i := slices.IndexFunc(rg.Endpoints, func(ep registry.Endpoint) bool { return ep.Address == endpoint })
			if i < 0 {
				rg.Endpoints = append(rg.Endpoints, registry.Endpoint{Address: endpoint})
				i = len(rg.Endpoints) - 1
			}
			rg.Endpoints[i].Drained = drained
		}
		return json.Marshal(rg)
	})
}

// awaitRegistry waits, up to two seconds, until the watch has applied
// the registry's revision rev here: an operator who drained sees it in
// this gateway's state when the call returns.
func (g *Gateway) awaitRegistry(rev int64) {
	for deadline := time.Now().Add(2 * time.Second); g.applied.rev.Load() < rev && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// writeWeight records an alias member's weight in the registry.
func (f *fleet) writeWeight(ctx context.Context, alias, group string, w int) (int64, error) {
	return f.update(ctx, registry.Key(f.prefix, registry.KindAlias, alias), func(raw []byte) ([]byte, error) {
		ra := registry.Alias{Weights: map[string]int{}}
		if raw != nil {
			var err error
			if ra, err = registry.DecodeAlias(raw); err != nil {
				return nil, err
			}
		}
		ra.Weights[group] = w
		return json.Marshal(ra)
	})
}

// update changes a key by read, modify and compare-and-swap, again when
// another writer came between.
func (f *fleet) update(ctx context.Context, key string, change func([]byte) ([]byte, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for range 10 {
		resp, err := f.client.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("the registry (etcd) cannot be reached: %w", err)
		}
		var raw []byte
		var modRev int64
		if len(resp.Kvs) > 0 {
			raw, modRev = resp.Kvs[0].Value, resp.Kvs[0].ModRevision
		}
		value, err := change(raw)
		if err != nil {
			return 0, fmt.Errorf("registry key %s holds a value the gateway refuses (%v): fix or delete it first", key, err)
		}
		txn, err := f.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(value))).Commit()
		if err != nil {
			return 0, fmt.Errorf("the registry (etcd) cannot be reached: %w", err)
		}
		if txn.Succeeded {
			return txn.Header.Revision, nil
		}
	}
	return 0, errors.New("the registry key kept changing under the update; try again")
}

// registryState is the registry's part of the admin state.
func (g *Gateway) registryState() *adminapi.RegistryState {
	f := g.fleet
	if f == nil {
		return nil
	}
	sh := f.share(f.watcher.Snapshot())
	st := &adminapi.RegistryState{Prefix: f.prefix, Revision: g.applied.rev.Load(), Resyncs: f.watcher.Resyncs(), Member: f.member, Members: sh.n}
	if at := f.watcher.LastContact(); !at.IsZero() {
		age := time.Since(at).Seconds()
		st.LastContact, st.StaleSeconds = &at, &age
	}
	return st
}

func (f *fleet) readSnapshot() (*registry.Snapshot, error) {
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

func (f *fleet) writeSnapshot(s *registry.Snapshot) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return f.storage.Store(ctx, f.file, b)
}
