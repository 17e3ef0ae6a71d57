package export

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/ztsd/ztsd/trace"
)

// item is one drawn interval: a record, or a span that has no root record.
type item struct {
	rec    *trace.Record // nil for a span without a root record
	span   int32         // index into layout.spans
	parent int32         // the parent record's item; -1 for a span's root
	prefer int32         // the item whose lane this one would share: parent, or the parent span's root; -1 for none
	thread int32         // index into layout.threads
	lane   int32         // index into layout.lanes; -1 until placed
	depth  int32         // nesting depth on its lane, 0 = outermost
	start  int64         // absolute ns since the epoch
	end    int64         // absolute ns, ≥ start
}

// spanInfo is one span of the input, in depth-first order.
type spanInfo struct {
	span   *trace.Span
	trace  int32 // index of its trace in the input
	group  int32 // process (Chrome pid) index
	thread int32
	root   int32 // item index of its root record (or of the span itself)
}

// thread is one thread of one group: one main lane and its overflow lanes.
type thread struct {
	group int32
	name  string
	first int64   // earliest start of its items
	lanes []int32 // indices into layout.lanes; lanes[0] is the main lane
}

// lane is a line of properly nested items.
type lane struct {
	thread   int32
	ordinal  int   // 0 for the main lane, 1, 2, … for overflow lanes
	maxDepth int32 // deepest item placed
	open     []int64
}

// layout places the records of a set of traces on lanes.
type layout struct {
	spans   []spanInfo
	items   []item
	threads []thread
	lanes   []lane
}

// maxLaneProbes bounds how many lanes of a thread are tried for one item
// before an overflow lane is opened, so that pathological input (thousands
// of overlapping siblings) costs O(items) probes, not O(items × lanes).
const maxLaneProbes = 16

// threadKey names the thread of a span as the package doc describes; ok is
// false when the span names none.
func threadKey(sp *trace.Span) (string, bool) {
	if v, ok := sp.Attrs.Get("thread"); ok && scalarText(v) != "" {
		return scalarText(v), true
	}
	if v, ok := sp.Attrs.Get("wtf.zone"); ok && scalarText(v) != "" {
		return scalarText(v), true
	}
	if v, ok := sp.Attrs.Get("dial9.worker"); ok && scalarText(v) != "" {
		return "worker-" + scalarText(v), true
	}
	if v, ok := sp.Attrs.Get("atf.thread_id"); ok && scalarText(v) != "" {
		return "thread " + scalarText(v), true
	}
	return "", false
}

func scalarText(v trace.Value) string {
	switch v.Kind {
	case trace.KindString, trace.KindInt, trace.KindFloat, trace.KindBool:
		return v.Text()
	}
	return ""
}

// addSat adds without wrapping around.
func addSat(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// durSat returns end-start, saturated at math.MaxInt64.
func durSat(start, end int64) int64 {
	d := end - start
	if d < 0 {
		return math.MaxInt64
	}
	return d
}

// newLayout flattens traces (each a list of root spans with their child
// spans) into items and places them on lanes. groupOf names the group
// (Chrome process) of each trace.
func newLayout(traces [][]*trace.Span, groupOf func(traceIdx int) int32) (*layout, error) {
	l := &layout{}
	threadIdx := make(map[struct {
		group int32
		name  string
	}]int32)
	seen := make(map[*trace.Span]bool)

	type spanFrame struct {
		sp         *trace.Span
		parentRoot int32
		parentThr  int32
	}
	type recFrame struct {
		rec    *trace.Record
		parent int32
		depth  int
	}
	var spanStack []spanFrame
	var recStack []recFrame

	for ti, roots := range traces {
		group := groupOf(ti)
		for i := len(roots) - 1; i >= 0; i-- {
			spanStack = append(spanStack, spanFrame{roots[i], -1, -1})
		}
		for len(spanStack) > 0 {
			f := spanStack[len(spanStack)-1]
			spanStack = spanStack[:len(spanStack)-1]
			sp := f.sp
			if sp == nil || seen[sp] {
				continue
			}
			seen[sp] = true

			name, ok := threadKey(sp)
			if !ok {
				name = "span " + sp.SpanID.String()
				if sp.SpanID == 0 {
					name = fmt.Sprintf("span #%d", len(l.spans)+1)
				}
			}
			key := struct {
				group int32
				name  string
			}{group, name}
			thr, ok := threadIdx[key]
			if !ok {
				thr = int32(len(l.threads))
				threadIdx[key] = thr
				l.threads = append(l.threads, thread{group: group, name: name, first: math.MaxInt64})
			}
			si := int32(len(l.spans))
			info := spanInfo{span: sp, trace: int32(ti), group: group, thread: thr, root: int32(len(l.items))}
			l.spans = append(l.spans, info)

			prefer := int32(-1)
			if f.parentThr == thr {
				prefer = f.parentRoot
			}
			if sp.Root == nil {
				start := sp.StartNS
				l.items = append(l.items, item{span: si, parent: -1, prefer: prefer, thread: thr, lane: -1,
					start: start, end: addSat(start, max(sp.DurationNS, 0))})
			} else {
				recStack = append(recStack[:0], recFrame{sp.Root, -1, 1})
				for len(recStack) > 0 {
					rf := recStack[len(recStack)-1]
					recStack = recStack[:len(recStack)-1]
					if rf.rec == nil {
						continue
					}
					if rf.depth > trace.MaxDepth {
						return nil, fmt.Errorf("span %s/%s: record tree deeper than %d", sp.TraceID, sp.SpanID, trace.MaxDepth)
					}
					pref := prefer
					if rf.parent >= 0 {
						pref = rf.parent
					}
					start := addSat(sp.StartNS, rf.rec.StartNS)
					idx := int32(len(l.items))
					l.items = append(l.items, item{rec: rf.rec, span: si, parent: rf.parent, prefer: pref, thread: thr, lane: -1,
						start: start, end: addSat(start, max(rf.rec.DurationNS, 0))})
					for i := len(rf.rec.Children) - 1; i >= 0; i-- {
						recStack = append(recStack, recFrame{rf.rec.Children[i], idx, rf.depth + 1})
					}
				}
			}
			for i := len(sp.Children) - 1; i >= 0; i-- {
				spanStack = append(spanStack, spanFrame{sp.Children[i], info.root, thr})
			}
		}
	}
	l.pack()
	return l, nil
}

// pack places every item on a lane of its thread (package doc, "Lanes").
func (l *layout) pack() {
	order := make([]int32, len(l.items))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		x, y := &l.items[a], &l.items[b]
		if c := cmp.Compare(x.thread, y.thread); c != 0 {
			return c
		}
		if c := cmp.Compare(x.start, y.start); c != 0 {
			return c
		}
		if c := cmp.Compare(y.end, x.end); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, idx := range order {
		it := &l.items[idx]
		th := &l.threads[it.thread]
		th.first = min(th.first, it.start)
		placed := false
		probes := 0
		try := func(ln int32) bool {
			probes++
			if d, ok := l.lanes[ln].fit(it.start, it.end); ok {
				l.lanes[ln].push(it.end, d)
				it.lane, it.depth = ln, d
				return true
			}
			return false
		}
		preferred := int32(-1)
		if it.prefer >= 0 {
			if p := &l.items[it.prefer]; p.thread == it.thread && p.lane >= 0 {
				preferred = p.lane
				placed = try(preferred)
			}
		}
		for k := 0; !placed && k < len(th.lanes) && probes < maxLaneProbes; k++ {
			if th.lanes[k] != preferred {
				placed = try(th.lanes[k])
			}
		}
		if !placed {
			ln := int32(len(l.lanes))
			l.lanes = append(l.lanes, lane{thread: it.thread, ordinal: len(th.lanes)})
			th.lanes = append(th.lanes, ln)
			l.lanes[ln].push(it.end, 0)
			it.lane, it.depth = ln, 0
		}
	}
	for i := range l.lanes {
		l.lanes[i].open = nil
	}
}

// fit closes the open items that end before an item [start, end] and
// reports the depth at which the item nests, or false when it would
// overlap the innermost open item without nesting inside it. Items must
// be offered in (start, longest first) order.
func (ln *lane) fit(start, end int64) (int32, bool) {
	open := ln.open
	for len(open) > 0 {
		top := open[len(open)-1]
		// Closed: it ended before this item starts, or exactly where a
		// non-empty item starts (a later sibling, not a child).
		if top < start || (top == start && end > top) {
			open = open[:len(open)-1]
			continue
		}
		break
	}
	ln.open = open
	if len(open) == 0 || end <= open[len(open)-1] {
		return int32(len(open)), true
	}
	return 0, false
}

func (ln *lane) push(end int64, depth int32) {
	ln.open = append(ln.open, end)
	ln.maxDepth = max(ln.maxDepth, depth)
}

// laneName is the display name of a lane: the thread name, with "#n" for
// overflow lanes.
func (l *layout) laneName(ln int32) string {
	lane := &l.lanes[ln]
	name := l.threads[lane.thread].name
	if lane.ordinal > 0 {
		name = fmt.Sprintf("%s #%d", name, lane.ordinal+1)
	}
	return name
}

// laneOrder lists the lanes of group in display order: threads by first
// start (then name), each thread's lanes in ordinal order.
func (l *layout) laneOrder(group int32) []int32 {
	var thr []int32
	for i := range l.threads {
		if l.threads[i].group == group && len(l.threads[i].lanes) > 0 {
			thr = append(thr, int32(i))
		}
	}
	slices.SortStableFunc(thr, func(a, b int32) int {
		x, y := &l.threads[a], &l.threads[b]
		if c := cmp.Compare(x.first, y.first); c != 0 {
			return c
		}
		return cmp.Compare(x.name, y.name)
	})
	var out []int32
	for _, t := range thr {
		out = append(out, l.threads[t].lanes...)
	}
	return out
}
