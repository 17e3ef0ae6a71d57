package wtf

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// Span types.
const (
	spanTypeScope    = "wtf.scope"
	spanTypeInstance = "wtf.instance"
)

// maxScopeDepth bounds scope nesting so that a scope's zero-length child
// records stay within trace.MaxDepth.
const maxScopeDepth = trace.MaxDepth - 1

// stats accounts for every stored event and holds the summary details.
type stats struct {
	scopes          int64
	leaves          int64
	unmatchedLeaves int64
	appends         int64
	instances       int64
	orphanAppends   int64
	unclosed        int64
	dropped         int64
	maxDepth        int
	frames          int64
	marks           int64
	timeRanges      int64
	traces          int64
	records         int64
	perZone         map[string]map[string]int64
	perName         map[string]int64
}

// identity is what trace ids are derived from.
type identity struct {
	file string
	size int64
}

func (id identity) traceID(z *zone, ordinal int) trace.TraceID {
	buf := make([]byte, 0, 64+len(id.file)+len(z.name))
	buf = append(buf, "wtf\x00"...)
	buf = append(buf, id.file...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(id.size))
	buf = binary.BigEndian.AppendUint64(buf, uint64(z.index))
	buf = append(buf, z.name...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(ordinal))
	sum := sha256.Sum256(buf)
	var tid trace.TraceID
	copy(tid[:], sum[:])
	return tid
}

func spanID(tid trace.TraceID) trace.SpanID {
	var buf [len(tid) + 4]byte
	copy(buf[:], tid[:])
	copy(buf[len(tid):], "span")
	sum := sha256.Sum256(buf[:])
	sid := trace.SpanID(binary.BigEndian.Uint64(sum[:8]))
	if sid == 0 {
		sid = 1
	}
	return sid
}

// prepare sorts each zone's events by time (stably: equal times keep their
// file order), counts each scope's child records (so that children slices
// are allocated once, at their size) and enforces the scope depth limit
// before anything is emitted: with KeepGoing the zone is cut before the
// scope that is too deep (WTF's loader also stops processing the zone),
// otherwise it is an error.
func (l *loader) prepare(opts ingest.Options, st *stats) error {
	var stack []int32
	for _, z := range l.zones {
		sortEvents(z.events)
		z.children = make([]int32, len(z.events))
		stack = stack[:0]
	events:
		for i, e := range z.events {
			t := l.types[e.typ]
			switch classify(t, len(stack)) {
			case kindScope:
				if len(stack) >= maxScopeDepth {
					err := errf(ErrLimit, "zone %q: scopes nested deeper than %d at %d µs", z.displayName(), maxScopeDepth, e.time)
					if !opts.KeepGoing {
						return &DecodeError{Encoding: l.enc.String(), Chunk: -1, Part: -1, Offset: -1, Entry: -1, Err: err}
					}
					l.warn.add("depth", err.Error()+"; the rest of the zone is dropped")
					st.dropped += int64(len(z.events) - i)
					z.events = z.events[:i]
					z.children = z.children[:i]
					break events
				}
				if len(stack) > 0 {
					z.children[stack[len(stack)-1]]++
				}
				stack = append(stack, int32(i))
			case kindLeave:
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			case kindInstance:
				if len(stack) > 0 {
					z.children[stack[len(stack)-1]]++
				}
			}
		}
	}
	return nil
}

// eventKind is what an event does to the record tree.
type eventKind uint8

const (
	kindScope    eventKind = iota // opens a record
	kindLeave                     // closes the innermost record
	kindAppend                    // adds attributes to the innermost record
	kindInstance                  // a zero-length record
)

// classify tells what an event of type t does when depth scopes are open.
// Append-data events outside any scope are kept as instance records.
func classify(t *eventType, depth int) eventKind {
	switch {
	case t.isScope():
		return kindScope
	case t.builtin == bScopeLeave:
		return kindLeave
	case t.appendsScopeData() && depth > 0:
		return kindAppend
	}
	return kindInstance
}

// sortEvents sorts by time, stably. WTF files are long sorted stretches
// into which batches of earlier events were appended (Chrome's timeline
// events arrive late; definitions come first with late times). Each such
// batch is merged back into the sorted prefix, moving only the prefix part it
// overlaps (with memmove) and its own events; input far from sorted falls
// back to a bottom-up merge sort of its runs (O(n log runs)).
func sortEvents(ev []event) {
	var buf []event
	budget := 4*len(ev) + 4096
	for s := 1; s < len(ev); {
		last := ev[s-1].time
		if ev[s].time >= last {
			s++
			continue
		}
		// ev[:s] is sorted; ev[s:e] is an ascending batch earlier than last.
		e := s + 1
		for e < len(ev) && ev[e].time >= ev[e-1].time && ev[e].time < last {
			e++
		}
		lo := upperBound(ev[:s], ev[s].time)
		if budget -= e - lo; budget < 0 {
			mergeSortRuns(ev)
			return
		}
		buf = append(buf[:0], ev[s:e]...)
		// Merge from the right: a prefix event moves after a batch event
		// only when it is strictly later (equal times keep file order).
		i, k := s-1, e-1
		for j := len(buf) - 1; j >= 0; j-- {
			p := lo + upperBound(ev[lo:i+1], buf[j].time)
			n := i + 1 - p
			copy(ev[k-n+1:k+1], ev[p:i+1])
			k -= n
			i = p - 1
			ev[k] = buf[j]
			k--
		}
		s = e
	}
}

// upperBound returns the first index of sorted ev whose time is later than t.
func upperBound(ev []event, t int64) int {
	lo, hi := 0, len(ev)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ev[mid].time <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// mergeSortRuns is a bottom-up merge sort of the sorted runs of ev.
func mergeSortRuns(ev []event) {
	bounds := []int{0}
	for i := 1; i < len(ev); i++ {
		if ev[i].time < ev[i-1].time {
			bounds = append(bounds, i)
		}
	}
	if len(bounds) == 1 {
		return
	}
	bounds = append(bounds, len(ev))
	src, dst := ev, make([]event, len(ev))
	for len(bounds) > 2 {
		next := make([]int, 0, len(bounds)/2+2)
		for k := 0; k+1 < len(bounds); k += 2 {
			lo := bounds[k]
			next = append(next, lo)
			if k+2 >= len(bounds) {
				copy(dst[lo:], src[lo:bounds[k+1]])
				continue
			}
			mergeEvents(dst[lo:bounds[k+2]], src[lo:bounds[k+1]], src[bounds[k+1]:bounds[k+2]])
		}
		bounds = append(next, len(ev))
		src, dst = dst, src
	}
	if &src[0] != &ev[0] {
		copy(ev, src)
	}
}

// mergeEvents merges two sorted runs into dst, a's events first on ties.
func mergeEvents(dst, a, b []event) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if b[j].time < a[i].time {
			dst[k] = b[j]
			j++
		} else {
			dst[k] = a[i]
			i++
		}
		k++
	}
	k += copy(dst[k:], a[i:])
	copy(dst[k:], b[j:])
}

// openScope is a scope record on the zone's stack.
type openScope struct {
	rec   *trace.Record
	start int64 // µs
}

// zoneBuilder turns one zone's sorted events into spans.
type zoneBuilder struct {
	l       *loader
	z       *zone
	id      identity
	attrs   trace.Attrs
	emit    ingest.Emit
	st      *stats
	counts  []int64 // stored events per type id
	left    int     // events not yet processed (bounds the slabs)
	stack   []openScope
	root    *trace.Record
	startUS int64
	ordinal int

	slab        []trace.Record
	childSlab   []*trace.Record
	attrSlab    trace.Attrs
	frameStarts map[int64]struct{}
	frameEnds   map[int64]struct{}
}

// build emits the spans of every zone.
func (l *loader) build(id identity, emit ingest.Emit, st *stats) error {
	st.perZone = map[string]map[string]int64{}
	st.perName = map[string]int64{}
	base := l.fileAttrs(id.file)
	counts := make([]int64, len(l.types)) // shared by the zones, reset after each
	for _, z := range l.zones {
		if len(z.events) == 0 {
			continue
		}
		b := &zoneBuilder{
			l: l, z: z, id: id, emit: emit, st: st,
			attrs:  zoneAttrs(base, z),
			counts: counts,
		}
		if err := b.run(); err != nil {
			return err
		}
		names := st.perZone[z.displayName()]
		if names == nil {
			names = map[string]int64{}
			st.perZone[z.displayName()] = names
		}
		for _, e := range z.events {
			if n := counts[e.typ]; n > 0 {
				name := l.types[e.typ].name
				names[name] += n
				st.perName[name] += n
				counts[e.typ] = 0
			}
		}
		for n := range b.frameStarts {
			if _, ok := b.frameEnds[n]; ok {
				st.frames++
			}
		}
	}
	return nil
}

// fileAttrs are the attributes every span of the file carries.
func (l *loader) fileAttrs(file string) trace.Attrs {
	var a trace.Attrs
	a.Set("source.format", trace.String(trace.SourceWTF))
	a.Set("source.file", trace.String(file))
	a.Set("wtf.encoding", trace.String(l.enc.String()))
	a.Set("wtf.timebase_ms", trace.Float(l.header.timebaseMS))
	if len(l.header.flags) > 0 {
		flags := make([]trace.Value, len(l.header.flags))
		for i, f := range l.header.flags {
			flags[i] = trace.String(f)
		}
		a.Set("wtf.flags", trace.List(flags...))
	}
	for _, kv := range l.header.context {
		a.Set(kv.Key, kv.Value)
	}
	for _, kv := range l.header.metadata {
		a.Set(kv.Key, kv.Value)
	}
	return a
}

func zoneAttrs(base trace.Attrs, z *zone) trace.Attrs {
	a := append(trace.Attrs(nil), base...)
	a.Set("thread", trace.String(z.displayName()))
	a.Set("wtf.zone", trace.String(z.displayName()))
	if z.hasType {
		a.Set("wtf.zone.type", trace.String(z.typ))
	}
	if z.hasLoc {
		a.Set("wtf.zone.location", trace.String(z.location))
	}
	return a
}

func (b *zoneBuilder) run() error {
	for i, e := range b.z.events {
		b.left = len(b.z.events) - i
		b.counts[e.typ]++
		if err := b.event(b.l.types[e.typ], e.time, b.l.eventArgs(e), b.z.children[i]); err != nil {
			return err
		}
		if err := b.l.poll(); err != nil {
			return err
		}
	}
	if len(b.stack) > 0 {
		// Close what the file left open at the zone's last event time.
		last := b.z.events[len(b.z.events)-1].time
		for len(b.stack) > 0 {
			top := b.stack[len(b.stack)-1]
			top.rec.Open = true
			b.st.unclosed++
			b.l.warn.add("unclosed", fmt.Sprintf("zone %q: scope %s never left; closed at the zone's last event", b.z.displayName(), top.rec.Method))
			if err := b.pop(last); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *zoneBuilder) event(t *eventType, time int64, args trace.Attrs, children int32) error {
	switch classify(t, len(b.stack)) {
	case kindScope:
		rec := b.record(t.name, args, children)
		if len(b.stack) == 0 {
			b.root, b.startUS = rec, time
		} else {
			rec.StartNS = (time - b.startUS) * 1000
			parent := b.stack[len(b.stack)-1].rec
			parent.Children = append(parent.Children, rec)
		}
		b.stack = append(b.stack, openScope{rec: rec, start: time})
		b.st.scopes++
		b.st.maxDepth = max(b.st.maxDepth, len(b.stack))
		return nil
	case kindLeave:
		if len(b.stack) == 0 {
			b.st.unmatchedLeaves++
			b.l.warn.add("leave", fmt.Sprintf("zone %q: wtf.scope#leave at %d µs without an open scope; ignored", b.z.displayName(), time))
			return nil
		}
		b.st.leaves++
		return b.pop(time)
	case kindAppend:
		b.st.appends++
		b.appendData(b.stack[len(b.stack)-1].rec, t, args)
		return nil
	}
	// An instance event: a zero-length record.
	if t.appendsScopeData() {
		b.st.orphanAppends++
	}
	b.st.instances++
	b.bookkeep(t, args)
	rec := b.record(t.name, args, 0)
	if len(b.stack) == 0 {
		b.root, b.startUS = rec, time
		return b.finish(spanTypeInstance)
	}
	rec.StartNS = (time - b.startUS) * 1000
	parent := b.stack[len(b.stack)-1].rec
	parent.Children = append(parent.Children, rec)
	parent.Calls++
	return nil
}

// recordSlab is how many records are allocated at once.
const (
	recordSlab = 512
	childSlab  = 2048
)

// record returns a new record with Calls 1 and room for its children.
// Records and children slices are carved from slabs (they are the bulk of
// the allocations); each children slice is capped at its size, so appending
// to it later reallocates instead of overwriting a neighbour.
func (b *zoneBuilder) record(method string, args trace.Attrs, children int32) *trace.Record {
	if len(b.slab) == 0 {
		b.slab = make([]trace.Record, min(recordSlab, max(b.left, 1)))
	}
	rec := &b.slab[0]
	b.slab = b.slab[1:]
	rec.Method, rec.Attrs, rec.Calls = method, args, 1
	if n := int(children); n > 0 {
		if len(b.childSlab) < n {
			b.childSlab = make([]*trace.Record, max(n, min(childSlab, b.left)))
		}
		rec.Children = b.childSlab[:0:n]
		b.childSlab = b.childSlab[n:]
	}
	return rec
}

// pop closes the innermost scope at time end (µs).
func (b *zoneBuilder) pop(end int64) error {
	top := b.stack[len(b.stack)-1]
	b.stack = b.stack[:len(b.stack)-1]
	top.rec.DurationNS = (end - top.start) * 1000
	if len(b.stack) == 0 {
		return b.finish(spanTypeScope)
	}
	b.stack[len(b.stack)-1].rec.Calls += top.rec.Calls
	return nil
}

// appendData merges an APPEND_SCOPE_DATA event into the open scope: the
// builtin wtf.scope#appendData(name, value) sets name=value (older files:
// (ascii name, utf8 json)), any other such event sets all its arguments.
func (b *zoneBuilder) appendData(rec *trace.Record, t *eventType, args trace.Attrs) {
	if t.builtin == bAppendData {
		name, _ := args.Get("name")
		value, ok := args.Get("value")
		if !ok {
			if js, ok := args.Get("json"); ok && js.Kind == trace.KindString {
				value = b.l.anyValue(js.Str)
			}
		}
		rec.Attrs.Set(name.Text(), value)
		return
	}
	for _, a := range args {
		rec.Attrs.Set(a.Key, a.Value)
	}
}

// bookkeep counts frames, marks, time ranges and flows.
func (b *zoneBuilder) bookkeep(t *eventType, args trace.Attrs) {
	switch t.builtin {
	case bFrameStart, bFrameEnd:
		v, _ := args.Get("number")
		if v.Kind != trace.KindInt {
			return
		}
		m := &b.frameStarts
		if t.builtin == bFrameEnd {
			m = &b.frameEnds
		}
		if *m == nil {
			*m = map[int64]struct{}{}
		}
		(*m)[v.Int] = struct{}{}
	case bMark:
		b.st.marks++
	case bTimeRangeBegin:
		b.st.timeRanges++
	}
}

// attrSlabSpans is how many spans' attribute copies are allocated at once.
const attrSlabSpans = 64

// spanAttrs returns a copy of the zone's span attributes, carved from a
// slab and capped at its length (appending reallocates).
func (b *zoneBuilder) spanAttrs() trace.Attrs {
	n := len(b.attrs)
	if len(b.attrSlab) < n {
		b.attrSlab = make(trace.Attrs, n*min(attrSlabSpans, max(b.left, 1)))
	}
	a := b.attrSlab[:n:n]
	b.attrSlab = b.attrSlab[n:]
	copy(a, b.attrs)
	return a
}

// finish emits the trace rooted at b.root.
func (b *zoneBuilder) finish(typ string) error {
	tid := b.id.traceID(b.z, b.ordinal)
	b.ordinal++
	root := b.root
	b.root = nil
	span := &trace.Span{
		TraceID:    tid,
		SpanID:     spanID(tid),
		Type:       typ,
		StartNS:    b.l.header.timebaseNS + b.startUS*1000,
		DurationNS: root.DurationNS,
		Source:     trace.SourceWTF,
		Attrs:      b.spanAttrs(),
		Root:       root,
	}
	span.FillSummary()
	b.st.traces++
	b.st.records += span.Recs
	return b.emit(span)
}
