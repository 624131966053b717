// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"net/http"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/tidwall/sjson"
)

// ClassHeader names a request's priority class, from a trusted client.
const ClassHeader = "X-Hybrid-Class"

// classOf is the request's priority class: its client's, or the one a
// trusted client names in ClassHeader; and whether it waits for
// self-hosted rather than go to a cloud. The header is removed: it never
// reaches an upstream of a gateway with classes.
func classOf(r *http.Request, cl *clients.Caller) (priority.Class, bool) {
	named := r.Header[ClassHeader]
	if named != nil {
		delete(r.Header, ClassHeader)
	}
	if cl == nil {
		return priority.Standard, false
	}
	c := cl.Class
	if cl.Trusted && len(named) == 1 {
		if n, err := priority.Parse(named[0]); err == nil {
			c = n
		}
	}
	return c, cl.Sheddable
}

// withoutPriority removes the client's own top-level priority field from
// body (top: its fields, found again), for every target, where a group
// sends vLLM the class's: vLLM reads the last of repeated fields, which
// could be the client's. A repeated one was refused already (the field
// is watched, see protocol.Scan).
func withoutPriority(body []byte, top *protocol.Request, watch []string) []byte {
	if !top.Gives("priority") {
		return body // as the scan found it: no second look at the body
	}
	out, err := sjson.DeleteBytes(body, "priority")
	if err != nil {
		return body
	}
	*top, _ = protocol.Scan(out, watch...)
	return out
}
