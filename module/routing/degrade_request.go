// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"github.com/tidwall/gjson"
)

// DegradeRecord is what a request's degradation was: where it was meant
// to go, why it left, what the trigger saw, and what the tier was asked.
type DegradeRecord struct {
	Degraded  bool
	From      string
	Reason    string
	Meta      map[string]float64 // the trigger's numbers, when one sent it
	ClampedTo int                // the tier's max_tokens, when it clamped the request
	needs     []string           // the formats the request needs
	needsRead bool
	// the upper target a trigger passed over, tried last should the
	// tiers fail
	deferred *Target
	reserved bool // a degraded answer is reserved in the cap's share
}

// formatsOf returns the structured output the request, whose body this
// is, needs, if any (json_schema or json_object from response_format,
// tools from tools or functions), read once, with gjson.
func (d *DegradeRecord) formatsOf(body []byte) []string {
	if d.needsRead {
		return d.needs
	}
	d.needsRead = true
	for _, path := range []string{"response_format.type", "text.format.type"} {
		switch gjson.GetBytes(body, path).String() {
		case formatJSONSchema:
			d.needs = append(d.needs, formatJSONSchema)
		case formatJSONObject:
			d.needs = append(d.needs, formatJSONObject)
		}
	}
	// tools the request forbids calling (tool_choice none) need nothing
	for _, f := range [][2]string{{"tools", "tool_choice"}, {"functions", "function_call"}} {
		v := gjson.GetBytes(body, f[0])
		if v.IsArray() && len(v.Array()) > 0 && gjson.GetBytes(body, f[1]).String() != "none" {
			d.needs = append(d.needs, formatTools)
			break
		}
	}
	return d.needs
}
