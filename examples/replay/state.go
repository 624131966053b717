// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// gatewayState is the part of GET /hybrid_llm/state the replay reads.
type gatewayState struct {
	Gateways []struct {
		Name   string `json:"name"`
		Groups []struct {
			Name     string `json:"name"`
			Kind     string `json:"kind"`
			Overflow *struct {
				Active      bool  `json:"active"`
				Transitions int64 `json:"transitions"`
			} `json:"overflow"`
			Endpoints []struct {
				Address string `json:"address"`
				Health  string `json:"health"`
			} `json:"endpoints"`
		} `json:"groups"`
	} `json:"gateways"`
}

func readState(admin string) (*gatewayState, error) {
	var st gatewayState
	err := getJSON(context.Background(), admin+"/hybrid_llm/state", &st)
	return &st, err
}

// probed reports whether every self-hosted endpoint has been probed up.
func (st *gatewayState) probed() bool {
	n := 0
	for _, g := range st.Gateways {
		for _, grp := range g.Groups {
			for _, ep := range grp.Endpoints {
				if grp.Kind == "vllm" && ep.Health != "up" {
					return false
				}
				n++
			}
		}
	}
	return n > 0
}

// loopbackEndpoints refuses a gateway whose vLLM endpoints are not on
// loopback: the replay's load would reach them.
func (st *gatewayState) loopbackEndpoints() error {
	for _, g := range st.Gateways {
		for _, grp := range g.Groups {
			for _, ep := range grp.Endpoints {
				if err := simulator.CheckLoopback(ep.Address); err != nil {
					return fmt.Errorf("group %s's endpoint %s: the replay sends traffic only to loopback addresses", grp.Name, ep.Address)
				}
			}
		}
	}
	return nil
}

// vllmGroups are the names of the self-hosted groups.
func (st *gatewayState) vllmGroups() map[string]bool {
	names := map[string]bool{}
	for _, g := range st.Gateways {
		for _, grp := range g.Groups {
			if grp.Kind == "vllm" {
				names[grp.Name] = true
			}
		}
	}
	return names
}

// overflowActive reports whether any group's overflow controller is on.
func (st *gatewayState) overflowActive() bool {
	for _, g := range st.Gateways {
		for _, grp := range g.Groups {
			if grp.Overflow != nil && grp.Overflow.Active {
				return true
			}
		}
	}
	return false
}

// transitions is the overflow controllers' transitions so far, summed.
func (st *gatewayState) transitions() int64 {
	var n int64
	for _, g := range st.Gateways {
		for _, grp := range g.Groups {
			if grp.Overflow != nil {
				n += grp.Overflow.Transitions
			}
		}
	}
	return n
}
