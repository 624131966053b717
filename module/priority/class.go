// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package priority is the gateway's priority classes: which class a
// request is in, how much of a vLLM endpoint's red line each class may
// fill, vLLM's priority field for each, and the bounded queue in which
// sheddable requests wait for a self-hosted slot. It is a leaf: it
// imports nothing of the product.
package priority

import "fmt"

// Class is a request's priority class. The zero value is Standard.
type Class uint8

// The classes, from the zero value. Interactive keeps the self-hosted
// slots longest, batch leaves them first.
const (
	Standard Class = iota
	Interactive
	Batch
	numClasses
)

// Classes are the classes, from the highest.
var Classes = [...]Class{Interactive, Standard, Batch}

// Names of the classes, as configs, headers and logs write them.
const (
	NameInteractive = "interactive"
	NameStandard    = "standard"
	NameBatch       = "batch"
)

// String returns the class's name.
func (c Class) String() string {
	switch c {
	case Interactive:
		return NameInteractive
	case Batch:
		return NameBatch
	}
	return NameStandard
}

// Parse reads a class's name; "" is Standard.
func Parse(name string) (Class, error) {
	switch name {
	case "", NameStandard:
		return Standard, nil
	case NameInteractive:
		return Interactive, nil
	case NameBatch:
		return Batch, nil
	}
	return Standard, fmt.Errorf("unknown class %q: %s, %s or %s", name, NameInteractive, NameStandard, NameBatch)
}

// VLLM is the class's value of vLLM's `priority` request field (lower
// runs first under --scheduling-policy priority; vLLM's default is 0).
func (c Class) VLLM() int {
	switch c {
	case Interactive:
		return 0
	case Batch:
		return 2
	}
	return 1
}
