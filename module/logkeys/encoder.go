// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package logkeys

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"github.com/hybridllm/caddy-hybrid-llm/module/credentials"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(KeysEncoder{})
}

// KeysEncoder is Caddy's json log encoder with the credentials of each
// record's request redacted, as the hybrid_llm_keys filter redacts them
// (request>headers and request>uri), at about the cost of the json
// encoder alone: the `filter` encoder builds the path of every field it
// encodes to match it against its rules, where this one looks at the
// request's headers and URI only. It takes the json encoder's options.
//
//	log {
//		format hybrid_llm [{
//			<json encoder options...>
//		}]
//	}
type KeysEncoder struct {
	logging.JSONEncoder
}

// CaddyModule returns the Caddy module information.
func (KeysEncoder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.hybrid_llm",
		New: func() caddy.Module { return new(KeysEncoder) },
	}
}

// AddObject adds an object field; a request's is written redacted.
func (e *KeysEncoder) AddObject(key string, m zapcore.ObjectMarshaler) error {
	return addObject(e.Encoder, key, m)
}

// Clone copies the encoder, with the fields added to it.
func (e *KeysEncoder) Clone() zapcore.Encoder { return keysEncoder{e.Encoder.Clone()} }

// EncodeEntry encodes an entry and its fields, a request's redacted.
func (e *KeysEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	return encodeEntry(e.Encoder, ent, fields)
}

// keysEncoder is a KeysEncoder's clone, which zap makes for every logger
// with fields (Caddy's access log adds the request as one) and entry.
type keysEncoder struct{ zapcore.Encoder }

func (e keysEncoder) AddObject(key string, m zapcore.ObjectMarshaler) error {
	return addObject(e.Encoder, key, m)
}

func (e keysEncoder) Clone() zapcore.Encoder { return keysEncoder{e.Encoder.Clone()} }

func (e keysEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	return encodeEntry(e.Encoder, ent, fields)
}

// requestField is the name Caddy's logs give the request.
const requestField = "request"

func addObject(enc zapcore.Encoder, key string, m zapcore.ObjectMarshaler) error {
	if key == requestField {
		m = &requestRedacted{ObjectMarshaler: m}
	}
	return enc.AddObject(key, m)
}

// encodeEntry encodes an entry with a request among its fields redacted:
// the fields are copied first, the caller's slice is left as it was.
func encodeEntry(enc zapcore.Encoder, ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	var own []zapcore.Field
	for i, f := range fields {
		m, ok := f.Interface.(zapcore.ObjectMarshaler)
		if f.Key != requestField || f.Type != zapcore.ObjectMarshalerType || !ok {
			continue
		}
		if own == nil {
			own = append([]zapcore.Field(nil), fields...)
		}
		own[i].Interface = &requestRedacted{ObjectMarshaler: m}
	}
	if own != nil {
		fields = own
	}
	return enc.EncodeEntry(ent, fields)
}

// requestRedacted writes a request object with its headers' and its
// URI's credentials redacted (see KeyHeadersFilter). It holds the
// encoders it wraps, so that one allocation serves a record.
type requestRedacted struct {
	zapcore.ObjectMarshaler
	enc     requestRedacting
	headers keyRedacted
}

func (r *requestRedacted) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	r.enc = requestRedacting{ObjectEncoder: enc, headers: &r.headers}
	return r.ObjectMarshaler.MarshalLogObject(&r.enc)
}

// requestRedacting is the encoder a request object writes into: its
// headers object and its uri pass through the redaction.
type requestRedacting struct {
	zapcore.ObjectEncoder
	headers *keyRedacted
}

func (e *requestRedacting) AddObject(key string, m zapcore.ObjectMarshaler) error {
	if key == "headers" {
		e.headers.ObjectMarshaler = m
		return e.ObjectEncoder.AddObject(key, e.headers)
	}
	return e.ObjectEncoder.AddObject(key, m)
}

func (e *requestRedacting) AddString(key, value string) {
	if key == "uri" {
		if uri, ok := credentials.RedactedURI(value); ok {
			value = uri
		}
	}
	e.ObjectEncoder.AddString(key, value)
}

// Interface guards
var (
	_ zapcore.Encoder       = (*KeysEncoder)(nil)
	_ caddy.Provisioner     = (*KeysEncoder)(nil)
	_ caddyfile.Unmarshaler = (*KeysEncoder)(nil)
)
