package trace

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file owns deep equality: one walk (diff*) serves Span, Record,
// Exception, Attrs and Value Equal, and Diff, which names the first
// difference for test failures. Floats compare with NaN equal to NaN
// (scalarEqual in value.go); nil and empty slices are equal; child spans are
// compared.

// Equal reports whether s and o hold the same span, including root record
// tree and child spans. Two nil spans are equal.
func (s *Span) Equal(o *Span) bool { return diffSpan(s, o) == nil }

// Equal reports whether r and o are the same record tree.
func (r *Record) Equal(o *Record) bool { return diffRecord(r, o, 1) == nil }

// Equal reports whether e and o are the same exception, cause chain included.
func (e *Exception) Equal(o *Exception) bool { return diffException(e, o) == nil }

// Diff describes the first difference between a and b as a path in Trace
// JSON field names followed by both values, for example
// `root.children[2].attrs["x"]: int 5 != int 6`; it returns "" when
// a.Equal(b).
func Diff(a, b *Span) string {
	d := diffSpan(a, b)
	if d == nil {
		return ""
	}
	slices.Reverse(d.path)
	p := strings.Join(d.path, "")
	p = strings.TrimPrefix(p, ".")
	if p == "" {
		return d.what
	}
	return p + ": " + d.what
}

// difference is the first difference found; path segments are collected
// innermost first, as the recursion unwinds.
type difference struct {
	path []string
	what string
}

func (d *difference) at(seg string) *difference {
	if d != nil {
		d.path = append(d.path, seg)
	}
	return d
}

func differ(format string, args ...any) *difference {
	return &difference{what: fmt.Sprintf(format, args...)}
}

func diffField(name string) string { return "." + name }
func diffIndex(i int) string       { return "[" + strconv.Itoa(i) + "]" }
func diffKey(k string) string      { return "[" + strconv.Quote(k) + "]" }

func diffSpan(a, b *Span) *difference {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return differ("%s != %s", nilOr(a == nil, "span"), nilOr(b == nil, "span"))
	}
	switch {
	case a.TraceID != b.TraceID:
		return differ("%s != %s", a.TraceID, b.TraceID).at(diffField("trace_id"))
	case a.SpanID != b.SpanID:
		return differ("%q != %q", a.SpanID, b.SpanID).at(diffField("span_id"))
	case a.ParentID != b.ParentID:
		return differ("%q != %q", a.ParentID, b.ParentID).at(diffField("parent_id"))
	case a.Type != b.Type:
		return differ("%q != %q", a.Type, b.Type).at(diffField("type"))
	}
	if d := diffCounts([...]int64{a.StartNS, a.DurationNS, a.Calls, a.Errors},
		[...]int64{b.StartNS, b.DurationNS, b.Calls, b.Errors}); d != nil {
		return d
	}
	switch {
	case a.Recs != b.Recs:
		return differ("%d != %d", a.Recs, b.Recs).at(diffField("recs"))
	case a.Error != b.Error:
		return differ("%t != %t", a.Error, b.Error).at(diffField("error"))
	case a.Source != b.Source:
		return differ("%q != %q", a.Source, b.Source).at(diffField("source"))
	case a.ChunkNum != b.ChunkNum:
		return differ("%d != %d", a.ChunkNum, b.ChunkNum).at(diffField("chunk_num"))
	}
	if d := diffAttrs(a.Attrs, b.Attrs); d != nil {
		return d.at(diffField("attrs"))
	}
	if d := diffRecord(a.Root, b.Root, 1); d != nil {
		return d.at(diffField("root"))
	}
	if len(a.Children) != len(b.Children) {
		return differ("%d child spans != %d", len(a.Children), len(b.Children)).at(diffField("spans"))
	}
	for i := range a.Children {
		if d := diffSpan(a.Children[i], b.Children[i]); d != nil {
			return d.at(diffIndex(i)).at(diffField("spans"))
		}
	}
	return nil
}

func diffRecord(a, b *Record, depth int) *difference {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return differ("%s != %s", nilOr(a == nil, "record"), nilOr(b == nil, "record"))
	}
	if recordTooDeep(depth) {
		return differ(msgRecordTooDeep, MaxDepth)
	}
	switch {
	case a.Method != b.Method:
		return differ("%q != %q", a.Method, b.Method).at(diffField("method"))
	}
	if d := diffCounts([...]int64{a.StartNS, a.DurationNS, a.Calls, a.Errors},
		[...]int64{b.StartNS, b.DurationNS, b.Calls, b.Errors}); d != nil {
		return d
	}
	switch {
	case a.Open != b.Open:
		return differ("%t != %t", a.Open, b.Open).at(diffField("open"))
	}
	if d := diffAttrs(a.Attrs, b.Attrs); d != nil {
		return d.at(diffField("attrs"))
	}
	if d := diffException(a.Exception, b.Exception); d != nil {
		return d.at(diffField("exception"))
	}
	if len(a.Children) != len(b.Children) {
		return differ("%d children != %d", len(a.Children), len(b.Children)).at(diffField("children"))
	}
	for i := range a.Children {
		if d := diffRecord(a.Children[i], b.Children[i], depth+1); d != nil {
			return d.at(diffIndex(i)).at(diffField("children"))
		}
	}
	return nil
}

// countFields names the times and counts spans and records both have, in
// the order Trace JSON writes them.
var countFields = [...]string{"start_ns", "duration_ns", "calls", "errors"}

// diffCounts compares a span's or record's countFields values.
func diffCounts(a, b [len(countFields)]int64) *difference {
	for i := range a {
		if a[i] != b[i] {
			return differ("%d != %d", a[i], b[i]).at(diffField(countFields[i]))
		}
	}
	return nil
}

func diffException(a, b *Exception) *difference {
	// Iterative over the cause chain; segs collects ".cause" per level.
	var segs []string
	wrap := func(d *difference) *difference {
		for i := len(segs) - 1; i >= 0; i-- {
			d = d.at(segs[i])
		}
		return d
	}
	for {
		if a == nil || b == nil {
			if a == b {
				return nil
			}
			return wrap(differ("%s != %s", nilOr(a == nil, "exception"), nilOr(b == nil, "exception")))
		}
		switch {
		case a.Class != b.Class:
			return wrap(differ("%q != %q", a.Class, b.Class).at(diffField("class")))
		case a.Message != b.Message:
			return wrap(differ("%q != %q", a.Message, b.Message).at(diffField("message")))
		case len(a.Stack) != len(b.Stack):
			return wrap(differ("%d frames != %d", len(a.Stack), len(b.Stack)).at(diffField("stack")))
		}
		for i := range a.Stack {
			if a.Stack[i] != b.Stack[i] {
				return wrap(differ("%+v != %+v", a.Stack[i], b.Stack[i]).at(diffIndex(i)).at(diffField("stack")))
			}
		}
		if len(segs) > MaxDepth {
			return wrap(differ("cause chain longer than %d", MaxDepth))
		}
		segs = append(segs, diffField("cause"))
		a, b = a.Cause, b.Cause
	}
}

func diffAttrs(a, b Attrs) *difference {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i].Key != b[i].Key {
			return differ("key %q != %q", a[i].Key, b[i].Key).at(diffIndex(i))
		}
		if d := diffValue(a[i].Value, b[i].Value); d != nil {
			return d.at(diffKey(a[i].Key))
		}
	}
	switch {
	case len(a) > len(b):
		return differ("%d entries != %d (first extra key %q)", len(a), len(b), a[len(b)].Key)
	case len(a) < len(b):
		return differ("%d entries != %d (first missing key %q)", len(a), len(b), b[len(a)].Key)
	}
	return nil
}

func diffValue(a, b Value) *difference {
	if a.Kind != b.Kind {
		return differ("%s != %s", describeValue(a), describeValue(b))
	}
	switch a.Kind {
	case KindList:
		for i := 0; i < len(a.List) && i < len(b.List); i++ {
			if d := diffValue(a.List[i], b.List[i]); d != nil {
				return d.at(diffIndex(i))
			}
		}
		if len(a.List) != len(b.List) {
			return differ("list of %d != list of %d", len(a.List), len(b.List))
		}
		return nil
	case KindMap:
		return diffAttrs(a.Map, b.Map)
	}
	if !scalarEqual(&a, &b) {
		return differ("%s != %s", describeValue(a), describeValue(b))
	}
	return nil
}

func describeValue(v Value) string {
	switch v.Kind {
	case KindString:
		return "string " + strconv.Quote(v.Str)
	case KindList:
		return fmt.Sprintf("list of %d", len(v.List))
	case KindMap:
		return fmt.Sprintf("map of %d", len(v.Map))
	case KindFloat:
		return "float " + strconv.FormatFloat(v.Float, 'g', -1, 64)
	}
	return v.Kind.String() + " " + v.Text()
}

func nilOr(isNil bool, what string) string {
	if isNil {
		return "nil"
	}
	return what
}
