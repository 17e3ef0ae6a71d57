package export

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"

	"github.com/ztsd/ztsd/trace"
)

// Reserved args keys (package doc, "Chrome Trace Event format").
const (
	argException = "ztsd.exception"
	argCalls     = "ztsd.calls"
	argOpen      = "ztsd.open"
	argSpan      = "ztsd.span"
)

// Chrome writes traces in the Chrome Trace Event format (package doc).
// Each element of traces is one trace: its root spans, with child spans in
// Span.Children, as client.Get returns them. The whole output is laid out
// in memory before it is written; nothing is written when the input is
// rejected.
func Chrome(w io.Writer, traces [][]*trace.Span) error {
	procs := chromeProcesses(traces)
	lay, err := newLayout(traces, func(i int) int32 { return procs.ofTrace[i] })
	if err != nil {
		return fmt.Errorf("chrome export: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	b := make([]byte, 0, 4096)
	b = append(b, "{\"traceEvents\":[\n"...)
	first := true
	emit := func() error {
		_, err := bw.Write(b)
		b = b[:0]
		return err
	}
	sep := func() {
		if !first {
			b = append(b, ",\n"...)
		}
		first = false
	}

	// Metadata: process names and order, thread (lane) names and order.
	tid := make([]int, len(lay.lanes))
	for pid := range procs.names {
		sep()
		b = appendMeta(b, "process_name", pid+1, 0, procs.names[pid])
		sep()
		b = appendMetaInt(b, "process_sort_index", pid+1, 0, pid+1)
		for n, ln := range lay.laneOrder(int32(pid)) {
			tid[ln] = n + 1
			sep()
			b = appendMeta(b, "thread_name", pid+1, n+1, lay.laneName(ln))
			sep()
			b = appendMetaInt(b, "thread_sort_index", pid+1, n+1, n+1)
		}
		if err := emit(); err != nil {
			return fmt.Errorf("chrome export: %w", err)
		}
	}

	// One X event per item, in input (depth-first) order.
	var records int64
	for i := range lay.items {
		it := &lay.items[i]
		sp := lay.spans[it.span].span
		sep()
		if b, err = appendChromeEvent(b, it, int(lay.spans[it.span].group)+1, tid[it.lane], sp, int32(i) == lay.spans[it.span].root); err != nil {
			return fmt.Errorf("chrome export: trace %s span %s: %w", sp.TraceID, sp.SpanID, err)
		}
		if it.rec != nil {
			records++
		}
		if len(b) >= 32<<10 {
			if err := emit(); err != nil {
				return fmt.Errorf("chrome export: %w", err)
			}
		}
	}
	b = append(b, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"exporter\":\"ztsd\",\"traces\":"...)
	b = strconv.AppendInt(b, int64(len(traces)), 10)
	b = append(b, `,"spans":`...)
	b = strconv.AppendInt(b, int64(len(lay.spans)), 10)
	b = append(b, `,"records":`...)
	b = strconv.AppendInt(b, records, 10)
	b = append(b, "}}\n"...)
	if err := emit(); err != nil {
		return fmt.Errorf("chrome export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("chrome export: %w", err)
	}
	return nil
}

// processes groups traces into Chrome processes: one per source file,
// else one per trace.
type processes struct {
	names   []string
	ofTrace []int32
	byKey   map[string]int32
}

func chromeProcesses(traces [][]*trace.Span) *processes {
	p := &processes{byKey: make(map[string]int32), ofTrace: make([]int32, len(traces))}
	for i, roots := range traces {
		var root *trace.Span
		for _, r := range roots {
			if r != nil {
				root = r
				break
			}
		}
		key, name := "", ""
		if root != nil {
			format, file := "", ""
			if v, ok := root.Attrs.Get("source.file"); ok {
				file = scalarText(v)
			}
			if v, ok := root.Attrs.Get("source.format"); ok {
				format = scalarText(v)
			}
			if format == "" {
				format = root.Source
			}
			if v, ok := root.Attrs.Get("atf.pid"); ok && scalarText(v) != "" {
				// ATF names one file per thread; the process is the pid.
				file = "pid_" + scalarText(v)
				if s, ok := root.Attrs.Get("atf.session"); ok && scalarText(s) != "" {
					file = scalarText(s) + "/" + file
				}
			}
			if file != "" {
				key = "file\x00" + format + "\x00" + file
				name = file
				if format != "" {
					name += " (" + format + ")"
				}
			} else {
				key = "trace\x00" + root.TraceID.String()
				name = "trace " + root.TraceID.String()
				if root.Source != "" {
					name += " (" + root.Source + ")"
				}
			}
		} else {
			key = "empty\x00" + strconv.Itoa(i)
			name = "empty trace"
		}
		pid, ok := p.byKey[key]
		if !ok {
			pid = int32(len(p.names))
			p.byKey[key] = pid
			p.names = append(p.names, name)
		}
		p.ofTrace[i] = pid
	}
	return p
}

func appendMetaHead(b []byte, name string, pid, tid int) []byte {
	b = append(b, `{"name":"`...)
	b = append(b, name...)
	b = append(b, `","ph":"M","pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	return append(b, `,"args":{`...)
}

func appendMeta(b []byte, name string, pid, tid int, value string) []byte {
	b = appendMetaHead(b, name, pid, tid)
	b = append(b, `"name":`...)
	b = appendJSONString(b, value)
	return append(b, "}}"...)
}

func appendMetaInt(b []byte, name string, pid, tid int, v int) []byte {
	b = appendMetaHead(b, name, pid, tid)
	b = append(b, `"sort_index":`...)
	b = strconv.AppendInt(b, int64(v), 10)
	return append(b, "}}"...)
}

// appendChromeEvent appends the X event of one item.
func appendChromeEvent(b []byte, it *item, pid, tid int, sp *trace.Span, spanRoot bool) ([]byte, error) {
	rec := it.rec
	name := sp.Type
	if rec != nil {
		name = rec.Method
	}
	if name == "" {
		name = "(unnamed)"
	}
	b = append(b, `{"name":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"cat":"`...)
	if sp.Source == "" {
		b = append(b, "ztsd"...)
	} else {
		b = appendJSONStringBody(b, sp.Source)
	}
	if sp.Type != "" {
		b = append(b, ',')
		b = appendJSONStringBody(b, sp.Type)
	}
	b = append(b, `","ph":"X","ts":`...)
	b = appendMicros(b, it.start)
	b = append(b, `,"dur":`...)
	b = appendMicros(b, durSat(it.start, it.end))
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	if rec != nil && rec.Exception != nil {
		b = append(b, `,"cname":"terrible"`...)
	}
	b = append(b, `,"args":{`...)

	// The reserved entries this event carries, in the order written.
	var reservedBuf [4]string
	reserved := reservedBuf[:0]
	var attrs trace.Attrs
	if rec != nil {
		attrs = rec.Attrs
		if rec.Exception != nil {
			reserved = append(reserved, argException)
		}
		if rec.Calls > 1 {
			reserved = append(reserved, argCalls)
		}
		if rec.Open {
			reserved = append(reserved, argOpen)
		}
	}
	if spanRoot {
		reserved = append(reserved, argSpan)
	}
	b, comma, err := appendAttrsJSON(b, attrs, false, reserved)
	if err != nil {
		return b, err
	}
	for _, key := range reserved {
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":`...)
		switch key {
		case argException:
			b = appendExceptionJSON(b, rec.Exception)
		case argCalls:
			b = strconv.AppendInt(b, rec.Calls, 10)
		case argOpen:
			b = append(b, "true"...)
		case argSpan:
			if b, err = appendSpanArgs(b, sp); err != nil {
				return b, err
			}
		}
	}
	return append(b, "}}"...), nil
}

// appendSpanArgs appends the "ztsd.span" object of a span's root event.
func appendSpanArgs(b []byte, sp *trace.Span) ([]byte, error) {
	b = append(b, `{"trace_id":"`...)
	b = hex.AppendEncode(b, sp.TraceID[:])
	b = append(b, `","span_id":"`...)
	b = appendSpanID(b, sp.SpanID)
	b = append(b, `","parent_id":"`...)
	b = appendSpanID(b, sp.ParentID)
	b = append(b, `","type":`...)
	b = appendJSONString(b, sp.Type)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, sp.Source)
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, sp.StartNS, 10)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, sp.DurationNS, 10)
	b = append(b, `,"calls":`...)
	b = strconv.AppendInt(b, sp.Calls, 10)
	b = append(b, `,"errors":`...)
	b = strconv.AppendInt(b, sp.Errors, 10)
	b = append(b, `,"recs":`...)
	b = strconv.AppendInt(b, sp.Recs, 10)
	b = append(b, `,"error":`...)
	b = strconv.AppendBool(b, sp.Error)
	if len(sp.Attrs) > 0 {
		b = append(b, `,"attrs":{`...)
		var err error
		if b, _, err = appendAttrsJSON(b, sp.Attrs, false, nil); err != nil {
			return b, fmt.Errorf("span %w", err)
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendSpanID appends id as trace.SpanID.String does: 16 hex digits, or
// nothing for zero.
func appendSpanID(b []byte, id trace.SpanID) []byte {
	if id == 0 {
		return b
	}
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[uint64(id)>>uint(shift)&0xf])
	}
	return b
}
