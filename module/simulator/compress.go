// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"compress/gzip"
	"net/http"
	"strings"
)

// acceptsGzip reports whether a request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if (name == "gzip" || name == "*") && !strings.Contains(strings.ReplaceAll(params, " ", ""), "q=0") {
				return true
			}
		}
	}
	return false
}

// gzipWriter compresses a response, as a cloud's front end does whenever
// the client allows: every body, errors and event streams included. Each
// flush reaches the client, so that a stream stays a stream.
type gzipWriter struct {
	http.ResponseWriter
	gz      *gzip.Writer
	started bool
}

func newGzipWriter(w http.ResponseWriter) *gzipWriter {
	return &gzipWriter{ResponseWriter: w, gz: gzip.NewWriter(w)}
}

func (g *gzipWriter) WriteHeader(status int) {
	if !g.started {
		g.started = true
		h := g.Header()
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
	}
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if !g.started {
		g.WriteHeader(http.StatusOK)
	}
	return g.gz.Write(p)
}

// FlushError flushes the compressed bytes so far to the client.
func (g *gzipWriter) FlushError() error {
	if !g.started {
		g.WriteHeader(http.StatusOK)
	}
	if err := g.gz.Flush(); err != nil {
		return err
	}
	return http.NewResponseController(g.ResponseWriter).Flush()
}

// Flush implements http.Flusher.
func (g *gzipWriter) Flush() { _ = g.FlushError() }

// Unwrap lets http.ResponseController reach the connection (to abort it).
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// close ends the compressed body, if one was started.
func (g *gzipWriter) close() {
	if g.started {
		_ = g.gz.Close()
	}
}
