// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package logkeys

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"github.com/hybridllm/caddy-hybrid-llm/module/credentials"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(KeyHeadersFilter{})
}

// KeyHeadersFilter is a log field filter for `request>headers` and
// `request>uri`. On headers, it writes as REDACTED the value of every
// header whose name is a credential's (see credentials.CredentialLike: Api-Key,
// X-Goog-Api-Key, Helicone-Auth, the Api_Key spellings...), the values of
// the credentials in the query of a header that holds a URL (Referer,
// Origin), and the key of a Sec-WebSocket-Protocol's
// openai-insecure-api-key entry. On a URI, it redacts the values of the
// credentials of its query, and of a query after a '?' escaped in its
// path (%3F). Caddy's access log redacts only Authorization and cookies,
// and copies the request before any handler runs, and before it drops
// the headers spelt with an underscore: the gateway cannot keep a key in
// those headers out of the log, nor one on the site's other routes; the
// filter can.
//
//	log {
//		format filter {
//			request>headers hybrid_llm_keys
//			request>uri hybrid_llm_keys
//		}
//	}
type KeyHeadersFilter struct{}

// CaddyModule returns the Caddy module information.
func (KeyHeadersFilter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.filter.hybrid_llm_keys",
		New: func() caddy.Module { return new(KeyHeadersFilter) },
	}
}

// UnmarshalCaddyfile sets up the filter; it takes no options.
func (*KeyHeadersFilter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the filter's name
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Filter redacts the credentials of a headers object, or of a URI.
func (KeyHeadersFilter) Filter(in zapcore.Field) zapcore.Field {
	switch in.Type {
	case zapcore.ObjectMarshalerType:
		if m, ok := in.Interface.(zapcore.ObjectMarshaler); ok {
			in.Interface = &keyRedacted{ObjectMarshaler: m}
		}
	case zapcore.StringType:
		if uri, ok := credentials.RedactedURI(in.String); ok {
			in.String = uri
		}
	}
	return in
}

// keyRedacted writes a headers object with its credentials redacted. It
// holds the encoders it wraps, so that one allocation serves a record.
type keyRedacted struct {
	zapcore.ObjectMarshaler
	enc    keyRedactingEncoder
	values valuesRedacting
}

func (k *keyRedacted) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	k.enc = keyRedactingEncoder{ObjectEncoder: enc, values: &k.values}
	return k.ObjectMarshaler.MarshalLogObject(&k.enc)
}

// keyRedactingEncoder replaces the values of the headers
// credentials.CredentialLike names, and the credentials in the others'
// values.
type keyRedactingEncoder struct {
	zapcore.ObjectEncoder
	values *valuesRedacting
}

func (e *keyRedactingEncoder) AddArray(key string, arr zapcore.ArrayMarshaler) error {
	if credentials.CredentialLike(key) {
		return e.ObjectEncoder.AddArray(key, redactedValue{})
	}
	e.values.ArrayMarshaler, e.values.protocols = arr, strings.EqualFold(key, "Sec-Websocket-Protocol")
	return e.ObjectEncoder.AddArray(key, e.values)
}

func (e *keyRedactingEncoder) AddString(key, value string) {
	switch {
	case credentials.CredentialLike(key):
		value = "REDACTED"
	case strings.EqualFold(key, "Sec-Websocket-Protocol"):
		value = credentials.RedactedProtocols(value)
	default:
		if uri, ok := credentials.RedactedURI(value); ok {
			value = uri
		}
	}
	e.ObjectEncoder.AddString(key, value)
}

// valuesRedacting writes a header's values with the credentials in them
// redacted: a URL's query keys, or a Sec-WebSocket-Protocol's key.
type valuesRedacting struct {
	zapcore.ArrayMarshaler
	zapcore.ArrayEncoder
	protocols bool
}

func (v *valuesRedacting) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	v.ArrayEncoder = enc
	return v.ArrayMarshaler.MarshalLogArray(v)
}

func (v *valuesRedacting) AppendString(s string) {
	if v.protocols {
		if strings.Contains(s, credentials.InsecureKeyProtocol) {
			s = credentials.RedactedProtocols(s)
		}
	} else if uri, ok := credentials.RedactedURI(s); ok {
		s = uri
	}
	v.ArrayEncoder.AppendString(s)
}

// redactedValue is a header's values, redacted.
type redactedValue struct{}

func (redactedValue) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	enc.AppendString("REDACTED")
	return nil
}

// Interface guards
var (
	_ logging.LogFieldFilter = KeyHeadersFilter{}
	_ caddyfile.Unmarshaler  = (*KeyHeadersFilter)(nil)
)
