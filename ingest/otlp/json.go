package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// OTLP JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding)
// is protobuf's JSON mapping with two differences: trace and span ids are
// hex, not base64, and enums must be accepted as integers. The types below
// mirror the messages with lowerCamelCase names; leaf types read the value
// forms the mapping allows. Only leaves have UnmarshalJSON methods, so
// encoding/json reads the body in a single pass however deep values nest
// (its scanner bounds nesting at 10000 levels).

type jsonRequest struct {
	ResourceSpans []*jsonResourceSpans `json:"resourceSpans"`
}

type jsonResourceSpans struct {
	Resource   *jsonResource     `json:"resource"`
	ScopeSpans []*jsonScopeSpans `json:"scopeSpans"`
	SchemaURL  string            `json:"schemaUrl"`
}

type jsonResource struct {
	Attributes             []*jsonKeyValue `json:"attributes"`
	DroppedAttributesCount jsonUint32      `json:"droppedAttributesCount"`
}

type jsonScopeSpans struct {
	Scope     *jsonScope  `json:"scope"`
	Spans     []*jsonSpan `json:"spans"`
	SchemaURL string      `json:"schemaUrl"`
}

type jsonScope struct {
	Name                   string          `json:"name"`
	Version                string          `json:"version"`
	Attributes             []*jsonKeyValue `json:"attributes"`
	DroppedAttributesCount jsonUint32      `json:"droppedAttributesCount"`
}

type jsonSpan struct {
	TraceID                jsonID          `json:"traceId"`
	SpanID                 jsonID          `json:"spanId"`
	TraceState             string          `json:"traceState"`
	ParentSpanID           jsonID          `json:"parentSpanId"`
	Flags                  jsonUint32      `json:"flags"`
	Name                   string          `json:"name"`
	Kind                   jsonEnum        `json:"kind"`
	StartTimeUnixNano      jsonUint64      `json:"startTimeUnixNano"`
	EndTimeUnixNano        jsonUint64      `json:"endTimeUnixNano"`
	Attributes             []*jsonKeyValue `json:"attributes"`
	DroppedAttributesCount jsonUint32      `json:"droppedAttributesCount"`
	Events                 []*jsonEvent    `json:"events"`
	DroppedEventsCount     jsonUint32      `json:"droppedEventsCount"`
	Links                  []*jsonLink     `json:"links"`
	DroppedLinksCount      jsonUint32      `json:"droppedLinksCount"`
	Status                 *jsonStatus     `json:"status"`
}

type jsonEvent struct {
	TimeUnixNano           jsonUint64      `json:"timeUnixNano"`
	Name                   string          `json:"name"`
	Attributes             []*jsonKeyValue `json:"attributes"`
	DroppedAttributesCount jsonUint32      `json:"droppedAttributesCount"`
}

type jsonLink struct {
	TraceID                jsonID          `json:"traceId"`
	SpanID                 jsonID          `json:"spanId"`
	TraceState             string          `json:"traceState"`
	Attributes             []*jsonKeyValue `json:"attributes"`
	DroppedAttributesCount jsonUint32      `json:"droppedAttributesCount"`
	Flags                  jsonUint32      `json:"flags"`
}

type jsonStatus struct {
	Message string   `json:"message"`
	Code    jsonEnum `json:"code"`
}

type jsonKeyValue struct {
	Key   string        `json:"key"`
	Value *jsonAnyValue `json:"value"`
}

type jsonAnyValue struct {
	StringValue *string         `json:"stringValue"`
	BoolValue   *bool           `json:"boolValue"`
	IntValue    *jsonInt64      `json:"intValue"`
	DoubleValue *jsonFloat64    `json:"doubleValue"`
	ArrayValue  *jsonArrayValue `json:"arrayValue"`
	KvlistValue *jsonKvlist     `json:"kvlistValue"`
	BytesValue  *jsonBytes      `json:"bytesValue"`
}

type jsonArrayValue struct {
	Values []*jsonAnyValue `json:"values"`
}

type jsonKvlist struct {
	Values []*jsonKeyValue `json:"values"`
}

// isNull reports whether a JSON value is null.
func isNull(data []byte) bool { return string(data) == "null" }

// unquote returns the contents of a JSON string, or ok=false for another
// kind of value.
func unquote(data []byte) (s string, ok bool, err error) {
	if len(data) == 0 || data[0] != '"' {
		return "", false, nil
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return "", true, err
	}
	return s, true, nil
}

// quoteForError shows a JSON value in an error message, shortened.
func quoteForError(data []byte) string { return truncate(string(data), 48) }

// jsonID is a hex trace or span id. A string that is not hex is kept as a
// per-span problem (the span is rejected, the request is not).
type jsonID struct {
	b   []byte
	bad string
}

func (id *jsonID) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	s, ok, err := unquote(data)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("id %s: want a hex string", quoteForError(data))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		id.bad = fmt.Sprintf("id %q is not hex", truncate(s, 40))
		return nil
	}
	id.b = b
	return nil
}

// jsonInt64 is an int64 written as a JSON number or a decimal string.
type jsonInt64 int64

func (v *jsonInt64) UnmarshalJSON(data []byte) error {
	n, err := parseJSONInt(data, 64)
	if err != nil {
		return err
	}
	*v = jsonInt64(n)
	return nil
}

// jsonUint64 is a uint64 (fixed64 times) as a number or a decimal string.
type jsonUint64 uint64

func (v *jsonUint64) UnmarshalJSON(data []byte) error {
	n, err := parseJSONUint(data, 64)
	if err != nil {
		return err
	}
	*v = jsonUint64(n)
	return nil
}

// jsonUint32 is a uint32 (counts, flags) as a number or a decimal string.
type jsonUint32 uint32

func (v *jsonUint32) UnmarshalJSON(data []byte) error {
	n, err := parseJSONUint(data, 32)
	if err != nil {
		return err
	}
	*v = jsonUint32(n)
	return nil
}

// numberText returns the digits of a JSON number or of a string holding one.
func numberText(data []byte) (string, error) {
	if s, ok, err := unquote(data); ok || err != nil {
		return s, err
	}
	return string(data), nil
}

func parseJSONInt(data []byte, bits int) (int64, error) {
	if isNull(data) {
		return 0, nil
	}
	s, err := numberText(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err == nil {
		return n, nil
	}
	// protobuf's JSON mapping also accepts integral values in exponent
	// form ("1e3").
	f, ferr := strconv.ParseFloat(s, 64)
	if lim := math.Ldexp(1, bits-1); ferr == nil && f == math.Trunc(f) && f >= -lim && f < lim {
		return int64(f), nil
	}
	return 0, fmt.Errorf("integer %s: %v", quoteForError(data), err)
}

func parseJSONUint(data []byte, bits int) (uint64, error) {
	if isNull(data) {
		return 0, nil
	}
	s, err := numberText(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err == nil {
		return n, nil
	}
	f, ferr := strconv.ParseFloat(s, 64)
	if ferr == nil && f == math.Trunc(f) && f >= 0 && f < math.Ldexp(1, bits) {
		return uint64(f), nil
	}
	return 0, fmt.Errorf("unsigned integer %s: %v", quoteForError(data), err)
}

// jsonFloat64 is a double as a number, a numeric string or "NaN",
// "Infinity", "-Infinity".
type jsonFloat64 float64

func (v *jsonFloat64) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	s, err := numberText(data)
	if err != nil {
		return err
	}
	var f float64
	switch s {
	case "NaN":
		f = math.NaN()
	case "Infinity":
		f = math.Inf(1)
	case "-Infinity":
		f = math.Inf(-1)
	default:
		if f, err = strconv.ParseFloat(s, 64); err != nil {
			return fmt.Errorf("double %s: %v", quoteForError(data), err)
		}
	}
	*v = jsonFloat64(f)
	return nil
}

// jsonEnum is an enum as its number or its name; names resolve in
// toProto, where the enum type is known.
type jsonEnum struct {
	num  int32
	name string
}

func (e *jsonEnum) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	s, ok, err := unquote(data)
	if err != nil {
		return err
	}
	if ok {
		e.name = s
		return nil
	}
	n, err := parseJSONInt(data, 32)
	if err != nil {
		return fmt.Errorf("enum: %w", err)
	}
	e.num = int32(n)
	return nil
}

func (e jsonEnum) resolve(what string, names map[string]int32) (int32, error) {
	if e.name == "" {
		return e.num, nil
	}
	if n, ok := names[e.name]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("%s %q: not a known name", what, truncate(e.name, 40))
}

// jsonBytes is a bytes value in base64 (standard or URL alphabet, padded
// or not, as protobuf's JSON mapping accepts).
type jsonBytes []byte

func (b *jsonBytes) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	s, ok, err := unquote(data)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("bytes %s: want a base64 string", quoteForError(data))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if out, err := enc.DecodeString(s); err == nil {
			*b = out
			return nil
		}
	}
	return fmt.Errorf("bytes %s: not base64", quoteForError(data))
}

// unmarshalJSON decodes an OTLP JSON ExportTraceServiceRequest into the
// protobuf types. badIDs names the spans whose ids were not hex.
//
// Field names may be spelled lowerCamelCase ("resourceSpans") or as in the
// .proto files ("resource_spans"), as the protobuf JSON mapping requires
// parsers to accept (opentelemetry-proto's own examples used the second
// until 2023). A body with members but no "resourceSpans" is not an OTLP
// request: ErrMalformed, never an empty success ({} is the empty request).
func unmarshalJSON(body []byte) (*collectortrace.ExportTraceServiceRequest, map[*tracepb.Span]string, error) {
	body = camelCaseKeys(body)
	var jr jsonRequest
	if err := json.Unmarshal(body, &jr); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, nil, fmt.Errorf("%w: JSON at offset %d: %v", ErrMalformed, syn.Offset, err)
		case errors.As(err, &typ):
			return nil, nil, fmt.Errorf("%w: JSON at offset %d: field %s: %v", ErrMalformed, typ.Offset, typ.Field, err)
		}
		return nil, nil, fmt.Errorf("%w: JSON: %v", ErrMalformed, err)
	}
	if jr.ResourceSpans == nil {
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil || len(top) > 0 && top["resourceSpans"] == nil {
			return nil, nil, fmt.Errorf("%w: JSON: no \"resourceSpans\" (or \"resource_spans\") member: not an OTLP trace export request", ErrMalformed)
		}
	}
	c := jsonConverter{}
	req, err := c.request(&jr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: JSON: %v", ErrMalformed, err)
	}
	return req, c.badIDs, nil
}

type jsonConverter struct {
	badIDs map[*tracepb.Span]string
}

func (c *jsonConverter) request(jr *jsonRequest) (*collectortrace.ExportTraceServiceRequest, error) {
	req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: make([]*tracepb.ResourceSpans, 0, len(jr.ResourceSpans))}
	for ri, jrs := range jr.ResourceSpans {
		rs := &tracepb.ResourceSpans{}
		if jrs != nil {
			rs.SchemaUrl = jrs.SchemaURL
			if jrs.Resource != nil {
				attrs, err := c.keyValues(jrs.Resource.Attributes)
				if err != nil {
					return nil, fmt.Errorf("resourceSpans[%d].resource: %w", ri, err)
				}
				rs.Resource = &resourcepb.Resource{Attributes: attrs, DroppedAttributesCount: uint32(jrs.Resource.DroppedAttributesCount)}
			}
			for si, jss := range jrs.ScopeSpans {
				ss, err := c.scopeSpans(jss)
				if err != nil {
					return nil, fmt.Errorf("resourceSpans[%d].scopeSpans[%d]%w", ri, si, err)
				}
				rs.ScopeSpans = append(rs.ScopeSpans, ss)
			}
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	return req, nil
}

// scopeSpans converts one scope; errors start with the path below it.
func (c *jsonConverter) scopeSpans(jss *jsonScopeSpans) (*tracepb.ScopeSpans, error) {
	ss := &tracepb.ScopeSpans{}
	if jss == nil {
		return ss, nil
	}
	ss.SchemaUrl = jss.SchemaURL
	if js := jss.Scope; js != nil {
		attrs, err := c.keyValues(js.Attributes)
		if err != nil {
			return nil, fmt.Errorf(".scope: %w", err)
		}
		ss.Scope = &commonpb.InstrumentationScope{Name: js.Name, Version: js.Version, Attributes: attrs,
			DroppedAttributesCount: uint32(js.DroppedAttributesCount)}
	}
	ss.Spans = make([]*tracepb.Span, 0, len(jss.Spans))
	for pi, js := range jss.Spans {
		s, err := c.span(js)
		if err != nil {
			return nil, fmt.Errorf(".spans[%d]: %w", pi, err)
		}
		ss.Spans = append(ss.Spans, s)
	}
	return ss, nil
}

func (c *jsonConverter) span(js *jsonSpan) (*tracepb.Span, error) {
	s := &tracepb.Span{}
	if js == nil {
		return s, nil
	}
	kind, err := js.Kind.resolve("kind", tracepb.Span_SpanKind_value)
	if err != nil {
		return nil, err
	}
	*s = tracepb.Span{
		TraceId:                js.TraceID.b,
		SpanId:                 js.SpanID.b,
		TraceState:             js.TraceState,
		ParentSpanId:           js.ParentSpanID.b,
		Flags:                  uint32(js.Flags),
		Name:                   js.Name,
		Kind:                   tracepb.Span_SpanKind(kind),
		StartTimeUnixNano:      uint64(js.StartTimeUnixNano),
		EndTimeUnixNano:        uint64(js.EndTimeUnixNano),
		DroppedAttributesCount: uint32(js.DroppedAttributesCount),
		DroppedEventsCount:     uint32(js.DroppedEventsCount),
		DroppedLinksCount:      uint32(js.DroppedLinksCount),
	}
	for _, id := range []struct {
		what string
		id   jsonID
	}{{"trace id", js.TraceID}, {"span id", js.SpanID}, {"parent span id", js.ParentSpanID}} {
		if id.id.bad != "" {
			if c.badIDs == nil {
				c.badIDs = make(map[*tracepb.Span]string)
			}
			c.badIDs[s] = id.what + ": " + id.id.bad
			break
		}
	}
	if s.Attributes, err = c.keyValues(js.Attributes); err != nil {
		return nil, err
	}
	for i, je := range js.Events {
		ev := &tracepb.Span_Event{}
		if je != nil {
			ev.TimeUnixNano, ev.Name, ev.DroppedAttributesCount = uint64(je.TimeUnixNano), je.Name, uint32(je.DroppedAttributesCount)
			if ev.Attributes, err = c.keyValues(je.Attributes); err != nil {
				return nil, fmt.Errorf("events[%d]: %w", i, err)
			}
		}
		s.Events = append(s.Events, ev)
	}
	for i, jl := range js.Links {
		l := &tracepb.Span_Link{}
		if jl != nil {
			// A link's ids are kept as they are; a non-hex one is empty.
			l.TraceId, l.SpanId, l.TraceState = jl.TraceID.b, jl.SpanID.b, jl.TraceState
			l.DroppedAttributesCount, l.Flags = uint32(jl.DroppedAttributesCount), uint32(jl.Flags)
			if l.Attributes, err = c.keyValues(jl.Attributes); err != nil {
				return nil, fmt.Errorf("links[%d]: %w", i, err)
			}
		}
		s.Links = append(s.Links, l)
	}
	if js.Status != nil {
		code, err := js.Status.Code.resolve("status code", tracepb.Status_StatusCode_value)
		if err != nil {
			return nil, err
		}
		s.Status = &tracepb.Status{Message: js.Status.Message, Code: tracepb.Status_StatusCode(code)}
	}
	return s, nil
}

func (c *jsonConverter) keyValues(jkvs []*jsonKeyValue) ([]*commonpb.KeyValue, error) {
	if len(jkvs) == 0 {
		return nil, nil
	}
	kvs := make([]*commonpb.KeyValue, 0, len(jkvs))
	for _, jkv := range jkvs {
		kv := &commonpb.KeyValue{}
		if jkv != nil {
			kv.Key = jkv.Key
			v, err := c.anyValue(jkv.Value)
			if err != nil {
				return nil, fmt.Errorf("attribute %q: %w", truncate(jkv.Key, 64), err)
			}
			kv.Value = v
		}
		kvs = append(kvs, kv)
	}
	return kvs, nil
}

// anyValue converts a value; exactly one field may be set (none is an
// empty value).
func (c *jsonConverter) anyValue(jv *jsonAnyValue) (*commonpb.AnyValue, error) {
	if jv == nil {
		return nil, nil
	}
	av := &commonpb.AnyValue{}
	set := 0
	if jv.StringValue != nil {
		set++
		av.Value = &commonpb.AnyValue_StringValue{StringValue: *jv.StringValue}
	}
	if jv.BoolValue != nil {
		set++
		av.Value = &commonpb.AnyValue_BoolValue{BoolValue: *jv.BoolValue}
	}
	if jv.IntValue != nil {
		set++
		av.Value = &commonpb.AnyValue_IntValue{IntValue: int64(*jv.IntValue)}
	}
	if jv.DoubleValue != nil {
		set++
		av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: float64(*jv.DoubleValue)}
	}
	if jv.BytesValue != nil {
		set++
		av.Value = &commonpb.AnyValue_BytesValue{BytesValue: *jv.BytesValue}
	}
	if jv.ArrayValue != nil {
		set++
		arr := &commonpb.ArrayValue{Values: make([]*commonpb.AnyValue, 0, len(jv.ArrayValue.Values))}
		for i, e := range jv.ArrayValue.Values {
			v, err := c.anyValue(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if v == nil {
				v = &commonpb.AnyValue{}
			}
			arr.Values = append(arr.Values, v)
		}
		av.Value = &commonpb.AnyValue_ArrayValue{ArrayValue: arr}
	}
	if jv.KvlistValue != nil {
		set++
		kvs, err := c.keyValues(jv.KvlistValue.Values)
		if err != nil {
			return nil, err
		}
		av.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}
	}
	if set > 1 {
		return nil, fmt.Errorf("value sets %d of stringValue, boolValue, intValue, doubleValue, bytesValue, arrayValue, kvlistValue; want one", set)
	}
	return av, nil
}

// camelCaseKeys returns body with every object member name that holds an
// underscore turned into lowerCamelCase ("parent_span_id" →
// "parentSpanId"), or body itself when no name has one. OTLP JSON has no
// user-chosen member names (attribute keys are "key" values, not names),
// so only field names change. Malformed input is returned as it is, for
// the decoder to report.
func camelCaseKeys(body []byte) []byte {
	var out []byte // nil until a name changes
	copied := 0    // body[:copied] is in out
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		start := i
		underscore := false
		for i++; i < len(body) && body[i] != '"'; i++ {
			switch body[i] {
			case '\\':
				i++
			case '_':
				underscore = true
			}
		}
		if i >= len(body) {
			break
		}
		if !underscore {
			continue
		}
		j := i + 1
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j >= len(body) || body[j] != ':' {
			continue // a string value, not a member name
		}
		out = append(out, body[copied:start+1]...)
		upper := false
		for _, c := range body[start+1 : i] {
			switch {
			case c == '_':
				upper = true
			case upper && c >= 'a' && c <= 'z':
				out = append(out, c-'a'+'A')
				upper = false
			default:
				out = append(out, c)
				upper = false
			}
		}
		copied = i
	}
	if out == nil {
		return body
	}
	return append(out, body[copied:]...)
}
