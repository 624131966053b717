// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"

	"github.com/tidwall/sjson"
)

// streamUsageField asks for the usage chunk of a stream.
var streamUsageField = []byte(`,"stream_options":{"include_usage":true}`)

// AskStreamUsage asks for a stream's usage (stream_options.include_usage)
// in a request body of an API with StreamUsage (top: its fields). Without
// stream_options, field goes in at offset at, before the object's closing
// brace and after the model; otherwise the body is rewritten (a rare
// case) and the caller must scan it again. ok is false when neither can
// be done.
func AskStreamUsage(body []byte, top *Request) (at int, field, rewritten []byte, ok bool) {
	if !top.HasStreamOptions {
		end := bytes.LastIndexByte(body, '}')
		if end > top.ModelAt {
			return end, streamUsageField, nil, true
		}
		return 0, nil, nil, false
	}
	b, err := sjson.SetBytes(body, "stream_options.include_usage", true)
	return 0, nil, b, err == nil
}
