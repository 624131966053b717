// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

func TestServerRefuseResume(t *testing.T) {
	srv := start(t, simulator.NewVLLM(simulator.VLLMConfig{}))
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	healthy := func() error {
		resp, err := client.Get(srv.URL() + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := healthy(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Refuse(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Refuse(); err != nil {
		t.Fatalf("second Refuse: %v", err)
	}
	if err := healthy(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("while refusing: %v, want connection refused", err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := healthy(); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Resume(); !errors.Is(err, simulator.ErrServerClosed) {
		t.Fatalf("Resume after Close: %v", err)
	}
}

// TestServerRefuseKeepsInFlight checks that a request in flight when the
// listener closes still completes.
func TestServerRefuseKeepsInFlight(t *testing.T) {
	v := simulator.NewVLLM(simulator.VLLMConfig{TTFT: 100 * time.Millisecond})
	srv := start(t, v)
	ch := background(context.Background(), srv.URL()+"/v1/chat/completions", chatBody)
	waitLoad(t, v, 1, 0)
	if err := srv.Refuse(); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.err != nil || r.status != 200 {
		t.Fatalf("in-flight request: %d %v", r.status, r.err)
	}
}

func TestStartRejectsNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:80"} {
		if _, err := simulator.Start(addr, http.NotFoundHandler()); err == nil {
			t.Errorf("Start(%q) succeeded", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1"} {
		if err := simulator.CheckLoopback(addr); err != nil {
			t.Errorf("CheckLoopback(%q): %v", addr, err)
		}
	}
}

func TestStall(t *testing.T) {
	v := simulator.NewVLLM(simulator.VLLMConfig{})
	returned := make(chan struct{}, 1)
	srv := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	url := srv.URL() + "/v1/chat/completions"

	v.SetFailures(simulator.Failures{Stall: 50 * time.Millisecond})
	begin := time.Now()
	expect(t, post(t, url, chatBody), 200, "")
	if d := time.Since(begin); d < 50*time.Millisecond {
		t.Errorf("stalled request took %v", d)
	}
	<-returned

	// A long stall ends when the client gives up, without a response.
	v.SetFailures(simulator.Failures{Stall: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r := recv(t, background(ctx, url, chatBody)); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("stalled request: status %d err %v", r.status, r.err)
	}
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("handler still stalled after the client left")
	}
}
