// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package vllmmetrics

import (
	"bytes"
	"io"
	"sync"
)

// wanted reports whether a metric name belongs to a family Parse reads:
// the queue and KV-cache gauges, the time-to-first-token histogram's
// series, and the prefix cache's counters.
func wanted(name []byte) bool {
	switch string(name) {
	case metricWaiting, metricRunning, metricKVUsage, metricGPUCache, metricTTFT, metricPrefixQueries, metricPrefixHits:
		return true
	}
	if rest, ok := bytes.CutPrefix(name, []byte(metricTTFT)); ok {
		switch string(rest) {
		case "_bucket", "_sum", "_count":
			return true
		}
	}
	return false
}

// selectFamilies appends to dst the lines of a text exposition that
// belong to the families Parse reads (their samples, and their HELP and
// TYPE comments), in their order. A vLLM server exposes dozens of other
// families and histograms, most of its bytes: they are never parsed, and
// a malformed line among them cannot blind the gateway.
func selectFamilies(dst, data []byte) []byte {
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		if wanted(familyOf(line)) {
			dst = append(append(dst, line...), '\n')
		}
	}
	return dst
}

// familyOf returns the metric name a line of the text format is about: a
// sample's name (quoted inside the braces, in the UTF-8 form), or the name
// a HELP or TYPE comment describes; nil for other comments and blank
// lines.
func familyOf(line []byte) []byte {
	line = bytes.TrimLeft(line, " \t")
	if len(line) == 0 {
		return nil
	}
	if line[0] == '#' {
		f := bytes.Fields(line[1:])
		if len(f) < 2 || (string(f[0]) != "HELP" && string(f[0]) != "TYPE") {
			return nil
		}
		return unquote(f[1])
	}
	if line[0] == '{' {
		// {"name", labels...} value
		if name, _, ok := bytes.Cut(line[1:], []byte{','}); ok {
			return unquote(bytes.TrimRight(name, " \t}"))
		}
		name, _, _ := bytes.Cut(line[1:], []byte{'}'})
		return unquote(bytes.TrimSpace(name))
	}
	end := bytes.IndexAny(line, "{ \t")
	if end < 0 {
		return line
	}
	return line[:end]
}

// unquote returns a name without the double quotes of the UTF-8 form.
func unquote(name []byte) []byte {
	if len(name) >= 2 && name[0] == '"' && name[len(name)-1] == '"' {
		return name[1 : len(name)-1]
	}
	return name
}

// buffers keeps the scrape's bytes and the selected lines between reads.
var buffers = sync.Pool{New: func() any { return new([2][]byte) }}

// readSelected reads at most maxMetricsBytes of an exposition and returns
// the lines Parse reads; release gives the buffers back once parsed.
func readSelected(r io.Reader) (selected []byte, release func(), err error) {
	b := buffers.Get().(*[2][]byte)
	raw := bytes.NewBuffer(b[0][:0])
	if _, err := raw.ReadFrom(io.LimitReader(r, maxMetricsBytes)); err != nil {
		buffers.Put(b)
		return nil, nil, err
	}
	b[0] = raw.Bytes()
	b[1] = selectFamilies(b[1][:0], b[0])
	return b[1], func() { buffers.Put(b) }, nil
}
