// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// defaultPaths are the inference endpoints the gateway forwards when the
// config names none: the OpenAI and Anthropic ones it reads and meters.
var defaultPaths = []string{"chat/completions", "completions", "embeddings", "responses", "messages", "messages/count_tokens"}

// inferencePaths are the endpoints a POST may go to, each matched as the
// end of the request's path ("/v1/chat/completions" is chat/completions).
type inferencePaths struct {
	suffixes []string // "/chat/completions", ...
	list     string   // for the error message
}

func newInferencePaths(paths []string) (*inferencePaths, error) {
	if len(paths) == 0 {
		paths = defaultPaths
	}
	p := &inferencePaths{}
	var shown []string
	for _, path := range paths {
		e := strings.Trim(path, "/")
		if e == "" || strings.ContainsAny(e, " *?#") {
			return nil, fmt.Errorf("paths: %q is not an endpoint such as chat/completions", path)
		}
		p.suffixes = append(p.suffixes, "/"+e)
		shown = append(shown, e)
	}
	p.list = strings.Join(shown, ", ")
	return p, nil
}

// allows reports whether a POST may go to a path.
func (p *inferencePaths) allows(path string) bool {
	for _, s := range p.suffixes {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}

// refuse answers a POST to an endpoint the gateway does not forward.
func (p *inferencePaths) refuse(w http.ResponseWriter, r *http.Request) error {
	return protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
		Status: http.StatusNotFound, Type: protocol.TypeInvalidRequest, Code: "not_found",
		Message: "unknown endpoint POST " + r.URL.Path + "; this gateway serves " + p.list + " (POST) and models (GET)",
	})
}

// cleanPath resolves the request path's dot-segments, percent-encoded
// ones too, and collapses doubled slashes, so that the path an upstream
// is asked for is the one the site's routes matched (Caddy's path
// matchers match the clean path) and never one beside or above it:
// reverse_proxy forwards the path as sent. The request's URL is replaced,
// not changed, and its RequestURI follows (the {uri} of a proxy's
// rewrite). A path that is clean already is left as it is.
func cleanPath(r *http.Request) {
	p := r.URL.Path // decoded: %2e%2e is .. here
	if strings.HasPrefix(p, "/") && !strings.Contains(p, "/.") && !strings.Contains(p, "//") {
		return // clean: nothing to resolve, nothing allocated
	}
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	if c == p {
		return
	}
	u := *r.URL
	u.Path, u.RawPath = c, ""
	r.URL = &u
	r.RequestURI = u.RequestURI()
}
