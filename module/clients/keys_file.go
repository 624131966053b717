// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"go.uber.org/zap"
)

// keysFileInterval is how often the keys file is checked for a change: a
// revoked key stops working within it.
const keysFileInterval = 250 * time.Millisecond

// keysFileDoc is the keys file's content.
type keysFileDoc struct {
	Clients map[string]*Client `json:"clients"`
}

// readKeysFile reads the clients of a keys file. A syntax error names its
// line and column.
func readKeysFile(path string) (map[string]*Client, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc keysFileDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := position(b, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: %v", path, line, col, err)
		case errors.As(err, &te):
			line, col := position(b, te.Offset)
			return nil, fmt.Errorf("%s:%d:%d: %v", path, line, col, err)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", path)
	}
	if doc.Clients == nil {
		return nil, fmt.Errorf(`%s: no "clients" object`, path)
	}
	return doc.Clients, nil
}

// position turns a byte offset into a line and column, from 1.
func position(b []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(b)))
	before := b[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// fileStamp tells versions of a file apart.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// watchKeysFile puts a changed keys file in force until the config stops.
// A file that cannot be read or is not valid leaves the last good clients
// in force, with an error logged once per version.
func (cr *Callers) watchKeysFile(ctx context.Context, last fileStamp) {
	path := cr.keysFile
	var failed string // the failure last logged
	loop.Loop{Name: "keys file watch", Every: keysFileInterval, Logger: cr.s.Logger}.Go(ctx, nil, func(context.Context) {
		st, err := stampOf(path)
		if err == nil && st == last {
			return
		}
		var cs *Set
		if err == nil {
			var fromFile map[string]*Client
			if fromFile, err = readKeysFile(path); err == nil {
				cs, err = cr.newSet(cr.configured, fromFile)
			}
		}
		if err != nil {
			if msg := st.mod.String() + err.Error(); msg != failed {
				cr.s.Logger.Error("keys file not loaded; the last good clients stay in force",
					zap.String("file", path), zap.Error(err))
				failed = msg
			}
			return
		}
		cr.set.Store(cs)
		last, failed = st, ""
		cr.s.Logger.Info("keys file loaded", zap.String("file", path), zap.Int("clients", len(cs.byName)))
	})
}
