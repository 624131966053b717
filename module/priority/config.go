// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package priority

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Config shares a vLLM group's red line by class: interactive requests
// may fill each endpoint to its red line, standard and batch requests
// only to their share of it, so that the rest stays free for the classes
// above them. A class past its share moves on to the alias's next target
// (the cloud), as at the red line; while the group overflows, standard
// and batch requests leave it and interactive ones stay, up to the red
// line.
type Config struct {
	// The share of each endpoint's red line (0..1] that standard
	// requests may fill. Default: 0.8.
	Standard float64 `json:"standard,omitempty"`

	// The share that batch requests may fill, at most standard's.
	// Default: 0.5.
	Batch float64 `json:"batch,omitempty"`

	// Send each request's class to vLLM as its `priority` field
	// (interactive 0, standard 1, batch 2; lower runs first), for
	// endpoints started with --scheduling-policy priority. A client's
	// own `priority` field is replaced. Default: false.
	Priority bool `json:"priority,omitempty"`

	// The most requests of sheddable clients that wait in the gateway
	// for a slot of the group (they never go to a cloud target); one
	// more is answered 429 at once. Default: 64.
	QueueSize int `json:"queue_size,omitempty"`

	// The longest a sheddable request waits for a slot; then it is
	// answered 429 with Retry-After. Default: 10s.
	QueueWait caddy.Duration `json:"queue_wait,omitempty"`
}

// Defaults of Config.
const (
	DefaultStandard  = 0.8
	DefaultBatch     = 0.5
	DefaultQueueSize = 64
	DefaultQueueWait = 10 * time.Second
)

// Shares is a Config resolved: what each class may fill of a red line,
// and the queue of sheddable requests.
type Shares struct {
	share     [numClasses]float64
	Priority  bool
	Wait      time.Duration
	QueueSize int
	// the queue of sheddable requests: the group's own, or one it keeps
	// across reloads (see upstream.GroupState)
	Queue *Waitlist
}

// Resolve checks the config and fills in its defaults.
func (c *Config) Resolve() (*Shares, error) {
	std, batch := c.Standard, c.Batch
	if std == 0 {
		std = DefaultStandard
	}
	if batch == 0 {
		batch = min(DefaultBatch, std)
	}
	switch {
	case std < 0 || std > 1 || batch < 0 || batch > 1:
		return nil, fmt.Errorf("classes: shares are in (0, 1]: standard %v, batch %v", std, batch)
	case batch > std:
		return nil, fmt.Errorf("classes: batch's share (%v) is above standard's (%v): a lower class never keeps more", batch, std)
	case c.QueueSize < 0 || c.QueueWait < 0:
		return nil, fmt.Errorf("classes: queue size and wait must not be negative")
	}
	s := &Shares{Priority: c.Priority, Wait: time.Duration(c.QueueWait)}
	s.share[Interactive], s.share[Standard], s.share[Batch] = 1, std, batch
	if s.Wait == 0 {
		s.Wait = DefaultQueueWait
	}
	s.QueueSize = c.QueueSize
	if s.QueueSize == 0 {
		s.QueueSize = DefaultQueueSize
	}
	s.Queue = NewWaitlist(s.QueueSize)
	return s, nil
}

// Share is what class c may fill of each endpoint's red line.
func (s *Shares) Share(c Class) float64 { return s.share[c] }

// Limit is how many requests in flight class c may find on an endpoint
// whose red line is redLine and still be sent to it: the red line for
// interactive requests, its share (rounded down) for the others. A red
// line of 0 (none) or below (this gateway's share is nothing) is kept.
func (s *Shares) Limit(c Class, redLine int64) int64 {
	if redLine <= 0 || c == Interactive || c >= numClasses {
		return redLine
	}
	n := int64(float64(redLine) * s.share[c])
	if n <= 0 {
		return -1 // a red line that admits nothing (see upstream's redLineNone)
	}
	return n
}
