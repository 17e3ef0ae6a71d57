package otlp

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ztsd/ztsd/trace"
)

// Attribute names this package writes (see the package documentation).
const (
	AttrSourceFormat             = "source.format"
	AttrScopeName                = "otel.scope.name"
	AttrScopeVersion             = "otel.scope.version"
	AttrScopeAttributes          = "otel.scope.attributes"
	AttrScopeSchemaURL           = "otel.scope.schema_url"
	AttrScopeDroppedAttributes   = "otel.scope.dropped_attributes_count"
	AttrResourceSchemaURL        = "otel.resource.schema_url"
	AttrResourceDroppedAttribute = "otel.resource.dropped_attributes_count"
	AttrSpanKind                 = "otel.span.kind"
	AttrStatusCode               = "otel.status.code"
	AttrStatusMessage            = "otel.status.message"
	AttrTraceState               = "otel.trace_state"
	AttrLinks                    = "otel.links"
	AttrDroppedAttributes        = "otel.dropped_attributes_count"
	AttrDroppedEvents            = "otel.dropped_events_count"
	AttrDroppedLinks             = "otel.dropped_links_count"

	// Keys of each map in otel.links.
	LinkTraceID           = "trace_id"
	LinkSpanID            = "span_id"
	LinkTraceState        = "trace_state"
	LinkAttributes        = "attributes"
	LinkDroppedAttributes = "dropped_attributes_count"

	// The exception event and its attributes (OpenTelemetry semantic
	// conventions).
	ExceptionEventName   = "exception"
	AttrExceptionType    = "exception.type"
	AttrExceptionMessage = "exception.message"
	AttrExceptionStack   = "exception.stacktrace"
)

// maxRejectReasons bounds the reasons quoted in a partial-success message.
const maxRejectReasons = 5

// mapper turns one decoded request into spans, collecting rejections.
type mapper struct {
	opt      Options
	total    int
	rejected int64
	reasons  []string
	// own and reserved are scratch lists of a span's attributes, and order
	// of its own attributes' order, reused from span to span (spanAttrs
	// copies them); arena holds the spans' merged attributes, allocated
	// once per scope.
	own, reserved trace.Attrs
	order         []int32
	arena         trace.Attrs
}

// mapRequest maps every span of req; badIDs names spans whose ids OTLP JSON
// could not read (they are rejected with that reason). OTLP JSON bodies
// take it; binary protobuf bodies take decodeWire, which maps the wire
// bytes in the same order with the same rejections (wire_test.go holds it
// to that).
func mapRequest(req *collectortrace.ExportTraceServiceRequest, badIDs map[*tracepb.Span]string, opt Options) ([]*trace.Span, int64, string, error) {
	total := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			total += len(ss.GetSpans())
		}
	}
	if total > opt.MaxSpansPerRequest {
		return nil, 0, "", fmt.Errorf("%w: %d spans, limit %d per request", ErrTooLarge, total, opt.MaxSpansPerRequest)
	}
	m := &mapper{opt: opt, total: total}
	spans := make([]*trace.Span, 0, total)
	ingest := opt.Ingest()
	for ri, rs := range req.GetResourceSpans() {
		resource, resErr := m.resourceAttrs(rs)
		for si, ss := range rs.GetScopeSpans() {
			shared, scopeErr := m.scopeAttrs(ss, resource)
			attrs := 0
			for _, ps := range ss.GetSpans() {
				attrs += len(ps.GetAttributes())
			}
			m.sizeArena(len(ss.GetSpans()), attrs, len(shared))
			for pi, ps := range ss.GetSpans() {
				var err error
				switch {
				case resErr != nil:
					err = fmt.Errorf("resource: %w", resErr)
				case scopeErr != nil:
					err = fmt.Errorf("scope: %w", scopeErr)
				case badIDs[ps] != "":
					err = errors.New(badIDs[ps])
				}
				var s *trace.Span
				if err == nil {
					s, err = m.span(ps, shared)
				}
				if err != nil {
					m.reject(fmt.Sprintf("resourceSpans[%d].scopeSpans[%d].spans[%d]", ri, si, pi), ps.GetTraceId(), ps.GetSpanId(), err)
					continue
				}
				if err := ingest.CheckSpan(s); err != nil {
					return nil, 0, "", fmt.Errorf("%w: resourceSpans[%d].scopeSpans[%d].spans[%d]: %w", ErrLimit, ri, si, pi, err)
				}
				spans = append(spans, s)
			}
		}
	}
	return spans, m.rejected, m.message(), nil
}

// reject counts a span that cannot be stored; traceID and spanID are its
// ids as sent.
func (m *mapper) reject(where string, traceID, spanID []byte, err error) {
	m.rejected++
	if len(m.reasons) < maxRejectReasons {
		if len(spanID) > 0 {
			where = fmt.Sprintf("%s (span id %x)", where, spanID)
		}
		m.reasons = append(m.reasons, fmt.Sprintf("%s: %v", where, err))
	}
	if m.opt.Logger.Enabled(context.Background(), slog.LevelDebug) {
		m.opt.Logger.Debug("OTLP span rejected", "where", where, "trace_id", hex.EncodeToString(traceID),
			"span_id", hex.EncodeToString(spanID), "err", err)
	}
}

// message is partial_success.error_message: empty when nothing was rejected.
func (m *mapper) message() string {
	if m.rejected == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d spans rejected: %s", m.rejected, m.total, strings.Join(m.reasons, "; "))
	if more := m.rejected - int64(len(m.reasons)); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	return b.String()
}

// resourceAttrs returns the resource's attributes plus otel.resource.*.
func (m *mapper) resourceAttrs(rs *tracepb.ResourceSpans) (trace.Attrs, error) {
	res := rs.GetResource()
	attrs, err := m.appendAttrs(nil, res.GetAttributes(), 1)
	if err != nil {
		return nil, err
	}
	if u := rs.GetSchemaUrl(); u != "" {
		if err := m.checkString("schema url", u); err != nil {
			return nil, err
		}
		attrs = append(attrs, trace.Attr{Key: AttrResourceSchemaURL, Value: trace.String(u)})
	}
	if n := res.GetDroppedAttributesCount(); n != 0 {
		attrs = append(attrs, trace.Attr{Key: AttrResourceDroppedAttribute, Value: trace.Int(int64(n))})
	}
	return attrs, nil
}

// scopeAttrs returns what every span of ss shares, sorted: the resource's
// attributes and otel.resource.* (in resource), then otel.scope.*. They win
// over a span's own attributes on collisions.
func (m *mapper) scopeAttrs(ss *tracepb.ScopeSpans, resource trace.Attrs) (trace.Attrs, error) {
	scope := ss.GetScope()
	shared := make(trace.Attrs, 0, len(resource)+6)
	shared = append(shared, resource...)
	for _, kv := range [...]struct{ key, val string }{
		{AttrScopeName, scope.GetName()},
		{AttrScopeVersion, scope.GetVersion()},
		{AttrScopeSchemaURL, ss.GetSchemaUrl()},
	} {
		if kv.val == "" {
			continue
		}
		if err := m.checkString(kv.key, kv.val); err != nil {
			return nil, err
		}
		shared = append(shared, trace.Attr{Key: kv.key, Value: trace.String(kv.val)})
	}
	if kvs := scope.GetAttributes(); len(kvs) > 0 {
		attrs, err := m.appendAttrs(nil, kvs, 2)
		if err != nil {
			return nil, err
		}
		shared = append(shared, trace.Attr{Key: AttrScopeAttributes, Value: trace.MapValue(sortAttrs(attrs))})
	}
	if n := scope.GetDroppedAttributesCount(); n != 0 {
		shared = append(shared, trace.Attr{Key: AttrScopeDroppedAttributes, Value: trace.Int(int64(n))})
	}
	return sortAttrs(shared), nil
}

// setSpanIdentity sets s's ids and times from an OTLP span's fields, or
// says why the span cannot be stored: the one check both mappers (wire
// bytes and the protobuf types OTLP JSON is read into) apply.
func setSpanIdentity(s *trace.Span, trace16, span8, parent []byte, start, end uint64) error {
	var err error
	if s.TraceID, err = traceID(trace16); err != nil {
		return err
	}
	if len(span8) != 8 {
		return fmt.Errorf("span id has %d bytes, want 8", len(span8))
	}
	if s.SpanID, err = spanID("span id", span8); err != nil {
		return err
	}
	if s.SpanID == 0 {
		return errors.New("span id is all zeroes")
	}
	if s.ParentID, err = spanID("parent span id", parent); err != nil {
		return err
	}
	switch {
	case start > math.MaxInt64:
		return fmt.Errorf("start time %d beyond the year 2262", start)
	case end > math.MaxInt64:
		return fmt.Errorf("end time %d beyond the year 2262", end)
	case end < start:
		return fmt.Errorf("end time %d before start time %d", end, start)
	}
	s.StartNS, s.DurationNS = int64(start), int64(end-start)
	return nil
}

// span maps one OTLP span; shared holds the resource and scope attributes.
func (m *mapper) span(ps *tracepb.Span, shared trace.Attrs) (*trace.Span, error) {
	s := &trace.Span{Source: trace.SourceOTLP}
	if err := setSpanIdentity(s, ps.GetTraceId(), ps.GetSpanId(), ps.GetParentSpanId(), ps.GetStartTimeUnixNano(), ps.GetEndTimeUnixNano()); err != nil {
		return nil, err
	}
	if err := m.checkString("span name", ps.GetName()); err != nil {
		return nil, err
	}
	s.Type = spanKindName(ps.GetKind())
	s.Error = ps.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR

	own, err := m.appendAttrs(m.own[:0], ps.GetAttributes(), 1)
	if err != nil {
		return nil, err
	}
	m.own = own
	// reserved holds the otel.* names that describe this span.
	reserved := m.reserved[:0]
	defer func() { m.reserved = reserved }()
	if s.Type != "" {
		reserved = append(reserved, trace.Attr{Key: AttrSpanKind, Value: trace.String(s.Type)})
	}
	if st := ps.GetStatus(); st != nil {
		if c := st.GetCode(); c != tracepb.Status_STATUS_CODE_UNSET {
			reserved = append(reserved, trace.Attr{Key: AttrStatusCode, Value: trace.String(statusCodeName(c))})
		}
		if msg := st.GetMessage(); msg != "" {
			if err := m.checkString("status message", msg); err != nil {
				return nil, err
			}
			reserved = append(reserved, trace.Attr{Key: AttrStatusMessage, Value: trace.String(msg)})
		}
	}
	if ts := ps.GetTraceState(); ts != "" {
		if err := m.checkString("trace state", ts); err != nil {
			return nil, err
		}
		reserved = append(reserved, trace.Attr{Key: AttrTraceState, Value: trace.String(ts)})
	}
	if links := ps.GetLinks(); len(links) > 0 {
		v, err := m.links(links)
		if err != nil {
			return nil, err
		}
		reserved = append(reserved, trace.Attr{Key: AttrLinks, Value: v})
	}
	for _, d := range [...]struct {
		key string
		n   uint32
	}{
		{AttrDroppedAttributes, ps.GetDroppedAttributesCount()},
		{AttrDroppedEvents, ps.GetDroppedEventsCount()},
		{AttrDroppedLinks, ps.GetDroppedLinksCount()},
	} {
		if d.n != 0 {
			reserved = append(reserved, trace.Attr{Key: d.key, Value: trace.Int(int64(d.n))})
		}
	}
	reserved = append(reserved, trace.Attr{Key: AttrSourceFormat, Value: trace.String(trace.SourceOTLP)})
	s.Attrs = m.spanAttrs(own, shared, sortAttrs(reserved))

	events := ps.GetEvents()
	if 1+len(events) > m.opt.Limits.MaxRecords {
		return nil, fmt.Errorf("%d events, limit %d records per span", len(events), m.opt.Limits.MaxRecords)
	}
	root := &trace.Record{Method: ps.GetName(), DurationNS: s.DurationNS, Calls: 1}
	if len(events) > 0 {
		root.Children = make([]*trace.Record, 0, len(events))
		for i, ev := range events {
			rec, err := m.event(ev, s.StartNS)
			if err != nil {
				return nil, fmt.Errorf("event %d (%q): %w", i, truncate(ev.GetName(), 64), err)
			}
			if rec.Exception != nil {
				root.Errors++
			}
			root.Children = append(root.Children, rec)
		}
	}
	s.Root = root
	s.FillSummary()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// event maps a span event onto a zero-length child record.
func (m *mapper) event(ev *tracepb.Span_Event, spanStart int64) (*trace.Record, error) {
	t := ev.GetTimeUnixNano()
	if t > math.MaxInt64 {
		return nil, fmt.Errorf("time %d beyond the year 2262", t)
	}
	if err := m.checkString("event name", ev.GetName()); err != nil {
		return nil, err
	}
	rec := &trace.Record{Method: ev.GetName()}
	if t != 0 {
		rec.StartNS = int64(t) - spanStart // both in [0, MaxInt64]: no overflow
	}
	attrs, err := m.appendAttrs(nil, ev.GetAttributes(), 1)
	if err != nil {
		return nil, err
	}
	if n := ev.GetDroppedAttributesCount(); n != 0 {
		attrs = append(attrs, trace.Attr{Key: AttrDroppedAttributes, Value: trace.Int(int64(n))})
	}
	rec.Attrs = sortAttrs(attrs)
	if rec.Method == ExceptionEventName {
		m.exception(rec)
	}
	return rec, nil
}

// exception moves an exception event's exception.* attributes into the
// record's Exception.
func (m *mapper) exception(rec *trace.Record) {
	exc := &trace.Exception{}
	if v, ok := rec.Attrs.Get(AttrExceptionType); ok {
		exc.Class = valueText(v)
		rec.Attrs = deleteAttr(rec.Attrs, AttrExceptionType)
	}
	if v, ok := rec.Attrs.Get(AttrExceptionMessage); ok {
		exc.Message = valueText(v)
		rec.Attrs = deleteAttr(rec.Attrs, AttrExceptionMessage)
	}
	if v, ok := rec.Attrs.Get(AttrExceptionStack); ok {
		if st, ok := parseStackTrace(valueText(v), m.opt.Limits.MaxDepth); ok {
			exc.Stack, exc.Cause = st.Frames, st.Cause
			rec.Attrs = deleteAttr(rec.Attrs, AttrExceptionStack)
		}
	}
	rec.Exception = exc
	rec.Errors = 1
}

// links maps span links onto a list of maps.
func (m *mapper) links(links []*tracepb.Span_Link) (trace.Value, error) {
	out := make([]trace.Value, 0, len(links))
	for i, l := range links {
		lm := make(trace.Attrs, 0, 5)
		lm = append(lm,
			trace.Attr{Key: LinkSpanID, Value: trace.String(hex.EncodeToString(l.GetSpanId()))},
			trace.Attr{Key: LinkTraceID, Value: trace.String(hex.EncodeToString(l.GetTraceId()))})
		if ts := l.GetTraceState(); ts != "" {
			if err := m.checkString("link trace state", ts); err != nil {
				return trace.Value{}, fmt.Errorf("link %d: %w", i, err)
			}
			lm = append(lm, trace.Attr{Key: LinkTraceState, Value: trace.String(ts)})
		}
		if kvs := l.GetAttributes(); len(kvs) > 0 {
			// otel.links (depth 1) → link map (2) → attributes map (3) → values (4).
			attrs, err := m.appendAttrs(nil, kvs, 4)
			if err != nil {
				return trace.Value{}, fmt.Errorf("link %d: %w", i, err)
			}
			lm = append(lm, trace.Attr{Key: LinkAttributes, Value: trace.MapValue(sortAttrs(attrs))})
		}
		if n := l.GetDroppedAttributesCount(); n != 0 {
			lm = append(lm, trace.Attr{Key: LinkDroppedAttributes, Value: trace.Int(int64(n))})
		}
		out = append(out, trace.MapValue(sortAttrs(lm)))
	}
	return trace.List(out...), nil
}

// appendAttrs appends kvs, converted, to dst; depth is the nesting level of
// their values (1 for a span's own attributes). The result is not sorted.
func (m *mapper) appendAttrs(dst trace.Attrs, kvs []*commonpb.KeyValue, depth int) (trace.Attrs, error) {
	for _, kv := range kvs {
		key := kv.GetKey()
		if key == "" && kv.GetKeyStrindex() != 0 {
			return nil, errors.New("attribute key_strindex is defined for profiles only")
		}
		if err := m.checkString("attribute key", key); err != nil {
			return nil, err
		}
		v, err := m.value(kv.GetValue(), depth)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", truncate(key, 64), err)
		}
		dst = append(dst, trace.Attr{Key: key, Value: v})
	}
	return dst, nil
}

// value converts an AnyValue at nesting level depth (1 = a top-level
// attribute value).
func (m *mapper) value(av *commonpb.AnyValue, depth int) (trace.Value, error) {
	if depth > trace.MaxValueDepth {
		return trace.Value{}, fmt.Errorf("value nested deeper than %d", trace.MaxValueDepth)
	}
	switch x := av.GetValue().(type) {
	case nil:
		return trace.Null(), nil
	case *commonpb.AnyValue_StringValue:
		if err := m.checkString("string value", x.StringValue); err != nil {
			return trace.Value{}, err
		}
		return trace.String(x.StringValue), nil
	case *commonpb.AnyValue_BoolValue:
		return trace.Bool(x.BoolValue), nil
	case *commonpb.AnyValue_IntValue:
		return trace.Int(x.IntValue), nil
	case *commonpb.AnyValue_DoubleValue:
		return trace.Float(x.DoubleValue), nil // NaN and ±Inf too: Trace JSON writes them {"$float":"NaN"}
	case *commonpb.AnyValue_BytesValue:
		if n := base64.StdEncoding.EncodedLen(len(x.BytesValue)); n > m.opt.Limits.MaxStringLen {
			return trace.Value{}, fmt.Errorf("bytes value of %d bytes encodes to %d base64 characters, limit %d", len(x.BytesValue), n, m.opt.Limits.MaxStringLen)
		}
		return trace.String(base64.StdEncoding.EncodeToString(x.BytesValue)), nil
	case *commonpb.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		list := make([]trace.Value, 0, len(vals))
		for i, e := range vals {
			v, err := m.value(e, depth+1)
			if err != nil {
				return trace.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			list = append(list, v)
		}
		return trace.List(list...), nil
	case *commonpb.AnyValue_KvlistValue:
		attrs, err := m.appendAttrs(nil, x.KvlistValue.GetValues(), depth+1)
		if err != nil {
			return trace.Value{}, err
		}
		return trace.MapValue(sortAttrs(attrs)), nil
	case *commonpb.AnyValue_StringValueStrindex:
		return trace.Value{}, errors.New("string_value_strindex is defined for profiles only")
	}
	return trace.Value{}, fmt.Errorf("unknown value type %T", av.GetValue())
}

func (m *mapper) checkString(what, s string) error {
	if len(s) > m.opt.Limits.MaxStringLen {
		return fmt.Errorf("%s of %d bytes, limit %d", what, len(s), m.opt.Limits.MaxStringLen)
	}
	return nil
}

func traceID(b []byte) (trace.TraceID, error) {
	var id trace.TraceID
	if len(b) != len(id) {
		return id, fmt.Errorf("trace id has %d bytes, want 16", len(b))
	}
	copy(id[:], b)
	if id.IsZero() {
		return id, errors.New("trace id is all zeroes")
	}
	return id, nil
}

// spanID reads an 8-byte id big-endian; empty is 0.
func spanID(what string, b []byte) (trace.SpanID, error) {
	switch len(b) {
	case 0:
		return 0, nil
	case 8:
		return trace.SpanID(binary.BigEndian.Uint64(b)), nil
	}
	return 0, fmt.Errorf("%s has %d bytes, want 8", what, len(b))
}

// spanKindName is Span.Type and otel.span.kind: "" when unspecified.
func spanKindName(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_UNSPECIFIED:
		return ""
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "kind_" + strconv.Itoa(int(k))
}

func statusCodeName(c tracepb.Status_StatusCode) string {
	switch c {
	case tracepb.Status_STATUS_CODE_OK:
		return "ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		return "error"
	}
	return "code_" + strconv.Itoa(int(c))
}

// valueText is a value as exception text: strings as they are, other
// scalars as the indexes render them.
func valueText(v trace.Value) string {
	if v.Kind == trace.KindString {
		return v.Str
	}
	return v.Text()
}

// sortAttrs sorts a by key, the last of repeated keys winning (as
// trace.Attrs.Sort does, without its reflection-based sort).
func sortAttrs(a trace.Attrs) trace.Attrs {
	if len(a) < 2 {
		return a
	}
	slices.SortStableFunc(a, func(x, y trace.Attr) int { return strings.Compare(x.Key, y.Key) })
	out := a[:1]
	for _, at := range a[1:] {
		if at.Key == out[len(out)-1].Key {
			out[len(out)-1] = at
			continue
		}
		out = append(out, at)
	}
	return out
}

// usualReserved is how many otel.* attributes a span usually gets
// (span.kind, status code, source.format); a span with more (status
// message, trace state, links, dropped counts) may not fit in the arena and
// gets its own array.
const usualReserved = 3

// sizeArena makes room in m.arena for the merged attributes of a scope's
// spans, holding attrs attributes of their own, each with shared: zeroing
// room for the rarely used reserved attributes of every span cost more than
// the arena saved.
func (m *mapper) sizeArena(spans, attrs, shared int) {
	n := spans*(shared+usualReserved) + attrs
	if cap(m.arena)-len(m.arena) < n {
		m.arena = make(trace.Attrs, 0, n)
	}
}

// spanAttrs is a span's attributes: own (in the order sent, the last of
// repeated keys winning), shared and reserved (sorted, unique) merged into
// one sorted list, a later list winning on a key in several. own is put in
// order through an index (m.order), not sorted in place: moving the
// attributes (112 bytes each, with pointers) cost more than comparing keys.
// The list is carved out of m.arena when it fits.
func (m *mapper) spanAttrs(own, shared, reserved trace.Attrs) trace.Attrs {
	if cap(m.order) < len(own) {
		m.order = make([]int32, 0, max(len(own), 16))
	}
	order := m.order[:0]
	for i := range own {
		order = append(order, int32(i))
	}
	if len(order) <= 16 {
		for i := 1; i < len(order); i++ { // insertion sort, stable
			x, j := order[i], i
			for ; j > 0 && own[order[j-1]].Key > own[x].Key; j-- {
				order[j] = order[j-1]
			}
			order[j] = x
		}
	} else {
		slices.SortStableFunc(order, func(x, y int32) int { return strings.Compare(own[x].Key, own[y].Key) })
	}
	w := 0
	for i, x := range order { // the last of equal keys stays
		if i+1 < len(order) && own[order[i+1]].Key == own[x].Key {
			continue
		}
		order[w] = x
		w++
	}
	order = order[:w]
	m.order = order

	n := len(order) + len(shared) + len(reserved)
	var out trace.Attrs
	inArena := cap(m.arena)-len(m.arena) >= n
	if inArena {
		out = m.arena[len(m.arena) : len(m.arena) : len(m.arena)+n]
	} else {
		out = make(trace.Attrs, 0, n)
	}
	for i, j, k := 0, 0, 0; ; {
		// best is the least key at the heads; from says which lists hold
		// it (1 own, 2 shared, 4 reserved), the latest one's value winning.
		var best *trace.Attr
		var from uint8
		if i < len(order) {
			best, from = &own[order[i]], 1
		}
		if j < len(shared) {
			if best == nil {
				best, from = &shared[j], 2
			} else if c := strings.Compare(shared[j].Key, best.Key); c <= 0 {
				if c < 0 {
					from = 0
				}
				best, from = &shared[j], from|2
			}
		}
		if k < len(reserved) {
			if best == nil {
				best, from = &reserved[k], 4
			} else if c := strings.Compare(reserved[k].Key, best.Key); c <= 0 {
				if c < 0 {
					from = 0
				}
				best, from = &reserved[k], from|4
			}
		}
		if best == nil {
			break
		}
		out = append(out, *best)
		if from&1 != 0 {
			i++
		}
		if from&2 != 0 {
			j++
		}
		if from&4 != 0 {
			k++
		}
	}
	if inArena {
		m.arena = m.arena[:len(m.arena)+len(out)]
	}
	return out
}

// deleteAttr removes key from sorted attrs.
func deleteAttr(a trace.Attrs, key string) trace.Attrs {
	for i := range a {
		if a[i].Key == key {
			return append(a[:i], a[i+1:]...)
		}
	}
	return a
}

// truncate shortens s to at most n bytes for error messages, cutting at a
// rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
