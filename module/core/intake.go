// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/credentials"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// CredentialHeaders are the client's credentials and account headers,
// never sent upstream: each group speaks for itself. The keys are in
// canonical form.
var CredentialHeaders = []string{"Authorization", "Api-Key", "X-Api-Key", "Cookie", "Openai-Organization", "Openai-Project"}

// idempotencyKey is the header net/http's transport reads to resend a
// POST that failed on a reused connection before its first response byte.
const idempotencyKey = "X-Idempotency-Key"

// statusClientClosed is what Caddy's proxy reports when the client left;
// it is nobody's answer.
const statusClientClosed = 499

// Start makes rt the route of a JSON POST through front f, with request id
// id (the client's own: clientID) from client cl (nil without clients).
// rt is new but for its heads, which hold the id.
func (rt *Route) Start(f *Front, w http.ResponseWriter, r *http.Request, id, clientID string, cl *clients.Caller) *Route {
	rt.f, rt.w, rt.r, rt.q = f, w, r, routing.Asked{API: protocol.ForPath(r.URL.Path)}
	rt.x = exchange{id: id, clientID: clientID, client: cl, r: r, start: time.Now(), q: &rt.q}
	if extra := LogFields(r); extra != nil {
		// the request id, and the routing record once there is one
		extra.Add(zap.Inline(&rt.x))
	}
	return rt
}

// Serve handles a JSON POST whose model is an alias: the body read and
// checked, the alias and the client's ceilings and limits applied, the
// headers made fit for an upstream; then the route runs.
func (rt *Route) Serve() error {
	f, w, r, cl := rt.f, rt.w, rt.r, rt.x.client
	al, answered, err := rt.read()
	if answered {
		return err
	}
	// a request refused above takes no request of the rpm, and reserves
	// no tokens
	at := f.Clock.Now()
	rt.beginPassage()
	if wait, limit := rt.held.Take(&rt.passage.Bounds, at); wait > 0 {
		return f.Callers.Limited(w, rt.q.API, cl, limit, wait)
	}
	if ae, ok := rt.fitHeaders(); ok {
		defer func() { r.Header["Accept-Encoding"] = ae }()
	}

	ctx := r.Context()
	if f.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(f.Deadline))
		defer cancel()
	}

	if f.Money.Spend != nil {
		rt.passage.NoCloud, rt.passage.NoCloudFor = f.Money.CloudClosed(cl, at)
	}
	if f.Classes {
		rt.passage.Class, rt.passage.Sheddable = classOf(r, cl)
		rt.x.ans.class = rt.passage.Class
	}
	rt.x.alias, rt.q.Stream = al, rt.q.Top.Stream
	rt.x.attempts = rt.tried[:0]
	if top := &rt.q.Top; top.Stream && !top.WantsUsage && f.AnyStreamUsage && rt.q.API.StreamUsage {
		// ask for the usage chunk, to count the tokens, of the groups
		// that allow it (see try); the client does not see it
		rt.inj.ask(rt.q.Body, top, f.Watch)
	}
	return rt.run(ctx)
}

// read reads the request's body and what it asks, and finds its alias:
// the body checked, the client's routing headers and route tag judged,
// its ceilings applied. A request refused is answered here (answered,
// with what the handler returns).
func (rt *Route) read() (al *routing.Alias, answered bool, err error) {
	f, w, r, cl := rt.f, rt.w, rt.r, rt.x.client
	body, no := readInference(r, f.MaxBodySize, f.Watch, &rt.q.Top)
	if no == nil && rt.q.API == protocol.Messages {
		no = messagesRefusal(&rt.q.Top)
	}
	if no != nil {
		return nil, true, no.write(w, rt.q.API)
	}
	top := &rt.q.Top
	al, ok := aliasNamed(f.Aliases, top)
	if !ok || !cl.Allows(al.Name) {
		return nil, true, rt.q.API.WriteError(w, protocol.Error{
			Status: http.StatusNotFound, Type: protocol.TypeInvalidRequest, Code: "model_not_found", Param: "model",
			Message: "The model `" + top.ModelName() + "` does not exist.",
		})
	}
	f.Callers.StripRouting(r, cl)
	if f.Colors != nil {
		// a tag reaches an upstream only for a color that trusts it, on
		// any alias of a gateway that has colors
		rt.x.color = f.Colors.Pick(w, r, al, cl, rt.x.id)
	}
	if cl != nil && cl.Ceilings.Active() {
		ceiled, over := cl.Ceilings.Apply(body, rt.q.API)
		if over != nil {
			return nil, true, rt.q.API.WriteError(w, protocol.Error{
				Status: http.StatusBadRequest, Type: protocol.TypeInvalidRequest, Code: "invalid_value", Param: over.Param,
				Message: over.Msg,
			})
		}
		if len(ceiled) != len(body) || &ceiled[0] != &body[0] {
			// the fields moved: found again
			body = ceiled
			*top, _ = protocol.Scan(body, f.Watch...)
		}
	}
	if f.Priority {
		body = withoutPriority(body, top, f.Watch)
	}
	rt.q.Body, rt.q.Features = body, routing.NewFeatures(body, r.Header, top)
	if rt.q.API == protocol.Responses {
		r := gjson.GetManyBytes(body, "previous_response_id", "store")
		rt.q.Responses = &routing.ResponsesAsk{Previous: routing.PreviousResponse{ID: strings.Clone(r[0].Str)}, NoStore: r[1].Type == gjson.False}
	}
	return al, false, nil
}

// refusal is a request refused before any target is tried, in OpenAI's
// error shape.
type refusal struct {
	status            int
	code, param, what string
}

func (no *refusal) write(w http.ResponseWriter, api *protocol.API) error {
	return api.WriteError(w, protocol.Error{
		Status: no.status, Type: protocol.TypeInvalidRequest, Code: no.code, Param: no.param,
		Message: no.what,
	})
}

// readInference reads the request's body (up to max bytes) and its facts
// into top (watch: the fields route rules read), or says why the request
// is refused: a body too large, in an encoding the
// gateway does not read, no JSON object, without a model (or one that is
// no string), a field the gateway reads given twice or of the wrong type.
func readInference(r *http.Request, max int64, watch []string, top *protocol.Request) ([]byte, *refusal) {
	body, err := readRequestBody(r, max)
	if err != nil {
		switch {
		case errors.Is(err, errBodyTooLarge):
			return nil, &refusal{http.StatusRequestEntityTooLarge, "request_too_large", "",
				"request body exceeds the limit of " + strconv.FormatInt(max, 10) + " bytes"}
		case errors.Is(err, errUnsupportedEncoding):
			return nil, &refusal{http.StatusUnsupportedMediaType, "unsupported_content_encoding", "",
				"the request body's Content-Encoding " + strconv.Quote(r.Header.Get("Content-Encoding")) + " is not supported: send it uncompressed, or gzip"}
		case errors.Is(err, errBadEncoding):
			return nil, &refusal{http.StatusBadRequest, "invalid_body", "", err.Error()}
		}
		return nil, &refusal{http.StatusBadRequest, "invalid_body", "", "could not read the request body"}
	}
	var isObject bool
	*top, isObject = protocol.Scan(body, watch...)
	switch {
	case !isObject:
		return nil, &refusal{http.StatusBadRequest, "invalid_json", "", "the request body is not a valid JSON object"}
	case top.Model == nil:
		return nil, &refusal{http.StatusNotFound, "model_not_found", "model", "you must provide a model parameter"}
	case !top.ModelString():
		return nil, &refusal{http.StatusBadRequest, "invalid_type", "model", "model must be a string"}
	case top.Repeated != "":
		// the gateway reads the first, the upstream's decoder the last:
		// the client would choose the upstream model, its stream usage,
		// its length past a ceiling
		f := top.Repeated
		return nil, &refusal{http.StatusBadRequest, "invalid_json", f, "the request body has more than one " + f + " field"}
	case top.Mistyped != "":
		// vLLM's lax decoder reads " 5000" as 5000 and "yes" as true, the
		// gateway neither: its ceilings, reservation and stream usage
		// would read another request than the upstream serves
		f := top.Mistyped
		return nil, &refusal{http.StatusBadRequest, "invalid_type", f, "Invalid type for '" + f + "': expected " + protocol.FieldType(f) + "."}
	}
	return body, nil
}

// messagesRefusal says why a Messages request is refused before any
// target, as the API refuses it: without its messages, or without a
// max_tokens of at least 1 (the API has no default length).
func messagesRefusal(top *protocol.Request) *refusal {
	switch {
	case len(top.Messages) == 0 || top.Messages[0] != '[':
		return &refusal{http.StatusBadRequest, "invalid_request", "messages", "messages: Field required (an array of messages)"}
	case top.MaxTokens < 1:
		return &refusal{http.StatusBadRequest, "invalid_request", "max_tokens", "max_tokens: Field required (an integer of at least 1)"}
	}
	return nil
}

// fitHeaders makes the request's headers fit for an upstream: the
// client's credentials and hop-by-hop headers dropped, no length (each
// attempt's body has its own), no Accept-Encoding (returned, with true
// when there was one, for the caller to put back when the handler
// returns), the request id and the idempotency key set.
func (rt *Route) fitHeaders() (acceptEncoding []string, had bool) {
	r, id := rt.r, rt.x.id
	for _, h := range CredentialHeaders {
		delete(r.Header, h) // canonical keys
	}
	if rt.f.RuleCredentials {
		// a rule matches on a header credentials.Drop removes: it reads
		// the headers as the client sent them
		rt.q.Features.Header = r.Header.Clone()
	}
	credentials.Drop(r.Header)
	dropHopHeaders(r.Header)
	// each attempt's body has a length of its own (the model swapped),
	// which the transport sends from the request's ContentLength
	delete(r.Header, "Content-Length")
	// the gateway reads every answer (usage, context-length errors), so
	// it must see plain bytes: without the client's Accept-Encoding the
	// proxy's transport asks for gzip on its own and decodes it.
	// Compression toward the client is the site's `encode`, which has
	// chosen already. Here rather than in each group proxy's header
	// operations, which would make the proxy copy every request's
	// headers.
	acceptEncoding, had = r.Header["Accept-Encoding"]
	if had {
		delete(r.Header, "Accept-Encoding")
	}
	if v := r.Header["X-Request-Id"]; len(v) != 1 || v[0] != id {
		r.Header.Set("X-Request-Id", id)
	}
	// a request that finds its pooled keep-alive connection closed by the
	// upstream (a restart, an idle timeout) before any answer is sent
	// again on a new connection, as Go's transport does for idempotent
	// requests: an inference has no side effect. The header carries the
	// request id: a proxy with header operations (an api_key, header_up,
	// a TLS upstream's Host) copies the request's headers value by value,
	// and would drop a marker without one. A client's own is replaced:
	// what the transport resends by is not the client's to choose.
	r.Header[idempotencyKey] = r.Header["X-Request-Id"][:1:1] // the same value, no copy
	return acceptEncoding, had
}

// aliasNamed returns the alias the body's model names. A name without
// escapes is looked up in place, without a copy.
func aliasNamed(aliases map[string]*routing.Alias, top *protocol.Request) (*routing.Alias, bool) {
	name := top.Model[1 : len(top.Model)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		al, ok := aliases[top.ModelName()]
		return al, ok
	}
	al, ok := aliases[string(name)]
	return al, ok
}

// dropHopHeaders removes the hop-by-hop headers a client sent, which
// belong to its connection to the gateway: those its Connection header
// names, and Connection, Upgrade, Keep-Alive and Proxy-Connection. The
// group's proxy strips most of them itself, but keeps an Upgrade that
// Connection names, for websockets: an inference POST is never one, and
// an upgrade asked of a cloud API is not the client's to ask.
func dropHopHeaders(h http.Header) {
	for _, f := range h["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range []string{"Connection", "Upgrade", "Keep-Alive", "Proxy-Connection"} {
		delete(h, name) // canonical keys
	}
}
