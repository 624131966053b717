// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
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

// aliasList is what GET .../models answers: the aliases, listed as of
// when the config was loaded, rendered once (the list changes only with
// the config).
type aliasList struct {
	aliases map[string]*routing.Alias
	created int64 // the cards' created time
	all     []byte
}

func newAliasList(aliases map[string]*routing.Alias, created time.Time) *aliasList {
	l := &aliasList{aliases: aliases, created: created.Unix()}
	l.all = l.of(func(string) bool { return true })
	return l
}

// of renders the list of the aliases a client may use.
func (l *aliasList) of(allows func(alias string) bool) []byte {
	list := modelList{Object: "list", Data: make([]modelCard, 0, len(l.aliases))}
	for _, name := range sortedKeys(l.aliases) {
		if allows(name) {
			list.Data = append(list.Data, modelCard{ID: name, Object: "model", Created: l.created, OwnedBy: modelOwner})
		}
	}
	b, _ := json.Marshal(list)
	return b
}

// serve answers GET .../models with the aliases and GET
// .../models/{alias} with one of them. Upstream model names are never
// listed: clients only ever see aliases.
func (l *aliasList) serve(w http.ResponseWriter, r *http.Request, cl *clients.Caller) error {
	path := r.URL.Path
	var body []byte
	switch i := strings.LastIndex(path, "/models/"); {
	case strings.HasSuffix(path, "/models"):
		body = l.all
		if cl != nil && cl.Models != nil {
			body = cl.Models
		}
	case i >= 0:
		id := path[i+len("/models/"):]
		if _, ok := l.aliases[id]; !ok || !cl.Allows(id) {
			return protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
				Status: http.StatusNotFound, Type: protocol.TypeInvalidRequest, Code: "model_not_found", Param: "model",
				Message: "The model `" + id + "` does not exist.",
			})
		}
		body, _ = json.Marshal(modelCard{ID: id, Object: "model", Created: l.created, OwnedBy: modelOwner})
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
