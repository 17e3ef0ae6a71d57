package jaegerapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/trace"
)

// traceIDString is Jaeger's spelling: 16 hex digits when the high half is
// zero, else 32.
func traceIDString(id trace.TraceID) string {
	s := id.String()
	if s[:16] == "0000000000000000" {
		return s[16:]
	}
	return s
}

func spanIDString(id trace.SpanID) string { return fmt.Sprintf("%016x", uint64(id)) }

// process is a Jaeger process: a service and the resource's other
// attributes.
type process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []keyValue `json:"tags"`
}

type keyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type,omitempty"`
	Value any    `json:"value"`
}

type reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type logEntry struct {
	Timestamp int64      `json:"timestamp"`
	Fields    []keyValue `json:"fields"`
}

type span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	Flags         uint32      `json:"flags,omitempty"`
	OperationName string      `json:"operationName"`
	References    []reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []keyValue  `json:"tags"`
	Logs          []logEntry  `json:"logs"`
	ProcessID     string      `json:"processID"`
	Warnings      []string    `json:"warnings"`
}

// tag converts an attribute as Jaeger's OTLP translator does: strings,
// ints, bools and doubles keep their type; lists and maps become their
// JSON text.
func tag(a trace.Attr) keyValue {
	v := a.Value
	switch v.Kind {
	case trace.KindString:
		return keyValue{a.Key, "string", v.Str}
	case trace.KindInt:
		return keyValue{a.Key, "int64", v.Int}
	case trace.KindBool:
		return keyValue{a.Key, "bool", v.Bool}
	case trace.KindFloat:
		if name, ok := trace.NonFiniteName(v.Float); ok { // "NaN", "Infinity", "-Infinity", as everywhere
			return keyValue{a.Key, "string", name}
		}
		return keyValue{a.Key, "float64", v.Float}
	case trace.KindList, trace.KindMap:
		return keyValue{a.Key, "string", string(valueJSON(v, 1))}
	}
	return keyValue{a.Key, "string", ""}
}

// valueJSON renders a list or map as plain JSON (as pcommon.Value.AsString).
func valueJSON(v trace.Value, depth int) []byte {
	var b []byte
	switch v.Kind {
	case trace.KindString:
		return queryapi.AppendJSONString(nil, v.Str)
	case trace.KindInt:
		return strconv.AppendInt(nil, v.Int, 10)
	case trace.KindBool:
		return strconv.AppendBool(nil, v.Bool)
	case trace.KindFloat:
		if name, ok := trace.NonFiniteName(v.Float); ok {
			return queryapi.AppendJSONString(nil, name)
		}
		return strconv.AppendFloat(nil, v.Float, 'g', -1, 64)
	case trace.KindList:
		b = append(b, '[')
		for i, e := range v.List {
			if i > 0 {
				b = append(b, ',')
			}
			if depth < trace.MaxDepth {
				b = append(b, valueJSON(e, depth+1)...)
			}
		}
		return append(b, ']')
	case trace.KindMap:
		b = append(b, '{')
		for i, e := range v.Map {
			if i > 0 {
				b = append(b, ',')
			}
			b = queryapi.AppendJSONString(b, e.Key)
			b = append(b, ':')
			if depth < trace.MaxDepth {
				b = append(b, valueJSON(e.Value, depth+1)...)
			}
		}
		return append(b, '}')
	}
	return []byte("null")
}

// toJaeger converts one view span; pid is its process id.
func toJaeger(v *queryapi.Span, pid string) *span {
	s := &span{TraceID: traceIDString(v.TraceID), SpanID: spanIDString(v.SpanID), OperationName: v.Name,
		References: []reference{}, StartTime: v.StartNS / 1000, Duration: v.DurationNS / 1000,
		Tags: make([]keyValue, 0, len(v.Attrs)+6), Logs: []logEntry{}, ProcessID: pid}
	if v.ParentID != 0 {
		s.References = append(s.References, reference{"CHILD_OF", s.TraceID, spanIDString(v.ParentID)})
	}
	for _, l := range v.Links {
		s.References = append(s.References, reference{"FOLLOWS_FROM", traceIDString(l.TraceID), spanIDString(l.SpanID)})
	}
	if v.ScopeName != "" {
		s.Tags = append(s.Tags, keyValue{"otel.scope.name", "string", v.ScopeName})
	}
	if v.ScopeVersion != "" {
		s.Tags = append(s.Tags, keyValue{"otel.scope.version", "string", v.ScopeVersion})
	}
	for _, a := range v.Attrs {
		s.Tags = append(s.Tags, tag(a))
	}
	if k := v.Kind.String(); k != "" {
		s.Tags = append(s.Tags, keyValue{"span.kind", "string", k})
	}
	switch v.Status {
	case queryapi.StatusOK:
		s.Tags = append(s.Tags, keyValue{"otel.status_code", "string", "OK"})
	case queryapi.StatusError:
		s.Tags = append(s.Tags, keyValue{"otel.status_code", "string", "ERROR"}, keyValue{"error", "bool", true})
	}
	if v.StatusMessage != "" {
		s.Tags = append(s.Tags, keyValue{"otel.status_description", "string", v.StatusMessage})
	}
	if v.TraceState != "" {
		s.Tags = append(s.Tags, keyValue{"w3c.tracestate", "string", v.TraceState})
	}
	for _, e := range v.Events {
		le := logEntry{Timestamp: e.TimeNS / 1000, Fields: make([]keyValue, 0, len(e.Attrs)+1)}
		if e.Name != "" {
			le.Fields = append(le.Fields, keyValue{"event", "string", e.Name})
		}
		for _, a := range e.Attrs {
			le.Fields = append(le.Fields, tag(a))
		}
		s.Logs = append(s.Logs, le)
	}
	return s
}

// processes assigns Jaeger process ids (p1, p2, …) to distinct resources.
type processes struct {
	ids  map[string]string
	list []process
}

func (p *processes) id(v *queryapi.Span) string {
	key := string(queryapi.AppendAttrsJSON(nil, v.Resource))
	if id, ok := p.ids[key]; ok {
		return id
	}
	pr := process{ServiceName: v.Service, Tags: make([]keyValue, 0, len(v.Resource))}
	for _, a := range v.Resource {
		if a.Key != queryapi.AttrServiceName {
			pr.Tags = append(pr.Tags, tag(a))
		}
	}
	p.list = append(p.list, pr)
	id := "p" + strconv.Itoa(len(p.list))
	p.ids[key] = id
	return id
}

// writeTrace writes one Jaeger trace object, one span at a time.
func writeTrace(w *bufio.Writer, id trace.TraceID, spans []*trace.Span) error {
	procs := &processes{ids: map[string]string{}}
	w.WriteString(`{"traceID":"`)
	w.WriteString(traceIDString(id))
	w.WriteString(`","spans":[`)
	first := true
	enc := json.NewEncoder(w)
	for _, sp := range spans {
		err := queryapi.Expand(sp, func(v *queryapi.Span) error {
			if !first {
				w.WriteByte(',')
			}
			first = false
			return enc.Encode(toJaeger(v, procs.id(v)))
		})
		if err != nil {
			return err
		}
	}
	w.WriteString(`],"processes":{`)
	for i, p := range procs.list {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, `"p%d":`, i+1)
		if err := enc.Encode(p); err != nil {
			return err
		}
	}
	_, err := w.WriteString(`},"warnings":null}`)
	return err
}
