// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"sync"
	"testing"
	"time"
)

// limitedWriter is an attempt writer whose cancel is seen on a channel.
func limitedWriter() (*attemptWriter, <-chan struct{}) {
	canceled := make(chan struct{}, 1)
	aw := &attemptWriter{guard: answerGuard{cancel: func() {
		select {
		case canceled <- struct{}{}:
		default:
		}
	}}}
	return aw, canceled
}

// Passing a limit cancels the attempt. Before the commit the timeout
// marks it expired and the first byte's limit abandoned, so that what the
// proxy writes after (Caddy's own 499 for a canceled request) does not
// count; after the commit the timeout only cancels it, and the first
// byte's limit leaves it alone.
func TestLimitsMarkOnlyAPendingAttempt(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limits     *sync.Pool
		pending    int32 // the state a pending attempt is left in
		cutsAnswer bool  // a committed one is canceled
	}{
		{"timeout", timeoutLimits, attemptExpired, true},
		{"first_byte_timeout", firstByteLimits, attemptAbandoned, false},
	} {
		aw, canceled := limitedWriter()
		lt := startLimit(tc.limits, aw, time.Millisecond)
		<-canceled
		lt.stop()
		if s := aw.state.Load(); s != tc.pending {
			t.Errorf("%s: state %d after the limit, want %d", tc.name, s, tc.pending)
		}
		aw.WriteHeader(statusClientClosed)
		if aw.status != 0 {
			t.Errorf("%s: the proxy's 499 after the limit was taken: status %d", tc.name, aw.status)
		}

		committed, canceled := limitedWriter()
		committed.state.Store(attemptCommitted)
		lt = startLimit(tc.limits, committed, time.Hour)
		lt.fire() // as if it ran out now
		lt.stop()
		select {
		case <-canceled:
			if !tc.cutsAnswer {
				t.Errorf("%s canceled a committed answer", tc.name)
			}
		default:
			if tc.cutsAnswer {
				t.Errorf("%s left a committed answer running", tc.name)
			}
		}
		if s := committed.state.Load(); s != attemptCommitted {
			t.Errorf("%s: a committed answer's state became %d", tc.name, s)
		}
	}
}

// A stopped limit does nothing, even if its timer's function runs late,
// and the pooled timer it leaves never reaches the attempt it served.
func TestStoppedLimitReachesNoAttempt(t *testing.T) {
	aw, canceled := limitedWriter()
	lt := startLimit(timeoutLimits, aw, time.Hour)
	lt.stop()
	lt.fire() // a run that began before stop
	next, _ := limitedWriter()
	again := startLimit(timeoutLimits, next, time.Hour)
	again.stop()
	select {
	case <-canceled:
		t.Error("a stopped limit canceled its attempt")
	default:
	}
	if s := aw.state.Load(); s != attemptPending {
		t.Errorf("a stopped limit changed its attempt's state to %d", s)
	}
}
