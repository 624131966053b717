// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package registrytest runs a real etcd inside a test's process, on
// loopback, for the registry's tests.
//
// It is a leaf for tests: it imports nothing of the product.
package registrytest

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is one etcd member and a client of it.
type Etcd struct {
	t      *testing.T
	Dir    string // its data; a new one starts it without its history
	URL    string // its client URL
	peer   string
	e      *embed.Etcd
	Client *clientv3.Client
	// with StartTLS: the certificates; clients must present one
	Certs *Certs
}

// Start starts an etcd that stops with the test.
func Start(t *testing.T) *Etcd {
	t.Helper()
	return start(t, nil)
}

// StartTLS starts an etcd that serves its clients over TLS, with a
// certificate of a CA of its own, and asks them for theirs.
func StartTLS(t *testing.T) *Etcd {
	t.Helper()
	c := NewCerts(t, t.TempDir())
	return start(t, &c)
}

func start(t *testing.T, certs *Certs) *Etcd {
	scheme := "http://"
	if certs != nil {
		scheme = "https://"
	}
	te := &Etcd{t: t, Dir: t.TempDir(), URL: scheme + FreeAddr(t), peer: "http://" + FreeAddr(t), Certs: certs}
	te.Restart()
	t.Cleanup(te.Stop)
	cc := clientv3.Config{Endpoints: []string{te.URL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if certs != nil {
		info := transport.TLSInfo{CertFile: certs.ClientCert, KeyFile: certs.ClientKey, TrustedCAFile: certs.CA}
		tc, err := info.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cc.TLS = tc
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	te.Client = cli
	return te
}

// Restart starts the member again after Stop (on its ports, from Dir).
func (te *Etcd) Restart() {
	te.t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = te.Dir
	cu, _ := url.Parse(te.URL)
	pu, _ := url.Parse(te.peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	if c := te.Certs; c != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: c.ServerCert, KeyFile: c.ServerKey, TrustedCAFile: c.CA, ClientCertAuth: true}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		te.t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		te.t.Fatal("etcd did not start in 30s")
	}
	te.e = e
}

// Stop stops the member; its data stays in Dir.
func (te *Etcd) Stop() {
	if te.e != nil {
		te.e.Close()
		te.e = nil
	}
}

// Put writes a key and returns the revision.
func (te *Etcd) Put(key, value string) int64 {
	te.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := te.Client.Put(ctx, key, value)
	if err != nil {
		te.t.Fatal(err)
	}
	return resp.Header.Revision
}

// Get reads a key's value ("" when absent).
func (te *Etcd) Get(key string) string {
	te.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := te.Client.Get(ctx, key)
	if err != nil {
		te.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// Delete removes a key and returns the revision.
func (te *Etcd) Delete(key string) int64 {
	te.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := te.Client.Delete(ctx, key)
	if err != nil {
		te.t.Fatal(err)
	}
	return resp.Header.Revision
}

// FreeAddr is a loopback address no one listens on now.
func FreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
