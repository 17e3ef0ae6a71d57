package queryapi

import (
	"sort"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/trace"
)

// Kind is an OTLP span kind (the OTLP enum values).
type Kind int32

// OTLP span kinds.
const (
	KindUnspecified Kind = 0
	KindInternal    Kind = 1
	KindServer      Kind = 2
	KindClient      Kind = 3
	KindProducer    Kind = 4
	KindConsumer    Kind = 5
)

// String is the lower-case name ztsd stores as Span.Type ("" unspecified).
func (k Kind) String() string {
	switch k {
	case KindInternal:
		return "internal"
	case KindServer:
		return "server"
	case KindClient:
		return "client"
	case KindProducer:
		return "producer"
	case KindConsumer:
		return "consumer"
	}
	return ""
}

// ParseKind reads a kind name ("server", "SPAN_KIND_SERVER", …).
func ParseKind(s string) (Kind, bool) {
	s = strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "SPAN_KIND_"))
	for k := KindUnspecified; k <= KindConsumer; k++ {
		if k.String() == s && s != "" {
			return k, true
		}
	}
	if s == "unspecified" {
		return KindUnspecified, true
	}
	return 0, false
}

// StatusCode is an OTLP status code.
type StatusCode int32

// OTLP status codes.
const (
	StatusUnset StatusCode = 0
	StatusOK    StatusCode = 1
	StatusError StatusCode = 2
)

// Event is a span event (a Jaeger log).
type Event struct {
	TimeNS int64
	Name   string
	Attrs  trace.Attrs
}

// Link is a span link (a Jaeger FOLLOWS_FROM reference).
type Link struct {
	TraceID    trace.TraceID
	SpanID     trace.SpanID
	TraceState string
	Attrs      trace.Attrs
}

// Span is one OTLP-shaped span of the view.
type Span struct {
	TraceID       trace.TraceID
	SpanID        trace.SpanID
	ParentID      trace.SpanID
	Name          string
	Kind          Kind
	StartNS       int64
	DurationNS    int64
	Service       string
	Resource      trace.Attrs // includes service.name
	ScopeName     string
	ScopeVersion  string
	ScopeAttrs    trace.Attrs
	Attrs         trace.Attrs
	Events        []Event
	Links         []Link
	Status        StatusCode
	StatusMessage string
	TraceState    string
	Record        bool // made from a method-call record
	Source        string
}

// Attribute names the view reads or writes.
const (
	AttrServiceName  = "service.name"
	AttrSourceFormat = "source.format"
	AttrSourceFile   = "source.file"
	AttrComponent    = "component"
	// AttrRecord marks a span made from a method-call record.
	AttrRecord = "ztsd.record"
	// AttrSpanType keeps a non-OTLP span's type (a Zorka trace type).
	AttrSpanType = "ztsd.span.type"
)

// resourcePrefixes are the OpenTelemetry semantic-convention resource
// namespaces: an OTLP span's attributes under them go back to the resource.
var resourcePrefixes = []string{"service.", "host.", "os.", "process.", "telemetry.", "container.",
	"k8s.", "cloud.", "deployment.", "device.", "faas.", "webengine.", "otel.resource."}

// IsResourceKey reports whether key names a resource attribute.
func IsResourceKey(key string) bool {
	for _, p := range resourcePrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// OperationOf is the span's operation: its root record's method (the OTLP
// span name); a span without a root record is named after its type.
func OperationOf(sp *trace.Span) string {
	if sp.Root != nil {
		return sp.Root.Method
	}
	return sp.Type
}

// recordID derives the id of the n-th (n ≥ 1, depth-first) record-span of
// span id: splitmix64, a bijection, so ids within one span never collide.
func recordID(span trace.SpanID, n int) trace.SpanID {
	z := uint64(span) + uint64(n)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	if z == 0 || z == uint64(span) {
		z = ^z
	}
	return trace.SpanID(z)
}

// IsEvent reports whether a record shows as an event rather than a span.
func IsEvent(r *trace.Record) bool { return r.DurationNS == 0 && len(r.Children) == 0 }

// Expand calls fn with the view of sp (first) and then of each of its
// record-spans, depth first. Each view is fn's only for the call: Expand
// builds the next one after fn returns, so at most one record-span view
// is held at a time.
func Expand(sp *trace.Span, fn func(*Span) error) error {
	v := baseView(sp)
	if sp.Root != nil {
		for _, a := range sp.Root.Attrs {
			if _, ok := v.Attrs.Get(a.Key); !ok {
				v.Attrs.Set(a.Key, a.Value)
			}
		}
		if sp.Root.Exception != nil {
			v.Events = append(v.Events, exceptionEvent(sp.StartNS+sp.Root.StartNS+sp.Root.DurationNS, "exception", nil, sp.Root.Exception))
		}
		v.Events = appendEvents(v.Events, sp.StartNS, sp.Root.Children)
	}
	if err := fn(&v); err != nil {
		return err
	}
	if sp.Root == nil {
		return nil
	}
	n := 0
	return expandRecords(sp, &v, sp.Root, &n, fn)
}

func expandRecords(sp *trace.Span, parent *Span, r *trace.Record, n *int, fn func(*Span) error) error {
	parentID := parent.SpanID
	for _, c := range r.Children {
		if IsEvent(c) {
			continue
		}
		*n++
		rv := Span{TraceID: sp.TraceID, SpanID: recordID(sp.SpanID, *n), ParentID: parentID, Name: c.Method,
			Kind: KindInternal, StartNS: sp.StartNS + c.StartNS, DurationNS: c.DurationNS,
			Service: parent.Service, Resource: parent.Resource, ScopeName: parent.ScopeName,
			ScopeVersion: parent.ScopeVersion, ScopeAttrs: parent.ScopeAttrs, Record: true, Source: sp.Source}
		rv.Attrs = make(trace.Attrs, 0, len(c.Attrs)+1)
		rv.Attrs = append(rv.Attrs, c.Attrs...)
		rv.Attrs.Set(AttrRecord, trace.Bool(true))
		if c.Exception != nil {
			rv.Status = StatusError
			rv.Events = append(rv.Events, exceptionEvent(rv.StartNS+c.DurationNS, "exception", nil, c.Exception))
		}
		rv.Events = appendEvents(rv.Events, sp.StartNS, c.Children)
		if err := fn(&rv); err != nil {
			return err
		}
		if err := expandRecords(sp, &rv, c, n, fn); err != nil {
			return err
		}
	}
	return nil
}

func appendEvents(dst []Event, spanStart int64, recs []*trace.Record) []Event {
	for _, c := range recs {
		if !IsEvent(c) {
			continue
		}
		t := spanStart + c.StartNS
		if c.Exception != nil {
			dst = append(dst, exceptionEvent(t, c.Method, c.Attrs, c.Exception))
			continue
		}
		dst = append(dst, Event{TimeNS: t, Name: c.Method, Attrs: c.Attrs})
	}
	return dst
}

func exceptionEvent(t int64, name string, attrs trace.Attrs, x *trace.Exception) Event {
	a := make(trace.Attrs, 0, len(attrs)+3)
	a = append(a, attrs...)
	if x.Class != "" {
		a.Set("exception.type", trace.String(x.Class))
	}
	if x.Message != "" {
		a.Set("exception.message", trace.String(x.Message))
	}
	if st := RenderStack(x); st != "" {
		a.Set("exception.stacktrace", trace.String(st))
	}
	return Event{TimeNS: t, Name: name, Attrs: a}
}

// RenderStack renders an exception with frames Java-style ("Class: msg",
// "\tat c.m(File:line)", "Caused by: …"); "" when it has no frames.
func RenderStack(x *trace.Exception) string {
	if len(x.Stack) == 0 {
		return ""
	}
	var b strings.Builder
	for depth := 0; x != nil && depth < trace.MaxDepth; depth++ {
		if depth > 0 {
			b.WriteString("Caused by: ")
		}
		b.WriteString(x.Class)
		if x.Message != "" {
			b.WriteString(": ")
			b.WriteString(x.Message)
		}
		b.WriteByte('\n')
		for _, f := range x.Stack {
			b.WriteString("\tat ")
			if f.Class != "" {
				b.WriteString(f.Class)
				b.WriteByte('.')
			}
			b.WriteString(f.Method)
			b.WriteByte('(')
			b.WriteString(f.File)
			if f.Line > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.FormatInt(f.Line, 10))
			}
			b.WriteString(")\n")
		}
		x = x.Cause
	}
	return b.String()
}

// baseView maps the span's own fields and attributes.
func baseView(sp *trace.Span) Span {
	v := Span{TraceID: sp.TraceID, SpanID: sp.SpanID, ParentID: sp.ParentID, Name: OperationOf(sp),
		StartNS: sp.StartNS, DurationNS: sp.DurationNS, Service: ServiceOf(sp), Source: sp.Source}
	otlp := sp.Source == trace.SourceOTLP
	if otlp {
		v.Kind, _ = ParseKind(sp.Type)
	}
	v.Attrs = make(trace.Attrs, 0, len(sp.Attrs))
	for _, a := range sp.Attrs {
		switch {
		case a.Key == AttrServiceName:
			continue
		case otlp && IsResourceKey(a.Key):
			if a.Key != "otel.resource.schema_url" && a.Key != "otel.resource.dropped_attributes_count" {
				v.Resource = append(v.Resource, a)
			}
			continue
		}
		if otlp {
			switch a.Key {
			case AttrSourceFormat, "otel.span.kind", "otel.scope.schema_url", "otel.scope.dropped_attributes_count",
				"otel.dropped_attributes_count", "otel.dropped_events_count", "otel.dropped_links_count":
				continue
			case "otel.scope.name":
				v.ScopeName = a.Value.Text()
				continue
			case "otel.scope.version":
				v.ScopeVersion = a.Value.Text()
				continue
			case "otel.scope.attributes":
				if a.Value.Kind == trace.KindMap {
					v.ScopeAttrs = a.Value.Map
				}
				continue
			case "otel.status.code":
				switch a.Value.Text() {
				case "ok":
					v.Status = StatusOK
				case "error":
					v.Status = StatusError
				}
				continue
			case "otel.status.message":
				v.StatusMessage = a.Value.Text()
				continue
			case "otel.trace_state":
				v.TraceState = a.Value.Text()
				continue
			case "otel.links":
				v.Links = linksOf(a.Value)
				continue
			}
		}
		v.Attrs = append(v.Attrs, a)
	}
	if !otlp {
		if sp.Type != "" {
			v.Attrs.Set(AttrSpanType, trace.String(sp.Type))
		}
		if sp.Error {
			v.Status = StatusError
		}
	} else if sp.Error && v.Status == StatusUnset {
		v.Status = StatusError
	}
	v.Resource = append(trace.Attrs{{Key: AttrServiceName, Value: trace.String(v.Service)}}, v.Resource...)
	sort.SliceStable(v.Resource[1:], func(i, j int) bool { return v.Resource[1+i].Key < v.Resource[1+j].Key })
	return v
}

func linksOf(v trace.Value) []Link {
	if v.Kind != trace.KindList {
		return nil
	}
	var out []Link
	for _, e := range v.List {
		if e.Kind != trace.KindMap {
			continue
		}
		var l Link
		if t, ok := e.Map.Get("trace_id"); ok {
			l.TraceID, _ = trace.ParseTraceID(t.Text())
		}
		if s, ok := e.Map.Get("span_id"); ok {
			l.SpanID, _ = trace.ParseSpanID(s.Text())
		}
		if s, ok := e.Map.Get("trace_state"); ok {
			l.TraceState = s.Text()
		}
		if a, ok := e.Map.Get("attributes"); ok && a.Kind == trace.KindMap {
			l.Attrs = a.Map
		}
		out = append(out, l)
	}
	return out
}
