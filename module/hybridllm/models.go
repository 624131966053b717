// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// modelCard is one entry of the OpenAI model list.
type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

const modelOwner = "hybrid_llm"

// buildModelsList renders the alias list once; it changes only with the
// config.
func (g *Gateway) buildModelsList() []byte {
	return g.buildModelsListOf(func(string) bool { return true })
}

// buildModelsListOf renders the list of the aliases a client may use.
func (g *Gateway) buildModelsListOf(allows func(alias string) bool) []byte {
	list := modelList{Object: "list", Data: make([]modelCard, 0, len(g.aliases))}
	for _, name := range sortedKeys(g.aliases) {
		if allows(name) {
			list.Data = append(list.Data, modelCard{ID: name, Object: "model", Created: g.created, OwnedBy: modelOwner})
		}
	}
	b, _ := json.Marshal(list)
	return b
}

// serveModels answers GET .../models with the aliases and GET
// .../models/{alias} with one of them. Upstream model names are never
// listed: clients only ever see aliases.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request, cl *client) error {
	path := r.URL.Path
	var body []byte
	switch i := strings.LastIndex(path, "/models/"); {
	case strings.HasSuffix(path, "/models"):
		body = g.modelsList
		if cl != nil && cl.models != nil {
			body = cl.models
		}
	case i >= 0:
		id := path[i+len("/models/"):]
		if _, ok := g.aliases[id]; !ok || !cl.allows(id) {
			return protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
				Status: http.StatusNotFound, Type: protocol.TypeInvalidRequest, Code: "model_not_found", Param: "model",
				Message: "The model `" + id + "` does not exist.",
			})
		}
		body, _ = json.Marshal(modelCard{ID: id, Object: "model", Created: g.created, OwnedBy: modelOwner})
	default:
		return protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
			Status: http.StatusNotFound, Type: protocol.TypeInvalidRequest, Code: "not_found",
			Message: "unknown endpoint " + r.Method + " " + path + "; GET serves only /v1/models",
		})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(body)
	return err
}
