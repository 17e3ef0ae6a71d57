package queryapi

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ztsd/ztsd/trace"
)

// Flatten lists the spans of assembled span trees (roots with Children),
// depth first; the list holds pointers only.
func Flatten(roots []*trace.Span) []*trace.Span {
	var out []*trace.Span
	var walk func(sp *trace.Span, depth int)
	walk = func(sp *trace.Span, depth int) {
		out = append(out, sp)
		if depth >= trace.MaxDepth {
			return
		}
		for _, c := range sp.Children {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 1)
	}
	return out
}

// group is the spans of one resource and scope.
type group struct {
	first  *Span // the view of the group's first span (resource, scope)
	spans  []*trace.Span
	ssSize int // the encoded ScopeSpans size; -1 until computed
}

// groupSpans groups spans by resource and scope, in first-seen order.
func groupSpans(spans []*trace.Span) []*group {
	var out []*group
	byKey := map[string]*group{}
	var kb []byte
	for _, sp := range spans {
		v := baseView(sp)
		kb = appendAttrsPB(kb[:0], 1, v.Resource)
		kb = protowire.AppendString(kb, v.ScopeName)
		kb = protowire.AppendString(kb, v.ScopeVersion)
		kb = appendAttrsPB(kb, 3, v.ScopeAttrs)
		g := byKey[string(kb)]
		if g == nil {
			vv := v
			g = &group{first: &vv, ssSize: -1}
			byKey[string(kb)] = g
			out = append(out, g)
		}
		g.spans = append(g.spans, sp)
	}
	return out
}

// ProtoWriter writes a trace as OTLP protobuf, one span message at a time:
// it never holds more than one encoded span.
type ProtoWriter struct {
	groups []*group
	buf    []byte
}

// NewProtoWriter prepares spans (a trace's spans, flat) for writing.
func NewProtoWriter(spans []*trace.Span) *ProtoWriter {
	return &ProtoWriter{groups: groupSpans(spans)}
}

// Size is the size of the encoded TracesData (= Tempo Trace) message.
func (p *ProtoWriter) Size() int {
	n := 0
	for _, g := range p.groups {
		rs := p.rsSize(g)
		n += protowire.SizeTag(1) + protowire.SizeBytes(rs)
	}
	return n
}

// ssSize is the size of g's ScopeSpans message: one encoding pass over
// its spans, done once.
func (p *ProtoWriter) ssSize(g *group) int {
	if g.ssSize >= 0 {
		return g.ssSize
	}
	scope := len(p.scopePB(nil, g.first))
	n := protowire.SizeTag(1) + protowire.SizeBytes(scope)
	for _, sp := range g.spans {
		Expand(sp, func(v *Span) error {
			p.buf = appendSpanPB(p.buf[:0], v)
			n += protowire.SizeTag(2) + protowire.SizeBytes(len(p.buf))
			return nil
		})
	}
	g.ssSize = n
	return n
}

func (p *ProtoWriter) rsSize(g *group) int {
	res := len(appendAttrsPB(nil, 1, g.first.Resource))
	ss := p.ssSize(g)
	return protowire.SizeTag(1) + protowire.SizeBytes(res) + protowire.SizeTag(2) + protowire.SizeBytes(ss)
}

func (p *ProtoWriter) scopePB(b []byte, v *Span) []byte {
	if v.ScopeName != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, v.ScopeName)
	}
	if v.ScopeVersion != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v.ScopeVersion)
	}
	return appendAttrsPB(b, 3, v.ScopeAttrs)
}

// WriteTo writes the TracesData message body (field 1: ResourceSpans,
// repeated), without an outer length.
func (p *ProtoWriter) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 32<<10)
	var total int64
	var hdr []byte
	put := func(b []byte) {
		n, _ := bw.Write(b)
		total += int64(n)
	}
	for _, g := range p.groups {
		rs := p.rsSize(g)
		hdr = protowire.AppendTag(hdr[:0], 1, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(rs))
		res := appendAttrsPB(nil, 1, g.first.Resource)
		hdr = protowire.AppendTag(hdr, 1, protowire.BytesType)
		hdr = protowire.AppendBytes(hdr, res)
		hdr = protowire.AppendTag(hdr, 2, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(p.ssSize(g)))
		scope := p.scopePB(nil, g.first)
		hdr = protowire.AppendTag(hdr, 1, protowire.BytesType)
		hdr = protowire.AppendBytes(hdr, scope)
		put(hdr)
		for _, sp := range g.spans {
			Expand(sp, func(v *Span) error {
				p.buf = appendSpanPB(p.buf[:0], v)
				hdr = protowire.AppendTag(hdr[:0], 2, protowire.BytesType)
				hdr = protowire.AppendVarint(hdr, uint64(len(p.buf)))
				put(hdr)
				put(p.buf)
				return nil
			})
		}
	}
	return total, bw.Flush()
}

func appendSpanPB(b []byte, v *Span) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, v.TraceID[:])
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, spanIDBytes(v.SpanID))
	if v.TraceState != "" {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, v.TraceState)
	}
	if v.ParentID != 0 {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, spanIDBytes(v.ParentID))
	}
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendString(b, v.Name)
	if v.Kind != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.Kind))
	}
	b = protowire.AppendTag(b, 7, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(v.StartNS))
	b = protowire.AppendTag(b, 8, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(v.StartNS+v.DurationNS))
	b = appendAttrsPB(b, 9, v.Attrs)
	for _, e := range v.Events {
		var eb []byte
		eb = protowire.AppendTag(eb, 1, protowire.Fixed64Type)
		eb = protowire.AppendFixed64(eb, uint64(e.TimeNS))
		eb = protowire.AppendTag(eb, 2, protowire.BytesType)
		eb = protowire.AppendString(eb, e.Name)
		eb = appendAttrsPB(eb, 3, e.Attrs)
		b = protowire.AppendTag(b, 11, protowire.BytesType)
		b = protowire.AppendBytes(b, eb)
	}
	for _, l := range v.Links {
		var lb []byte
		lb = protowire.AppendTag(lb, 1, protowire.BytesType)
		lb = protowire.AppendBytes(lb, l.TraceID[:])
		lb = protowire.AppendTag(lb, 2, protowire.BytesType)
		lb = protowire.AppendBytes(lb, spanIDBytes(l.SpanID))
		if l.TraceState != "" {
			lb = protowire.AppendTag(lb, 3, protowire.BytesType)
			lb = protowire.AppendString(lb, l.TraceState)
		}
		lb = appendAttrsPB(lb, 4, l.Attrs)
		b = protowire.AppendTag(b, 13, protowire.BytesType)
		b = protowire.AppendBytes(b, lb)
	}
	if v.Status != StatusUnset || v.StatusMessage != "" {
		var sb []byte
		if v.StatusMessage != "" {
			sb = protowire.AppendTag(sb, 2, protowire.BytesType)
			sb = protowire.AppendString(sb, v.StatusMessage)
		}
		if v.Status != StatusUnset {
			sb = protowire.AppendTag(sb, 3, protowire.VarintType)
			sb = protowire.AppendVarint(sb, uint64(v.Status))
		}
		b = protowire.AppendTag(b, 15, protowire.BytesType)
		b = protowire.AppendBytes(b, sb)
	}
	return b
}

func spanIDBytes(id trace.SpanID) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(id))
	return b[:]
}

// appendAttrsPB appends each attribute as a KeyValue in field num.
func appendAttrsPB(b []byte, num protowire.Number, attrs trace.Attrs) []byte {
	for i := range attrs {
		kv := appendKeyValuePB(nil, &attrs[i], 1)
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, kv)
	}
	return b
}

func appendKeyValuePB(b []byte, a *trace.Attr, depth int) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, a.Key)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, appendAnyValuePB(nil, &a.Value, depth))
}

func appendAnyValuePB(b []byte, v *trace.Value, depth int) []byte {
	switch v.Kind {
	case trace.KindString:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, v.Str)
	case trace.KindBool:
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.Bool))
	case trace.KindInt:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.Int))
	case trace.KindFloat:
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.Float))
	case trace.KindList:
		if depth > trace.MaxDepth {
			break
		}
		var lb []byte
		for i := range v.List {
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendBytes(lb, appendAnyValuePB(nil, &v.List[i], depth+1))
		}
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, lb)
	case trace.KindMap:
		if depth > trace.MaxDepth {
			break
		}
		var mb []byte
		for i := range v.Map {
			mb = protowire.AppendTag(mb, 1, protowire.BytesType)
			mb = protowire.AppendBytes(mb, appendKeyValuePB(nil, &v.Map[i], depth+1))
		}
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendBytes(b, mb)
	}
	return b
}

// JSONStyle says how OTLP JSON spells ids and enums.
type JSONStyle struct {
	// Base64IDs writes ids as base64 (protobuf JSON of bytes, as Tempo
	// writes them) instead of hex (the OTLP JSON encoding).
	Base64IDs bool
	// EnumNames writes kind and status code as enum names
	// ("SPAN_KIND_SERVER") instead of integers.
	EnumNames bool
}

// WriteJSON writes the trace as an OTLP JSON TracesData object
// ({"resourceSpans": [...]}), one span at a time.
func WriteJSON(w io.Writer, spans []*trace.Span, style JSONStyle) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	var b []byte
	b = append(b, `{"resourceSpans":[`...)
	for gi, g := range groupSpans(spans) {
		if gi > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"resource":{"attributes":`...)
		b = appendAttrsJSON(b, g.first.Resource, 1)
		b = append(b, `},"scopeSpans":[{"scope":{`...)
		b = append(b, `"name":`...)
		b = appendJSONString(b, g.first.ScopeName)
		if g.first.ScopeVersion != "" {
			b = append(b, `,"version":`...)
			b = appendJSONString(b, g.first.ScopeVersion)
		}
		if len(g.first.ScopeAttrs) > 0 {
			b = append(b, `,"attributes":`...)
			b = appendAttrsJSON(b, g.first.ScopeAttrs, 1)
		}
		b = append(b, `},"spans":[`...)
		first := true
		for _, sp := range g.spans {
			err := Expand(sp, func(v *Span) error {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = appendSpanJSON(b, v, style)
				if len(b) > 16<<10 {
					_, err := bw.Write(b)
					b = b[:0]
					return err
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		b = append(b, `]}]}`...)
	}
	b = append(b, `]}`...)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

// AppendSpanJSON appends one span as an OTLP JSON Span object.
func AppendSpanJSON(b []byte, v *Span, style JSONStyle) []byte { return appendSpanJSON(b, v, style) }

func appendID(b []byte, id []byte, style JSONStyle) []byte {
	b = append(b, '"')
	if style.Base64IDs {
		b = base64.StdEncoding.AppendEncode(b, id)
	} else {
		b = hex.AppendEncode(b, id)
	}
	return append(b, '"')
}

var kindNames = [...]string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
	"SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}
var statusNames = [...]string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}

func appendSpanJSON(b []byte, v *Span, style JSONStyle) []byte {
	b = append(b, `{"traceId":`...)
	b = appendID(b, v.TraceID[:], style)
	b = append(b, `,"spanId":`...)
	b = appendID(b, spanIDBytes(v.SpanID), style)
	if v.TraceState != "" {
		b = append(b, `,"traceState":`...)
		b = appendJSONString(b, v.TraceState)
	}
	if v.ParentID != 0 {
		b = append(b, `,"parentSpanId":`...)
		b = appendID(b, spanIDBytes(v.ParentID), style)
	}
	b = append(b, `,"name":`...)
	b = appendJSONString(b, v.Name)
	b = append(b, `,"kind":`...)
	if style.EnumNames {
		b = append(b, '"')
		b = append(b, kindNames[v.Kind]...)
		b = append(b, '"')
	} else {
		b = strconv.AppendInt(b, int64(v.Kind), 10)
	}
	b = append(b, `,"startTimeUnixNano":"`...)
	b = strconv.AppendInt(b, v.StartNS, 10)
	b = append(b, `","endTimeUnixNano":"`...)
	b = strconv.AppendInt(b, v.StartNS+v.DurationNS, 10)
	b = append(b, `","attributes":`...)
	b = appendAttrsJSON(b, v.Attrs, 1)
	if len(v.Events) > 0 {
		b = append(b, `,"events":[`...)
		for i, e := range v.Events {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"timeUnixNano":"`...)
			b = strconv.AppendInt(b, e.TimeNS, 10)
			b = append(b, `","name":`...)
			b = appendJSONString(b, e.Name)
			b = append(b, `,"attributes":`...)
			b = appendAttrsJSON(b, e.Attrs, 1)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(v.Links) > 0 {
		b = append(b, `,"links":[`...)
		for i, l := range v.Links {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"traceId":`...)
			b = appendID(b, l.TraceID[:], style)
			b = append(b, `,"spanId":`...)
			b = appendID(b, spanIDBytes(l.SpanID), style)
			if l.TraceState != "" {
				b = append(b, `,"traceState":`...)
				b = appendJSONString(b, l.TraceState)
			}
			b = append(b, `,"attributes":`...)
			b = appendAttrsJSON(b, l.Attrs, 1)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	// Zero fields are left out, as protobuf JSON writers do: an unset
	// status is {}.
	b = append(b, `,"status":{`...)
	if v.StatusMessage != "" {
		b = append(b, `"message":`...)
		b = appendJSONString(b, v.StatusMessage)
		if v.Status != StatusUnset {
			b = append(b, ',')
		}
	}
	if v.Status != StatusUnset {
		b = append(b, `"code":`...)
		if style.EnumNames {
			b = append(b, '"')
			b = append(b, statusNames[v.Status]...)
			b = append(b, '"')
		} else {
			b = strconv.AppendInt(b, int64(v.Status), 10)
		}
	}
	return append(b, `}}`...)
}

// AppendAttrsJSON appends attrs as an OTLP JSON KeyValue array.
func AppendAttrsJSON(b []byte, attrs trace.Attrs) []byte { return appendAttrsJSON(b, attrs, 1) }

func appendAttrsJSON(b []byte, attrs trace.Attrs, depth int) []byte {
	b = append(b, '[')
	for i := range attrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, attrs[i].Key)
		b = append(b, `,"value":`...)
		b = appendAnyValueJSON(b, &attrs[i].Value, depth)
		b = append(b, '}')
	}
	return append(b, ']')
}

// AppendAnyValueJSON appends v as an OTLP JSON AnyValue.
func AppendAnyValueJSON(b []byte, v *trace.Value) []byte { return appendAnyValueJSON(b, v, 1) }

func appendAnyValueJSON(b []byte, v *trace.Value, depth int) []byte {
	switch v.Kind {
	case trace.KindString:
		b = append(b, `{"stringValue":`...)
		b = appendJSONString(b, v.Str)
	case trace.KindBool:
		b = append(b, `{"boolValue":`...)
		b = strconv.AppendBool(b, v.Bool)
	case trace.KindInt:
		b = append(b, `{"intValue":"`...)
		b = strconv.AppendInt(b, v.Int, 10)
		b = append(b, '"')
	case trace.KindFloat:
		b = append(b, `{"doubleValue":`...)
		switch {
		case math.IsNaN(v.Float):
			b = append(b, `"NaN"`...)
		case math.IsInf(v.Float, 1):
			b = append(b, `"Infinity"`...)
		case math.IsInf(v.Float, -1):
			b = append(b, `"-Infinity"`...)
		default:
			b = strconv.AppendFloat(b, v.Float, 'g', -1, 64)
		}
	case trace.KindList:
		b = append(b, `{"arrayValue":{"values":[`...)
		if depth <= trace.MaxDepth {
			for i := range v.List {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendAnyValueJSON(b, &v.List[i], depth+1)
			}
		}
		b = append(b, `]}`...)
	case trace.KindMap:
		b = append(b, `{"kvlistValue":{"values":`...)
		if depth <= trace.MaxDepth {
			b = appendAttrsJSON(b, v.Map, depth+1)
		} else {
			b = append(b, `[]`...)
		}
		b = append(b, '}')
	default:
		return append(b, `{}`...)
	}
	return append(b, '}')
}

// AppendJSONString appends s as a JSON string, as Trace JSON does.
func AppendJSONString(b []byte, s string) []byte { return trace.AppendJSONString(b, s) }

func appendJSONString(b []byte, s string) []byte { return trace.AppendJSONString(b, s) }
