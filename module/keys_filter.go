// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(KeyHeadersFilter{})
}

// KeyHeadersFilter is a log field filter for `request>headers`: the
// value of every header whose name is a credential's (Api-Key,
// X-Api-Key, and the spellings of keyLike, Api_Key or Apikey among them)
// is written as REDACTED. Caddy's access log redacts only Authorization
// and cookies, and copies the request before any handler runs, and
// before it drops the headers spelt with an underscore: the gateway
// cannot keep a key in those headers out of the log, the filter can.
// On `request>uri` it redacts the values of such query parameters, for
// the requests the gateway does not see.
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

// Filter redacts the credentials of a headers object, or of a URI's
// query.
func (KeyHeadersFilter) Filter(in zapcore.Field) zapcore.Field {
	switch in.Type {
	case zapcore.ObjectMarshalerType:
		if m, ok := in.Interface.(zapcore.ObjectMarshaler); ok {
			in.Interface = keyRedacted{m}
		}
	case zapcore.StringType:
		if path, query, ok := strings.Cut(in.String, "?"); ok && strayQuery(query) {
			in.String = path + "?" + redactedKeys(query)
		}
	}
	return in
}

// keyRedacted writes a headers object with its credentials redacted.
type keyRedacted struct{ zapcore.ObjectMarshaler }

func (k keyRedacted) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return k.ObjectMarshaler.MarshalLogObject(keyRedactingEncoder{enc})
}

// keyRedactingEncoder replaces the values of the headers keyLike names.
type keyRedactingEncoder struct{ zapcore.ObjectEncoder }

func (e keyRedactingEncoder) AddArray(key string, arr zapcore.ArrayMarshaler) error {
	if keyLike(key) {
		arr = redactedValue{}
	}
	return e.ObjectEncoder.AddArray(key, arr)
}

func (e keyRedactingEncoder) AddString(key, value string) {
	if keyLike(key) {
		value = "REDACTED"
	}
	e.ObjectEncoder.AddString(key, value)
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
