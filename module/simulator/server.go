// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// ErrServerClosed is returned by Server methods after Close or Shutdown.
var ErrServerClosed = errors.New("simulator: server closed")

// CheckLoopback returns an error unless addr ("host:port") names a loopback
// host: "localhost" or a loopback IP. An empty host (all interfaces) is
// rejected.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("address %q is not a loopback address", addr)
}

// Server runs a handler on a real loopback listener and can refuse
// connections on demand.
type Server struct {
	handler http.Handler
	addr    string

	mu      sync.Mutex
	ln      net.Listener // nil while refusing
	cur     *http.Server // serves ln
	servers []*http.Server
	closed  bool
	wg      sync.WaitGroup

	// the connections of every server not serving a request: new ones
	// (accepted, nothing read yet) and idle ones. A lock of their own:
	// http.Server.Close, called under mu, waits for the hooks that keep it.
	connMu sync.Mutex
	quiet  map[net.Conn]struct{}
}

// Start listens on addr (for example "127.0.0.1:0"; the host must be
// loopback, see CheckLoopback) and serves h on it.
func Start(addr string, h http.Handler) (*Server, error) {
	if err := CheckLoopback(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{handler: h, addr: ln.Addr().String()}
	s.serveLocked(ln)
	return s, nil
}

// TB is what StartVLLM needs of a test: testing.TB's Helper, Fatal and
// Cleanup.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// StartVLLM runs a vLLM simulator of cfg on a free loopback port until the
// test ends; it serves qwen unless cfg names its models.
func StartVLLM(tb TB, cfg VLLMConfig) (*VLLM, *Server) {
	tb.Helper()
	if cfg.ServedModelNames == nil {
		cfg.ServedModelNames = []string{"qwen"}
	}
	v := NewVLLM(cfg)
	s, err := Start("127.0.0.1:0", v)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return v, s
}

func (s *Server) serveLocked(ln net.Listener) {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState:         s.connState,
	}
	s.ln, s.cur = ln, srv
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(ln)
	}()
}

// connState keeps track of the connections that serve no request.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		if s.quiet == nil {
			s.quiet = make(map[net.Conn]struct{})
		}
		s.quiet[c] = struct{}{}
	default:
		delete(s.quiet, c)
	}
}

// Addr returns the host:port actually bound.
func (s *Server) Addr() string { return s.addr }

// URL returns "http://" + Addr().
func (s *Server) URL() string { return "http://" + s.addr }

// Refuse closes the listener and every connection that serves no request
// (idle ones, and new ones that sent nothing yet, which a client may hold
// in its pool), so new connections get "connection refused". Requests in
// flight run to completion, after which their connections are closed
// too. Refusing twice is a no-op.
func (s *Server) Refuse() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if s.ln == nil {
		return nil
	}
	err := s.ln.Close()
	s.cur.SetKeepAlivesEnabled(false) // in flight: closed once answered
	s.connMu.Lock()
	for c := range s.quiet {
		_ = c.Close()
	}
	clear(s.quiet)
	s.connMu.Unlock()
	s.ln, s.cur = nil, nil
	return err
}

// Resume listens again on the same address and serves. Resuming a server
// that is not refusing is a no-op. It fails if the port was taken
// meanwhile.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.serveLocked(ln)
	return nil
}

// Close stops listening and closes every connection at once, including
// those with requests in flight.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.ln, s.cur = nil, nil
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.Close())
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}

// Shutdown stops listening and waits, until ctx ends, for requests in
// flight to finish; see http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.ln, s.cur = nil, nil
	servers := append([]*http.Server(nil), s.servers...)
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.wg.Wait()
	return nil
}
