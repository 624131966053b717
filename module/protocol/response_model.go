// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"io"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
)

// ModelRewriter puts the alias into the top-level `model` field of the
// answers the client gets: of each SSE event (the usage scanner hands it
// whole events), or of a JSON body, whose head is held until its model
// value is complete.
type ModelRewriter struct {
	Alias  []byte // the alias, as a JSON string
	SSE    bool
	Events Events  // the answer's API's (see API.Events)
	done   bool    // the JSON body's model was replaced, or never will be
	head   []byte  // a JSON body's start, while its model is not complete
	resume int     // where in head the walk for the model goes on
	walked int     // head's length at the last walk that found no model
	held   *[]byte // head's holder from usageBufs

	out    []byte  // a rewritten event or head, written at once
	outBuf *[]byte // out's holder from usageBufs
}

// write passes p on to w with the model replaced.
func (m *ModelRewriter) Pass(w io.Writer, p []byte) (int, error) {
	if m.SSE {
		return m.event(w, p)
	}
	if m.done || len(p) == 0 {
		return w.Write(p)
	}
	data := p
	if m.head != nil {
		m.head = append(m.head, p...)
		data = m.head
		if len(data) < 2*m.walked && len(data) < maxUsageBody {
			// walked lately: again once the head has doubled, so that a
			// model after a large field costs linear time, not quadratic
			return len(p), nil
		}
	}
	vs, ve, found := m.find(data)
	switch {
	case found:
		m.done = true
		err := m.writeModel(w, data, vs, ve)
		m.Release()
		if err != nil {
			return 0, err
		}
		return len(p), nil
	case ve < 0 && len(data) < maxUsageBody:
		// not there yet: hold the head (the model of OpenAI-style
		// answers comes before the choices, in the first write)
		m.walked = len(data)
		if m.head == nil {
			m.held = usageBufs.Get().(*[]byte)
			m.head = append((*m.held)[:0], p...)
		}
		return len(p), nil
	}
	// no model field, or not JSON: passed on as it is
	m.done = true
	_, err := w.Write(data)
	m.Release()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// finish writes what is still held of a JSON body, its model replaced if
// the body has one (the walk may have waited for more data).
func (m *ModelRewriter) Finish(w io.Writer) {
	if m.head != nil {
		if vs, ve, found := m.find(m.head); found {
			_ = m.writeModel(w, m.head, vs, ve)
		} else {
			_, _ = w.Write(m.head)
		}
	}
	m.Release()
	if m.outBuf != nil && cap(m.out) <= maxPooledBuf {
		*m.outBuf = m.out[:0]
		usageBufs.Put(m.outBuf)
	}
	m.outBuf, m.out = nil, nil
}

// find walks a JSON body's start for its top-level model, on from where
// the last walk stopped.
func (m *ModelRewriter) find(data []byte) (vs, ve int, found bool) {
	if m.resume > 0 {
		vs, ve, m.resume, found = modelField(data, m.resume)
		return vs, ve, found
	}
	i := jsonscan.SkipSpace(data, 0)
	if i < len(data) && data[i] == '{' {
		vs, ve, m.resume, found = modelField(data, jsonscan.SkipSpace(data, i+1))
		return vs, ve, found
	}
	return topModel(data, i)
}

// release puts the held head's buffer back.
func (m *ModelRewriter) Release() {
	if m.held != nil && cap(m.head) <= maxPooledBuf {
		*m.held = m.head[:0]
		usageBufs.Put(m.held)
	}
	m.held, m.head = nil, nil
}

// event writes one SSE event with the model of its data replaced.
func (m *ModelRewriter) event(w io.Writer, ev []byte) (int, error) {
	i := dataStart(ev)
	if i < 0 {
		return w.Write(ev)
	}
	if m.done {
		return w.Write(ev) // an Anthropic stream names its model once
	}
	data := jsonscan.SkipSpace(ev, i)
	vs, ve, found := topModel(ev, data)
	switch {
	case found:
	case m.Events == EventsAnthropic:
		if vs, ve, found = nestedModel(ev, data, "message"); found {
			m.done = true
		}
	case m.Events == EventsResponses:
		// each lifecycle event carries the response, with its model
		vs, ve, found = nestedModel(ev, data, "response")
	}
	if !found {
		return w.Write(ev)
	}
	if err := m.writeModel(w, ev, vs, ve); err != nil {
		return 0, err
	}
	return len(ev), nil
}

// writeModel writes b with b[vs:ve] replaced by the alias: in one write,
// through a reused buffer, unless b is large.
func (m *ModelRewriter) writeModel(w io.Writer, b []byte, vs, ve int) error {
	if bytes.Equal(b[vs:ve], m.Alias) {
		_, err := w.Write(b)
		return err
	}
	if len(b) > maxPooledBuf {
		if _, err := w.Write(b[:vs]); err != nil {
			return err
		}
		if _, err := w.Write(m.Alias); err != nil {
			return err
		}
		_, err := w.Write(b[ve:])
		return err
	}
	if m.outBuf == nil {
		m.outBuf = usageBufs.Get().(*[]byte)
		m.out = (*m.outBuf)[:0]
	}
	m.out = append(append(append(m.out[:0], b[:vs]...), m.Alias...), b[ve:]...)
	_, err := w.Write(m.out)
	return err
}

// topModel finds the string value of the top-level "model" field of the
// JSON object at i. It walks the fields before it only, and stops there.
// ve is -1 when data ends before the model or the object does (more may
// come), and not negative when there is no such field.
func topModel(data []byte, i int) (vs, ve int, found bool) {
	if i >= len(data) {
		return 0, -1, false
	}
	if data[i] != '{' {
		return 0, 0, false
	}
	vs, ve, _, found = modelField(data, jsonscan.SkipSpace(data, i+1))
	return vs, ve, found
}

// modelField is topModel from the field at i, inside the object. When
// data ends first (ve -1), resume is where the field it could not finish
// starts: the walk goes on from there once more data has come.
func modelField(data []byte, i int) (vs, ve, resume int, found bool) {
	for i < len(data) {
		resume = i
		if data[i] != '"' {
			return 0, 0, 0, false
		}
		end, _, ok := jsonscan.ScanString(data, i+1)
		if !ok {
			return 0, -1, resume, false
		}
		// an escaped key is compared as it is: no upstream escapes "model"
		key := data[i+1 : end-1]
		i = jsonscan.SkipSpace(data, end)
		if i >= len(data) {
			break
		}
		if data[i] != ':' {
			return 0, 0, 0, false
		}
		vs = jsonscan.SkipSpace(data, i+1)
		if vs >= len(data) {
			break
		}
		if string(key) == "model" && data[vs] == '"' {
			e, _, ok := jsonscan.ScanString(data, vs+1)
			if !ok {
				break
			}
			return vs, e, 0, true
		}
		e, ok := jsonscan.SkipValue(data, vs, jsonscan.MaxNesting)
		if !ok {
			break // cut short, or invalid: told apart by more data
		}
		i = jsonscan.SkipSpace(data, e)
		if i >= len(data) {
			break
		}
		switch data[i] {
		case ',':
			i = jsonscan.SkipSpace(data, i+1)
		case '}':
			return 0, 0, 0, false
		default:
			return 0, 0, 0, false
		}
	}
	return 0, -1, resume, false
}

// nestedModel finds the model of the object under key at the top of the
// JSON object at i: where Anthropic's message_start event carries it
// (message), and the Responses API's lifecycle events (response).
func nestedModel(data []byte, i int, key string) (vs, ve int, found bool) {
	if i >= len(data) || data[i] != '{' {
		return 0, 0, false
	}
	at := -1
	jsonscan.ObjectFields(data, i, jsonscan.MaxNesting, func(k, raw []byte, j int) {
		if at < 0 && string(k) == key && raw[0] == '{' {
			at = j
		}
	})
	if at < 0 {
		return 0, 0, false
	}
	return topModel(data, at)
}
