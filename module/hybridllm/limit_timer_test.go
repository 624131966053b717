// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"testing"
	"time"
)

// limitedWriter is an attempt writer whose cancel is seen on a channel.
func limitedWriter() (*attemptWriter, <-chan struct{}) {
	canceled := make(chan struct{}, 1)
	aw := &attemptWriter{cancel: func() {
		select {
		case canceled <- struct{}{}:
		default:
		}
	}}
	return aw, canceled
}

// The target's timeout cancels the attempt and, before the commit, marks
// it expired, so that what the proxy writes after (Caddy's own 499 for a
// canceled request) does not count; after the commit it only cancels.
func TestTimeoutLimitExpiresAPendingAttempt(t *testing.T) {
	aw, canceled := limitedWriter()
	lt := startLimit(timeoutLimits, aw, time.Millisecond)
	<-canceled
	lt.stop()
	if s := aw.state.Load(); s != attemptExpired {
		t.Errorf("state %d after the timeout, want expired", s)
	}
	aw.WriteHeader(statusClientClosed)
	if aw.status != 0 {
		t.Errorf("the proxy's 499 after the timeout was taken: status %d", aw.status)
	}

	committed, canceled := limitedWriter()
	committed.state.Store(attemptCommitted)
	lt = startLimit(timeoutLimits, committed, time.Millisecond)
	<-canceled
	lt.stop()
	if s := committed.state.Load(); s != attemptCommitted {
		t.Errorf("a committed answer's state became %d", s)
	}
}

// The first byte's limit abandons a pending attempt, never a committed
// one.
func TestFirstByteLimitAbandonsOnlyAPendingAttempt(t *testing.T) {
	aw, canceled := limitedWriter()
	lt := startLimit(firstByteLimits, aw, time.Millisecond)
	<-canceled
	lt.stop()
	if s := aw.state.Load(); s != attemptAbandoned {
		t.Errorf("state %d after the first-byte limit, want abandoned", s)
	}

	committed, canceled := limitedWriter()
	committed.state.Store(attemptCommitted)
	lt = startLimit(firstByteLimits, committed, time.Hour)
	lt.fire() // as if it ran out now
	lt.stop()
	select {
	case <-canceled:
		t.Error("the first-byte limit canceled a committed answer")
	default:
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
