package otlp

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The binary decoder reads an ExportTraceServiceRequest's protobuf encoding
// straight into trace spans, without the generated message structs (their
// unmarshalling and the garbage of their many small allocations were a
// third of the daemon's CPU under OTLP load). It decodes what
// proto.Unmarshal into the generated types followed by mapRequest would:
//
//   - It reads a request in two passes. The first (wireValidator) checks
//     the whole encoding as proto.Unmarshal does — tags, field numbers,
//     lengths against the bytes left, varints, groups of unknown fields,
//     proto3 strings being UTF-8, messages nested at most
//     protowire.DefaultRecursionLimit deep — and counts the spans (and each
//     scope's attributes, to size the attribute arena). A request that
//     fails it stores nothing, whatever its spans; one with more spans than
//     Options.MaxSpansPerRequest is refused before any span is built.
//   - The second (wireDecoder) maps the checked encoding onto spans, in the
//     order and with the rejections of mapRequest.
//   - Protobuf's rules for fields apply: unknown fields, and known fields
//     with another wire type, are skipped; a scalar or string field sent
//     more than once takes its last value; a message field sent more than
//     once is the merge of every occurrence (as if their payloads were
//     concatenated), and a oneof takes the last member sent, merging
//     consecutive occurrences of the same message member.
//   - Every string of the spans is a substring of one copy of the body, so
//     a request costs one allocation for all its strings instead of one per
//     string. Whoever keeps a string beyond the request (the text index)
//     clones it.

// wireMsg names the messages of an ExportTraceServiceRequest.
type wireMsg uint8

const (
	msgRequest wireMsg = iota + 1
	msgResourceSpans
	msgResource
	msgEntityRef
	msgScopeSpans
	msgScope
	msgSpan
	msgEvent
	msgLink
	msgStatus
	msgKeyValue
	msgAnyValue
	msgArrayValue
	msgKeyValueList
)

// wireKind is how a known field is encoded.
type wireKind uint8

const (
	kindUnknown wireKind = iota
	kindVarint
	kindFixed32
	kindFixed64
	kindBytes
	kindString // bytes that must be UTF-8 (proto3 string)
	kindMessage
)

// wireType is the wire type a field of kind k is read from; a known field
// sent with another wire type is an unknown field to protobuf.
func (k wireKind) wireType() protowire.Type {
	switch k {
	case kindVarint:
		return protowire.VarintType
	case kindFixed32:
		return protowire.Fixed32Type
	case kindFixed64:
		return protowire.Fixed64Type
	}
	return protowire.BytesType
}

// wireField describes a known field.
type wireField struct {
	name     string
	kind     wireKind
	msg      wireMsg // the message type of a kindMessage field
	repeated bool
}

// fieldOf describes field num of message t (kindUnknown when t has no such
// field). It is the OTLP schema of go.opentelemetry.io/proto/otlp (see
// TestWireSchemaMatchesDescriptors).
func fieldOf(t wireMsg, num protowire.Number) wireField {
	switch t {
	case msgRequest:
		if num == 1 {
			return wireField{"resource_spans", kindMessage, msgResourceSpans, true}
		}
	case msgResourceSpans:
		switch num {
		case 1:
			return wireField{"resource", kindMessage, msgResource, false}
		case 2:
			return wireField{"scope_spans", kindMessage, msgScopeSpans, true}
		case 3:
			return wireField{"schema_url", kindString, 0, false}
		}
	case msgResource:
		switch num {
		case 1:
			return wireField{"attributes", kindMessage, msgKeyValue, true}
		case 2:
			return wireField{"dropped_attributes_count", kindVarint, 0, false}
		case 3:
			return wireField{"entity_refs", kindMessage, msgEntityRef, true}
		}
	case msgEntityRef:
		switch num {
		case 1:
			return wireField{"schema_url", kindString, 0, false}
		case 2:
			return wireField{"type", kindString, 0, false}
		case 3:
			return wireField{"id_keys", kindString, 0, true}
		case 4:
			return wireField{"description_keys", kindString, 0, true}
		}
	case msgScopeSpans:
		switch num {
		case 1:
			return wireField{"scope", kindMessage, msgScope, false}
		case 2:
			return wireField{"spans", kindMessage, msgSpan, true}
		case 3:
			return wireField{"schema_url", kindString, 0, false}
		}
	case msgScope:
		switch num {
		case 1:
			return wireField{"name", kindString, 0, false}
		case 2:
			return wireField{"version", kindString, 0, false}
		case 3:
			return wireField{"attributes", kindMessage, msgKeyValue, true}
		case 4:
			return wireField{"dropped_attributes_count", kindVarint, 0, false}
		}
	case msgSpan:
		switch num {
		case 1:
			return wireField{"trace_id", kindBytes, 0, false}
		case 2:
			return wireField{"span_id", kindBytes, 0, false}
		case 3:
			return wireField{"trace_state", kindString, 0, false}
		case 4:
			return wireField{"parent_span_id", kindBytes, 0, false}
		case 5:
			return wireField{"name", kindString, 0, false}
		case 6:
			return wireField{"kind", kindVarint, 0, false}
		case 7:
			return wireField{"start_time_unix_nano", kindFixed64, 0, false}
		case 8:
			return wireField{"end_time_unix_nano", kindFixed64, 0, false}
		case 9:
			return wireField{"attributes", kindMessage, msgKeyValue, true}
		case 10:
			return wireField{"dropped_attributes_count", kindVarint, 0, false}
		case 11:
			return wireField{"events", kindMessage, msgEvent, true}
		case 12:
			return wireField{"dropped_events_count", kindVarint, 0, false}
		case 13:
			return wireField{"links", kindMessage, msgLink, true}
		case 14:
			return wireField{"dropped_links_count", kindVarint, 0, false}
		case 15:
			return wireField{"status", kindMessage, msgStatus, false}
		case 16:
			return wireField{"flags", kindFixed32, 0, false}
		}
	case msgEvent:
		switch num {
		case 1:
			return wireField{"time_unix_nano", kindFixed64, 0, false}
		case 2:
			return wireField{"name", kindString, 0, false}
		case 3:
			return wireField{"attributes", kindMessage, msgKeyValue, true}
		case 4:
			return wireField{"dropped_attributes_count", kindVarint, 0, false}
		}
	case msgLink:
		switch num {
		case 1:
			return wireField{"trace_id", kindBytes, 0, false}
		case 2:
			return wireField{"span_id", kindBytes, 0, false}
		case 3:
			return wireField{"trace_state", kindString, 0, false}
		case 4:
			return wireField{"attributes", kindMessage, msgKeyValue, true}
		case 5:
			return wireField{"dropped_attributes_count", kindVarint, 0, false}
		case 6:
			return wireField{"flags", kindFixed32, 0, false}
		}
	case msgStatus:
		switch num {
		case 2:
			return wireField{"message", kindString, 0, false}
		case 3:
			return wireField{"code", kindVarint, 0, false}
		}
	case msgKeyValue:
		switch num {
		case 1:
			return wireField{"key", kindString, 0, false}
		case 2:
			return wireField{"value", kindMessage, msgAnyValue, false}
		case 3:
			return wireField{"key_strindex", kindVarint, 0, false}
		}
	case msgAnyValue:
		switch num {
		case 1:
			return wireField{"string_value", kindString, 0, false}
		case 2:
			return wireField{"bool_value", kindVarint, 0, false}
		case 3:
			return wireField{"int_value", kindVarint, 0, false}
		case 4:
			return wireField{"double_value", kindFixed64, 0, false}
		case 5:
			return wireField{"array_value", kindMessage, msgArrayValue, false}
		case 6:
			return wireField{"kvlist_value", kindMessage, msgKeyValueList, false}
		case 7:
			return wireField{"bytes_value", kindBytes, 0, false}
		case 8:
			return wireField{"string_value_strindex", kindVarint, 0, false}
		}
	case msgArrayValue:
		if num == 1 {
			return wireField{"values", kindMessage, msgAnyValue, true}
		}
	case msgKeyValueList:
		if num == 1 {
			return wireField{"values", kindMessage, msgKeyValue, true}
		}
	}
	return wireField{}
}

// wireError is a malformed encoding: the offset in the body, the path of
// the field holding it (resource_spans[0].scope_spans[1].spans[7].name) and
// why.
type wireError struct {
	off    int
	fields []string // the path, innermost field first
	reason string
}

// maxErrorPath bounds the fields an error names: the outermost and the
// innermost half of them around an ellipsis.
const maxErrorPath = 16

func (e *wireError) Error() string {
	if len(e.fields) == 0 {
		return fmt.Sprintf("protobuf at offset %d: %s", e.off, e.reason)
	}
	path := make([]string, 0, min(len(e.fields), maxErrorPath+1))
	for i := len(e.fields) - 1; i >= 0; i-- {
		if len(e.fields) > maxErrorPath && i == len(e.fields)-maxErrorPath/2-1 {
			path = append(path, "…")
			i = maxErrorPath/2 - 1
		}
		path = append(path, e.fields[i])
	}
	return fmt.Sprintf("protobuf at offset %d: %s: %s", e.off, strings.Join(path, "."), e.reason)
}

// parseError is protowire's reason for a negative length n, without the
// "proto:" prefix (whose space protobuf varies on purpose).
func parseError(n int) string {
	return strings.TrimLeft(strings.TrimPrefix(protowire.ParseError(n).Error(), "proto:"), " \u00a0")
}

// scopeSize counts what one ScopeSpans holds: its spans and their
// attributes.
type scopeSize struct{ spans, attrs int }

// wireValidator is the first pass: it checks a request's encoding and
// counts its spans.
type wireValidator struct {
	spans  int
	scopes []scopeSize // every ScopeSpans, in the order of the body
}

// message checks b, the encoding of a message of type t starting at offset
// base of the body; depth is what is left of the nesting bound.
func (v *wireValidator) message(b []byte, base int, t wireMsg, depth int) *wireError {
	if depth--; depth < 0 {
		return &wireError{off: base, reason: fmt.Sprintf("messages nested deeper than %d", protowire.DefaultRecursionLimit)}
	}
	for off := 0; off < len(b); {
		at := off
		tag, n := protowire.ConsumeVarint(b[off:])
		if n < 0 {
			return &wireError{off: base + at, reason: "field tag: " + parseError(n)}
		}
		off += n
		if num := tag >> 3; num < uint64(protowire.MinValidNumber) || num > uint64(protowire.MaxValidNumber) {
			return &wireError{off: base + at, reason: fmt.Sprintf("field tag: field number %d out of range", num)}
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if typ == protowire.EndGroupType {
			return &wireError{off: base + at, reason: fmt.Sprintf("field %d: end of a group that was not started", num)}
		}
		f := fieldOf(t, num)
		if f.kind == kindUnknown || typ != f.kind.wireType() {
			m := protowire.ConsumeFieldValue(num, typ, b[off:])
			if m < 0 {
				return &wireError{off: base + at, reason: fmt.Sprintf("field %d (wire type %d): %s", num, typ, parseError(m))}
			}
			off += m
			continue
		}
		var m int
		switch typ {
		case protowire.VarintType:
			_, m = protowire.ConsumeVarint(b[off:])
		case protowire.Fixed32Type:
			_, m = protowire.ConsumeFixed32(b[off:])
		case protowire.Fixed64Type:
			_, m = protowire.ConsumeFixed64(b[off:])
		case protowire.BytesType:
			var val []byte
			val, m = protowire.ConsumeBytes(b[off:])
			if m < 0 {
				break
			}
			start := off + m - len(val)
			switch f.kind {
			case kindString:
				if !utf8.Valid(val) {
					return v.fieldError(b, base, t, at, &wireError{off: base + start, reason: "string is not valid UTF-8"})
				}
			case kindMessage:
				switch {
				case t == msgScopeSpans && num == 2:
					v.spans++
					v.scopes[len(v.scopes)-1].spans++
				case t == msgSpan && num == 9:
					v.scopes[len(v.scopes)-1].attrs++
				case f.msg == msgScopeSpans:
					v.scopes = append(v.scopes, scopeSize{})
				}
				if err := v.message(val, base+start, f.msg, depth); err != nil {
					return v.fieldError(b, base, t, at, err)
				}
			}
		}
		if m < 0 {
			return v.fieldError(b, base, t, at, &wireError{off: base + at, reason: fmt.Sprintf("value of wire type %d: %s", typ, parseError(m))})
		}
		off += m
	}
	return nil
}

// fieldError names, in err's path, the field of message t (encoded in b at
// base) whose tag is at offset at: a repeated field with its index, found
// by counting the fields before it (which the validator already checked).
func (v *wireValidator) fieldError(b []byte, base int, t wireMsg, at int, err *wireError) *wireError {
	num, typ, _ := protowire.ConsumeTag(b[at:])
	f := fieldOf(t, num)
	name := f.name
	if f.repeated {
		i := 0
		for off := 0; off < at; {
			n, ty, k := protowire.ConsumeTag(b[off:])
			if n == num && ty == typ {
				i++
			}
			off += k
			off += protowire.ConsumeFieldValue(n, ty, b[off:])
		}
		name = fmt.Sprintf("%s[%d]", name, i)
	}
	err.fields = append(err.fields, name)
	return err
}

// validateWire checks body as an ExportTraceServiceRequest and counts its
// spans.
func validateWire(body []byte) (*wireValidator, error) {
	v := &wireValidator{}
	if err := v.message(body, 0, msgRequest, protowire.DefaultRecursionLimit); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return v, nil
}
