package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ztsd/ztsd/trace"
)

// decodeWire decodes a binary ExportTraceServiceRequest (see wire.go) and
// maps its spans as mapRequest maps the decoded message.
func decodeWire(body []byte, opt Options) ([]*trace.Span, int64, string, error) {
	v, err := validateWire(body)
	if err != nil {
		return nil, 0, "", err
	}
	if v.spans > opt.MaxSpansPerRequest {
		return nil, 0, "", fmt.Errorf("%w: %d spans, limit %d per request", ErrTooLarge, v.spans, opt.MaxSpansPerRequest)
	}
	d := &wireDecoder{
		mapper:    mapper{opt: opt, total: v.spans},
		body:      body,
		src:       string(body),
		scopes:    v.scopes,
		spanBlock: make([]trace.Span, v.spans),
		rootBlock: make([]trace.Record, v.spans),
	}
	return d.request()
}

// wireBytes is the value of a bytes field: where it is in the body.
type wireBytes struct{ off, n int }

// wireValue is one field as fieldIter reads it.
type wireValue struct {
	num protowire.Number
	typ protowire.Type
	u   uint64    // a varint, fixed32 or fixed64 value
	b   wireBytes // a bytes value
	at  int       // where the field's tag is
}

// fieldIter reads the fields of one message encoding that validateWire
// accepted; it stops at anything it cannot read rather than fail.
type fieldIter struct {
	body     []byte
	off, end int
}

func (it *fieldIter) next(f *wireValue) bool {
	if it.off >= it.end {
		return false
	}
	b := it.body[it.off:it.end]
	tag, n := uint64(b[0]), 1 // most tags and lengths are one byte
	if tag >= 0x80 {
		if tag, n = protowire.ConsumeVarint(b); n < 0 {
			it.off = it.end
			return false
		}
	}
	num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
	f.num, f.typ, f.at = num, typ, it.off
	var m int
	if typ == protowire.BytesType && n < len(b) && b[n] < 0x80 {
		if l := int(b[n]); n+1+l <= len(b) {
			f.b = wireBytes{off: it.off + n + 1, n: l}
			it.off += n + 1 + l
			return true
		}
	}
	switch typ {
	case protowire.VarintType:
		f.u, m = protowire.ConsumeVarint(b[n:])
	case protowire.Fixed32Type:
		var v uint32
		v, m = protowire.ConsumeFixed32(b[n:])
		f.u = uint64(v)
	case protowire.Fixed64Type:
		f.u, m = protowire.ConsumeFixed64(b[n:])
	case protowire.BytesType:
		var v []byte
		v, m = protowire.ConsumeBytes(b[n:])
		f.b = wireBytes{off: it.off + n + m - len(v), n: len(v)}
	default:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	}
	if m < 0 {
		it.off = it.end
		return false
	}
	it.off += n + m
	return true
}

// isBytes reports whether f is field num sent as bytes (a string, bytes or
// message field); a field sent with another wire type is an unknown field.
func (f *wireValue) isBytes(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.BytesType
}

func (f *wireValue) isVarint(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.VarintType
}

func (f *wireValue) isFixed64(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.Fixed64Type
}

// msgParts is the encoding of a non-repeated message field: the payload of
// every occurrence, which protobuf merges as if they were one.
type msgParts struct {
	first wireBytes
	all   []wireBytes // every payload when there are several
	n     int
}

func onePart(b wireBytes) msgParts { return msgParts{first: b, n: 1} }

func (p *msgParts) add(b wireBytes) {
	switch p.n {
	case 0:
		p.first = b
	case 1:
		p.all = append(p.all, p.first, b)
	default:
		p.all = append(p.all, b)
	}
	p.n++
}

func (p *msgParts) part(i int) wireBytes {
	if p.all == nil {
		return p.first
	}
	return p.all[i]
}

// partsIter reads the fields of a merged message, part after part.
type partsIter struct {
	parts    msgParts
	nextPart int // the next part to read
	it       fieldIter
}

func (d *wireDecoder) fields(p msgParts) partsIter {
	return partsIter{parts: p, it: fieldIter{body: d.body}}
}

func (m *partsIter) next(f *wireValue) bool {
	for !m.it.next(f) {
		if m.nextPart >= m.parts.n {
			return false
		}
		b := m.parts.part(m.nextPart)
		m.nextPart++
		m.it.off, m.it.end = b.off, b.off+b.n
	}
	return true
}

// wireDecoder is the second pass: it maps a validated request onto spans.
type wireDecoder struct {
	mapper
	body []byte
	// src is a copy of body: every string of the spans is a substring of
	// it, so the body's buffer can be reused once decoding returns.
	src    string
	scopes []scopeSize // from the validator, in the order of the body
	scope  int         // the next of scopes
	// spanBlock and rootBlock hold the request's spans and their root
	// records, each span taking the next: two allocations per request
	// instead of two per span.
	spanBlock []trace.Span
	rootBlock []trace.Record
}

func (d *wireDecoder) str(b wireBytes) string { return d.src[b.off : b.off+b.n] }

func (d *wireDecoder) bytes(b wireBytes) []byte { return d.body[b.off : b.off+b.n : b.off+b.n] }

func (d *wireDecoder) msg(b wireBytes) fieldIter {
	return fieldIter{body: d.body, off: b.off, end: b.off + b.n}
}

func (d *wireDecoder) request() ([]*trace.Span, int64, string, error) {
	spans := make([]*trace.Span, 0, d.total)
	ingest := d.opt.Ingest()
	it := fieldIter{body: d.body, end: len(d.body)}
	var f wireValue
	for ri := 0; it.next(&f); {
		if !f.isBytes(1) {
			continue
		}
		var err error
		if spans, err = d.resourceSpans(ri, f.b, spans, ingest); err != nil {
			return nil, 0, "", err
		}
		ri++
	}
	return spans, d.rejected, d.message(), nil
}

// resourceSpans maps the spans of one ResourceSpans, appending them to
// spans.
func (d *wireDecoder) resourceSpans(ri int, b wireBytes, spans []*trace.Span, ingest trace.IngestLimits) ([]*trace.Span, error) {
	var (
		res       msgParts
		schemaURL wireBytes
		f         wireValue
	)
	for it := d.msg(b); it.next(&f); {
		switch {
		case f.isBytes(1):
			res.add(f.b)
		case f.isBytes(3):
			schemaURL = f.b
		}
	}
	resource, resErr := d.resourceAttrs(res, d.str(schemaURL))
	for it, si := d.msg(b), 0; it.next(&f); {
		if !f.isBytes(2) {
			continue
		}
		var err error
		if spans, err = d.scopeSpans(ri, si, f.b, resource, resErr, spans, ingest); err != nil {
			return nil, err
		}
		si++
	}
	return spans, nil
}

// resourceAttrs is mapper.resourceAttrs.
func (d *wireDecoder) resourceAttrs(res msgParts, schemaURL string) (trace.Attrs, error) {
	var (
		attrs   trace.Attrs
		dropped uint32
		err     error
		f       wireValue
	)
	for it := d.fields(res); it.next(&f); {
		switch {
		case f.isBytes(1):
			if err == nil {
				attrs, err = d.appendKeyValue(attrs, f.b, 1)
			}
		case f.isVarint(2):
			dropped = uint32(f.u)
		}
	}
	if err != nil {
		return nil, err
	}
	if schemaURL != "" {
		if err := d.checkString("schema url", schemaURL); err != nil {
			return nil, err
		}
		attrs = append(attrs, trace.Attr{Key: AttrResourceSchemaURL, Value: trace.String(schemaURL)})
	}
	if dropped != 0 {
		attrs = append(attrs, trace.Attr{Key: AttrResourceDroppedAttribute, Value: trace.Int(int64(dropped))})
	}
	return attrs, nil
}

// scopeSpans maps the spans of one ScopeSpans, as mapRequest's loop does.
func (d *wireDecoder) scopeSpans(ri, si int, b wireBytes, resource trace.Attrs, resErr error, spans []*trace.Span, ingest trace.IngestLimits) ([]*trace.Span, error) {
	size := d.scopes[d.scope]
	d.scope++
	var (
		scope     msgParts
		schemaURL wireBytes
		f         wireValue
	)
	for it := d.msg(b); it.next(&f); {
		switch {
		case f.isBytes(1):
			scope.add(f.b)
		case f.isBytes(3):
			schemaURL = f.b
		}
	}
	shared, scopeErr := d.scopeAttrs(scope, d.str(schemaURL), resource)
	d.sizeArena(size.spans, size.attrs, len(shared))
	for it, pi := d.msg(b), 0; it.next(&f); {
		if !f.isBytes(2) {
			continue
		}
		var err error
		switch {
		case resErr != nil:
			err = fmt.Errorf("resource: %w", resErr)
		case scopeErr != nil:
			err = fmt.Errorf("scope: %w", scopeErr)
		}
		var s *trace.Span
		if err == nil {
			s, err = d.span(f.b, shared)
		}
		if err != nil {
			traceID, spanID := d.spanIDs(f.b)
			d.reject(fmt.Sprintf("resourceSpans[%d].scopeSpans[%d].spans[%d]", ri, si, pi), traceID, spanID, err)
			pi++
			continue
		}
		if err := ingest.CheckSpan(s); err != nil {
			return nil, fmt.Errorf("%w: resourceSpans[%d].scopeSpans[%d].spans[%d]: %w", ErrLimit, ri, si, pi, err)
		}
		spans = append(spans, s)
		pi++
	}
	return spans, nil
}

// scopeAttrs is mapper.scopeAttrs.
func (d *wireDecoder) scopeAttrs(scope msgParts, schemaURL string, resource trace.Attrs) (trace.Attrs, error) {
	var (
		name, version wireBytes
		dropped       uint32
		hasAttrs      bool
		f             wireValue
	)
	for it := d.fields(scope); it.next(&f); {
		switch {
		case f.isBytes(1):
			name = f.b
		case f.isBytes(2):
			version = f.b
		case f.isBytes(3):
			hasAttrs = true
		case f.isVarint(4):
			dropped = uint32(f.u)
		}
	}
	shared := make(trace.Attrs, 0, len(resource)+6)
	shared = append(shared, resource...)
	for _, kv := range [...]struct{ key, val string }{
		{AttrScopeName, d.str(name)},
		{AttrScopeVersion, d.str(version)},
		{AttrScopeSchemaURL, schemaURL},
	} {
		if kv.val == "" {
			continue
		}
		if err := d.checkString(kv.key, kv.val); err != nil {
			return nil, err
		}
		shared = append(shared, trace.Attr{Key: kv.key, Value: trace.String(kv.val)})
	}
	if hasAttrs {
		var attrs trace.Attrs
		for it := d.fields(scope); it.next(&f); {
			if f.isBytes(3) {
				var err error
				if attrs, err = d.appendKeyValue(attrs, f.b, 2); err != nil {
					return nil, err
				}
			}
		}
		shared = append(shared, trace.Attr{Key: AttrScopeAttributes, Value: trace.MapValue(sortAttrs(attrs))})
	}
	if dropped != 0 {
		shared = append(shared, trace.Attr{Key: AttrScopeDroppedAttributes, Value: trace.Int(int64(dropped))})
	}
	return sortAttrs(shared), nil
}

// spanIDs returns a span's trace and span ids as sent, for a rejection.
func (d *wireDecoder) spanIDs(b wireBytes) (traceID, spanID []byte) {
	var f wireValue
	for it := d.msg(b); it.next(&f); {
		switch {
		case f.isBytes(1):
			traceID = d.bytes(f.b)
		case f.isBytes(2):
			spanID = d.bytes(f.b)
		}
	}
	return traceID, spanID
}

// wireSpan is what a Span message says, its last value of each field.
type wireSpan struct {
	traceID, spanID, parentID, traceState, name wireBytes
	kind                                        int32
	start, end                                  uint64
	droppedAttrs, droppedEvents, droppedLinks   uint32
	statusCode                                  int32
	statusMessage                               wireBytes
	events, links                               int
	// own holds the span's attributes, read with the rest in one pass
	// (mapping them has no effect but on own); ownErr is the first that
	// cannot be stored, which span reports where mapper.span would.
	own    trace.Attrs
	ownErr error
}

// readSpan reads a Span message; its attributes go to d.own's array.
func (d *wireDecoder) readSpan(b wireBytes) wireSpan {
	var (
		ps wireSpan
		f  wireValue
	)
	ps.own = d.own[:0]
	for it := d.msg(b); it.next(&f); {
		switch f.typ {
		case protowire.BytesType:
			switch f.num {
			case 1:
				ps.traceID = f.b
			case 2:
				ps.spanID = f.b
			case 3:
				ps.traceState = f.b
			case 4:
				ps.parentID = f.b
			case 5:
				ps.name = f.b
			case 9:
				if ps.ownErr == nil {
					ps.own, ps.ownErr = d.appendKeyValue(ps.own, f.b, 1)
				}
			case 11:
				ps.events++
			case 13:
				ps.links++
			case 15:
				// Status occurrences merge: each sets what it sends.
				var g wireValue
				for st := d.msg(f.b); st.next(&g); {
					switch {
					case g.isBytes(2):
						ps.statusMessage = g.b
					case g.isVarint(3):
						ps.statusCode = int32(g.u)
					}
				}
			}
		case protowire.VarintType:
			switch f.num {
			case 6:
				ps.kind = int32(f.u)
			case 10:
				ps.droppedAttrs = uint32(f.u)
			case 12:
				ps.droppedEvents = uint32(f.u)
			case 14:
				ps.droppedLinks = uint32(f.u)
			}
		case protowire.Fixed64Type:
			switch f.num {
			case 7:
				ps.start = f.u
			case 8:
				ps.end = f.u
			}
		}
	}
	return ps
}

// span is mapper.span.
func (d *wireDecoder) span(b wireBytes, shared trace.Attrs) (*trace.Span, error) {
	ps := d.readSpan(b)
	s := &d.spanBlock[0]
	d.spanBlock = d.spanBlock[1:]
	*s = trace.Span{Source: trace.SourceOTLP}
	if err := setSpanIdentity(s, d.bytes(ps.traceID), d.bytes(ps.spanID), d.bytes(ps.parentID), ps.start, ps.end); err != nil {
		return nil, err
	}
	name := d.str(ps.name)
	if err := d.checkString("span name", name); err != nil {
		return nil, err
	}
	s.Type = spanKindName(tracepb.Span_SpanKind(ps.kind))
	s.Error = tracepb.Status_StatusCode(ps.statusCode) == tracepb.Status_STATUS_CODE_ERROR

	if ps.ownErr != nil {
		return nil, ps.ownErr
	}
	own := ps.own
	d.own = own
	reserved := d.reserved[:0]
	defer func() { d.reserved = reserved }()
	if s.Type != "" {
		reserved = append(reserved, trace.Attr{Key: AttrSpanKind, Value: trace.String(s.Type)})
	}
	if c := tracepb.Status_StatusCode(ps.statusCode); c != tracepb.Status_STATUS_CODE_UNSET {
		reserved = append(reserved, trace.Attr{Key: AttrStatusCode, Value: trace.String(statusCodeName(c))})
	}
	if msg := d.str(ps.statusMessage); msg != "" {
		if err := d.checkString("status message", msg); err != nil {
			return nil, err
		}
		reserved = append(reserved, trace.Attr{Key: AttrStatusMessage, Value: trace.String(msg)})
	}
	if ts := d.str(ps.traceState); ts != "" {
		if err := d.checkString("trace state", ts); err != nil {
			return nil, err
		}
		reserved = append(reserved, trace.Attr{Key: AttrTraceState, Value: trace.String(ts)})
	}
	if ps.links > 0 {
		v, err := d.links(b, ps.links)
		if err != nil {
			return nil, err
		}
		reserved = append(reserved, trace.Attr{Key: AttrLinks, Value: v})
	}
	for _, dc := range [...]struct {
		key string
		n   uint32
	}{
		{AttrDroppedAttributes, ps.droppedAttrs},
		{AttrDroppedEvents, ps.droppedEvents},
		{AttrDroppedLinks, ps.droppedLinks},
	} {
		if dc.n != 0 {
			reserved = append(reserved, trace.Attr{Key: dc.key, Value: trace.Int(int64(dc.n))})
		}
	}
	reserved = append(reserved, trace.Attr{Key: AttrSourceFormat, Value: trace.String(trace.SourceOTLP)})
	s.Attrs = d.spanAttrs(own, shared, sortAttrs(reserved))

	if 1+ps.events > d.opt.Limits.MaxRecords {
		return nil, fmt.Errorf("%d events, limit %d records per span", ps.events, d.opt.Limits.MaxRecords)
	}
	root := &d.rootBlock[0]
	d.rootBlock = d.rootBlock[1:]
	*root = trace.Record{Method: name, DurationNS: s.DurationNS, Calls: 1}
	if ps.events > 0 {
		root.Children = make([]*trace.Record, 0, ps.events)
		var f wireValue
		for it, i := d.msg(b), 0; it.next(&f); {
			if !f.isBytes(11) {
				continue
			}
			rec, evName, err := d.event(f.b, s.StartNS)
			if err != nil {
				return nil, fmt.Errorf("event %d (%q): %w", i, truncate(evName, 64), err)
			}
			if rec.Exception != nil {
				root.Errors++
			}
			root.Children = append(root.Children, rec)
			i++
		}
	}
	s.Root = root
	s.FillSummary()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// event is mapper.event; it also returns the event's name.
func (d *wireDecoder) event(b wireBytes, spanStart int64) (*trace.Record, string, error) {
	var (
		t        uint64
		nameB    wireBytes
		dropped  uint32
		hasAttrs bool
		f        wireValue
	)
	for it := d.msg(b); it.next(&f); {
		switch {
		case f.isFixed64(1):
			t = f.u
		case f.isBytes(2):
			nameB = f.b
		case f.isBytes(3):
			hasAttrs = true
		case f.isVarint(4):
			dropped = uint32(f.u)
		}
	}
	name := d.str(nameB)
	if t > math.MaxInt64 {
		return nil, name, fmt.Errorf("time %d beyond the year 2262", t)
	}
	if err := d.checkString("event name", name); err != nil {
		return nil, name, err
	}
	rec := &trace.Record{Method: name}
	if t != 0 {
		rec.StartNS = int64(t) - spanStart // both in [0, MaxInt64]: no overflow
	}
	var attrs trace.Attrs
	if hasAttrs {
		for it := d.msg(b); it.next(&f); {
			if f.isBytes(3) {
				var err error
				if attrs, err = d.appendKeyValue(attrs, f.b, 1); err != nil {
					return nil, name, err
				}
			}
		}
	}
	if dropped != 0 {
		attrs = append(attrs, trace.Attr{Key: AttrDroppedAttributes, Value: trace.Int(int64(dropped))})
	}
	rec.Attrs = sortAttrs(attrs)
	if rec.Method == ExceptionEventName {
		d.exception(rec)
	}
	return rec, name, nil
}

// links is mapper.links over the n links of span b.
func (d *wireDecoder) links(b wireBytes, n int) (trace.Value, error) {
	out := make([]trace.Value, 0, n)
	var f wireValue
	for it, i := d.msg(b), 0; it.next(&f); {
		if !f.isBytes(13) {
			continue
		}
		var (
			tid, sid, ts wireBytes
			dropped      uint32
			hasAttrs     bool
			g            wireValue
		)
		for lt := d.msg(f.b); lt.next(&g); {
			switch {
			case g.isBytes(1):
				tid = g.b
			case g.isBytes(2):
				sid = g.b
			case g.isBytes(3):
				ts = g.b
			case g.isBytes(4):
				hasAttrs = true
			case g.isVarint(5):
				dropped = uint32(g.u)
			}
		}
		lm := make(trace.Attrs, 0, 5)
		lm = append(lm,
			trace.Attr{Key: LinkSpanID, Value: trace.String(hex.EncodeToString(d.bytes(sid)))},
			trace.Attr{Key: LinkTraceID, Value: trace.String(hex.EncodeToString(d.bytes(tid)))})
		if ts := d.str(ts); ts != "" {
			if err := d.checkString("link trace state", ts); err != nil {
				return trace.Value{}, fmt.Errorf("link %d: %w", i, err)
			}
			lm = append(lm, trace.Attr{Key: LinkTraceState, Value: trace.String(ts)})
		}
		if hasAttrs {
			var attrs trace.Attrs
			for lt := d.msg(f.b); lt.next(&g); {
				if g.isBytes(4) {
					var err error
					// otel.links (depth 1) → link map (2) → attributes map (3) → values (4).
					if attrs, err = d.appendKeyValue(attrs, g.b, 4); err != nil {
						return trace.Value{}, fmt.Errorf("link %d: %w", i, err)
					}
				}
			}
			lm = append(lm, trace.Attr{Key: LinkAttributes, Value: trace.MapValue(sortAttrs(attrs))})
		}
		if dropped != 0 {
			lm = append(lm, trace.Attr{Key: LinkDroppedAttributes, Value: trace.Int(int64(dropped))})
		}
		out = append(out, trace.MapValue(sortAttrs(lm)))
		i++
	}
	return trace.List(out...), nil
}

// appendKeyValue is mapper.appendAttrs for one KeyValue.
func (d *wireDecoder) appendKeyValue(dst trace.Attrs, b wireBytes, depth int) (trace.Attrs, error) {
	var (
		keyB     wireBytes
		value    msgParts
		strindex int32
		f        wireValue
	)
	for it := d.msg(b); it.next(&f); {
		switch {
		case f.isBytes(1):
			keyB = f.b
		case f.isBytes(2):
			value.add(f.b)
		case f.isVarint(3):
			strindex = int32(f.u)
		}
	}
	key := d.str(keyB)
	if key == "" && strindex != 0 {
		return nil, errors.New("attribute key_strindex is defined for profiles only")
	}
	if err := d.checkString("attribute key", key); err != nil {
		return nil, err
	}
	v, err := d.value(value, depth)
	if err != nil {
		return nil, fmt.Errorf("attribute %q: %w", truncate(key, 64), err)
	}
	return append(dst, trace.Attr{Key: key, Value: v}), nil
}

// AnyValue field numbers (its oneof members).
const (
	anyString protowire.Number = iota + 1
	anyBool
	anyInt
	anyDouble
	anyArray
	anyKvlist
	anyBytes
	anyStringStrindex
)

// value is mapper.value for the (merged) AnyValue in parts: the last oneof
// member sent wins; consecutive occurrences of the same message member
// (array_value, kvlist_value) merge.
func (d *wireDecoder) value(parts msgParts, depth int) (trace.Value, error) {
	if depth > trace.MaxValueDepth {
		return trace.Value{}, fmt.Errorf("value nested deeper than %d", trace.MaxValueDepth)
	}
	var (
		member protowire.Number // 0: none
		u      uint64
		b      wireBytes
		run    partsIter // from the first occurrence of the message member
		f      wireValue
	)
	for it := d.fields(parts); it.next(&f); {
		switch f.num {
		case anyString, anyBytes:
			if f.typ == protowire.BytesType {
				member, b = f.num, f.b
			}
		case anyBool, anyInt, anyStringStrindex:
			if f.typ == protowire.VarintType {
				member, u = f.num, f.u
			}
		case anyDouble:
			if f.typ == protowire.Fixed64Type {
				member, u = f.num, f.u
			}
		case anyArray, anyKvlist:
			if f.typ == protowire.BytesType && member != f.num {
				member = f.num
				run = it
				run.it.off = f.at
			}
		}
	}
	switch member {
	case 0:
		return trace.Null(), nil
	case anyString:
		s := d.str(b)
		if err := d.checkString("string value", s); err != nil {
			return trace.Value{}, err
		}
		return trace.String(s), nil
	case anyBool:
		return trace.Bool(u != 0), nil
	case anyInt:
		return trace.Int(int64(u)), nil
	case anyDouble:
		return trace.Float(math.Float64frombits(u)), nil // NaN and ±Inf too: Trace JSON writes them {"$float":"NaN"}
	case anyBytes:
		if n := base64.StdEncoding.EncodedLen(b.n); n > d.opt.Limits.MaxStringLen {
			return trace.Value{}, fmt.Errorf("bytes value of %d bytes encodes to %d base64 characters, limit %d", b.n, n, d.opt.Limits.MaxStringLen)
		}
		return trace.String(base64.StdEncoding.EncodeToString(d.bytes(b))), nil
	case anyStringStrindex:
		return trace.Value{}, errors.New("string_value_strindex is defined for profiles only")
	case anyArray:
		list := []trace.Value{}
		for i := 0; run.next(&f); {
			if !f.isBytes(anyArray) {
				continue
			}
			var g wireValue
			for vt := d.msg(f.b); vt.next(&g); {
				if !g.isBytes(1) {
					continue
				}
				v, err := d.value(onePart(g.b), depth+1)
				if err != nil {
					return trace.Value{}, fmt.Errorf("[%d]: %w", i, err)
				}
				list = append(list, v)
				i++
			}
		}
		return trace.List(list...), nil
	}
	// anyKvlist
	var attrs trace.Attrs
	for run.next(&f) {
		if !f.isBytes(anyKvlist) {
			continue
		}
		var g wireValue
		for vt := d.msg(f.b); vt.next(&g); {
			if g.isBytes(1) {
				var err error
				if attrs, err = d.appendKeyValue(attrs, g.b, depth+1); err != nil {
					return trace.Value{}, err
				}
			}
		}
	}
	return trace.MapValue(sortAttrs(attrs)), nil
}
