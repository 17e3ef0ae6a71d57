package atf

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/trace"
)

// DuplicateWindowNS is how far apart (in timestamp) an index event and its
// lane copy may be for the two to be merged. The writer's copies are a few
// nanoseconds apart; a genuine second call of the same function at the same
// depth is separated from the first by its return.
const DuplicateWindowNS = 1000

// SpanType is the Type of every span the importer emits.
const SpanType = "atf.call"

// ExceptionClass is the Class of the exception an EXCEPTION event records.
const ExceptionClass = "atf.exception"

// orderEvents returns the index_seqs of ev ordered by (timestamp, index_seq).
func orderEvents(ev []IndexEvent) []uint32 {
	order := make([]uint32, len(ev))
	sorted := true
	for i := range ev {
		order[i] = uint32(i)
		if i > 0 && ev[i].TimestampNS < ev[i-1].TimestampNS {
			sorted = false
		}
	}
	if sorted {
		return order
	}
	type item struct {
		ts  uint64
		seq uint32
	}
	items := make([]item, len(ev))
	for i := range ev {
		items[i] = item{ev[i].TimestampNS, uint32(i)}
	}
	slices.SortFunc(items, func(a, b item) int {
		if a.ts != b.ts {
			if a.ts < b.ts {
				return -1
			}
			return 1
		}
		return int(int64(a.seq) - int64(b.seq))
	})
	for i := range items {
		order[i] = items[i].seq
	}
	return order
}

// removeLaneCopies merges the events the writer recorded twice (the index
// lane's copy and the detail lane's copy): same function id, kind and depth,
// at most DuplicateWindowNS apart, exactly one of the two linked to a detail
// record. order must be sorted by timestamp. A linked event pairs with the
// closest earlier unpaired copy; a copy never pairs across the return (or
// the next call) of the same function at the same depth, since the two
// copies of an event are nanoseconds apart and a call lasts longer than
// that. Of each pair the earlier one keeps its place and time; when it is
// the unlinked copy, via[its seq] holds the linked one's seq + 1 (0: none),
// whose detail record it takes. It returns the kept order, via (nil when no
// pair needed it), and the number of events removed.
func removeLaneCopies(ev []IndexEvent, order []uint32) (kept []uint32, via []uint32, removed int64) {
	linked := false
	for i := range ev {
		if ev[i].DetailSeq != NoDetail {
			linked = true
			break
		}
	}
	if !linked {
		return order, nil, 0
	}
	type key struct {
		fid         uint64
		kind, depth uint32
	}
	type pendingCopies struct {
		linked bool
		seqs   []uint32 // ascending timestamps
	}
	pending := make(map[key]*pendingCopies)
	dropped := make([]bool, len(ev))
	for _, seq := range order {
		e := &ev[seq]
		if e.Kind < KindCall || e.Kind > KindException {
			continue
		}
		k := key{e.FunctionID, e.Kind, e.Depth}
		isLinked := e.DetailSeq != NoDetail
		p := pending[k]
		if p == nil {
			p = &pendingCopies{}
			pending[k] = p
		}
		// Expire copies too old to pair with e.
		i := 0
		for i < len(p.seqs) && e.TimestampNS-ev[p.seqs[i]].TimestampNS > DuplicateWindowNS {
			i++
		}
		p.seqs = p.seqs[i:]
		if len(p.seqs) > 0 && p.linked != isLinked {
			other := p.seqs[len(p.seqs)-1]
			p.seqs = p.seqs[:len(p.seqs)-1]
			dropped[seq] = true
			if isLinked {
				if via == nil {
					via = make([]uint32, len(ev))
				}
				via[other] = seq + 1
			}
			removed++
			continue
		}
		if len(p.seqs) == 0 {
			p.linked = isLinked
		}
		p.seqs = append(p.seqs, seq)
		// A call's copies precede its return, a return's precede the next
		// call: forget the complementary kind's pending copies.
		switch e.Kind {
		case KindCall:
			k.kind = KindReturn
		case KindReturn:
			k.kind = KindCall
		default:
			continue
		}
		if q := pending[k]; q != nil {
			q.seqs = q.seqs[:0]
		}
	}
	if removed == 0 {
		return order, nil, 0
	}
	kept = order[:0]
	for _, seq := range order {
		if !dropped[seq] {
			kept = append(kept, seq)
		}
	}
	return kept, via, removed
}

// threadStats are the per-import counts reported in Summary.Details.
type threadStats struct {
	DuplicatesRemoved int64
	CrashedCalls      int64 // calls still open at the end of the thread
	UnmatchedCalls    int64 // calls closed by the return of a caller
	OrphanEvents      int64 // returns/exceptions without an open call
	InvalidEvents     int64 // event kinds other than 1, 2, 3
	CallsElided       int64 // calls nested deeper than trace.MaxDepth
	LinkErrors        int64 // detail_seq naming no record that links back
	UnlinkedDetails   int64 // detail records no index event links to
	Traces, Records   int64
}

func (s *threadStats) add(o threadStats) {
	s.DuplicatesRemoved += o.DuplicatesRemoved
	s.CrashedCalls += o.CrashedCalls
	s.UnmatchedCalls += o.UnmatchedCalls
	s.OrphanEvents += o.OrphanEvents
	s.InvalidEvents += o.InvalidEvents
	s.CallsElided += o.CallsElided
	s.LinkErrors += o.LinkErrors
	s.UnlinkedDetails += o.UnlinkedDetails
	s.Traces += o.Traces
	s.Records += o.Records
}

// clock maps the writer's monotonic timestamps onto ns since the epoch.
type clock struct {
	// known: the session directory named the wall time of the session
	// start, which is taken as the time of the session's earliest event.
	known bool
	base  int64  // wall ns of minTS
	minTS uint64 // smallest timestamp of the session
}

func (c clock) wallNS(ts uint64) int64 {
	if !c.known {
		return satInt64(ts)
	}
	if ts < c.minTS {
		return satAdd(c.base, -satInt64(c.minTS-ts))
	}
	return satAdd(c.base, satInt64(ts-c.minTS))
}

func newClock(info pathInfo, minTS uint64, haveEvents bool) clock {
	if info.SessionStart.IsZero() || !haveEvents {
		return clock{}
	}
	return clock{known: true, base: info.SessionStart.UnixNano(), minTS: minTS}
}

func satInt64(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

func satAdd(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// frame is an open call on the builder's stack.
type frame struct {
	rec       *trace.Record // nil for a call elided below trace.MaxDepth
	fid       uint64
	ts        uint64
	prevSame  int   // stack position of the next open call of fid below, -1 (indexed mode)
	kidsStart int   // where this call's children start on threadBuilder.kids
	elided    int64 // calls elided below this frame (only at trace.MaxDepth)
}

// function is what the builder caches per function id.
type function struct {
	method string
	id     trace.Value // "0x%016x"
}

// threadBuilder turns one thread's ordered events into spans.
//
// Finding the open call a return belongs to: the usual case is the
// innermost call, checked directly. Otherwise the stack is scanned
// downwards; the scan pops what it passes when it finds the call, so its
// cost is paid once per frame. Scans that find nothing are wasted work; once
// they exceed scanBudgetPerEvent per event the builder switches to indexed
// mode, a map from function id to its topmost open frame, which makes
// every lookup O(1) for hostile inputs.
type threadBuilder struct {
	ctx     context.Context
	thread  *Thread
	info    pathInfo
	name    string // thread name
	size    int64  // index file size, part of the trace ids
	symbols SymbolTable
	clock   clock
	emit    func(*trace.Span) error
	base    trace.Attrs // span attributes shared by every span of the thread
	via     []uint32    // kept unlinked copy -> its linked copy + 1 (removeLaneCopies)
	regs    [3]regNames // by detailRole

	stack     []frame
	kids      []*trace.Record // children of the open calls, innermost last
	indexed   bool
	top       map[uint64]int // indexed mode: function id -> topmost open frame
	wasted    int64          // scan steps that found nothing
	processed int64
	funcs     map[uint64]function
	lastFID   uint64
	lastFunc  function

	rootTS  uint64
	rootSeq uint32
	ordinal int64

	recSlab  []trace.Record
	attrSlab []trace.Attr
	kidSlab  []*trace.Record
	stats    threadStats
}

// scanBudgetPerEvent bounds the wasted stack-scan steps per event before
// the builder switches to indexed mode.
const scanBudgetPerEvent = 16

// detailRole says which event a detail record belongs to.
type detailRole int

const (
	roleCall detailRole = iota
	roleReturn
	roleException
)

// Attribute slots of a detail record, per role.
const (
	slotDetailSeq = 0
	slotIndexSeq  = 1
	slotRaw       = 2
	slotX0        = 3 // x_regs[0..7] are slots 3..10
	slotLR        = 11
	slotFP        = 12
	slotSP        = 13
	slotStack     = 14
	slotOSThread  = 15
	numSlots      = 16
)

// regNames are the attribute keys of one role ("" = not captured for this
// role and architecture) and the slots in key order, so that a record's
// detail attributes merge into its sorted Attrs without sorting.
type regNames struct {
	keys   [numSlots]string
	sorted []int
}

func makeRegNames(arch uint8, role detailRole) regNames {
	prefix := [...]string{"atf.", "atf.ret.", "atf.exc."}[role]
	var r regNames
	k := &r.keys
	k[slotDetailSeq] = prefix + "detail_seq"
	k[slotIndexSeq] = prefix + "index_seq"
	k[slotStack] = prefix + "stack"
	k[slotRaw] = prefix + "detail_raw"
	k[slotOSThread] = prefix + "os_thread_id"
	reg := prefix + "reg."
	switch {
	case arch == ArchX8664 && role == roleReturn:
		k[slotX0] = reg + "rax"
		k[slotSP] = reg + "rsp"
	case arch == ArchX8664:
		for i, n := range [8]string{"rdi", "rsi", "rdx", "rcx", "r8", "r9", "rbp", "rsp"} {
			k[slotX0+i] = reg + n
		}
	case role == roleReturn:
		k[slotX0] = reg + "x0"
		k[slotSP] = reg + "sp"
	default:
		for i := range 8 {
			k[slotX0+i] = reg + "x" + strconv.Itoa(i)
		}
		k[slotLR], k[slotFP], k[slotSP] = reg+"lr", reg+"fp", reg+"sp"
	}
	for i, key := range k {
		if key != "" {
			r.sorted = append(r.sorted, i)
		}
	}
	slices.SortFunc(r.sorted, func(a, b int) int { return strings.Compare(k[a], k[b]) })
	return r
}

// build processes the thread's events in order and emits one span per
// top-level call.
func (b *threadBuilder) build(order []uint32) error {
	ev := b.thread.Index.Events
	arch := b.thread.Index.Header.Arch
	for role := range b.regs {
		b.regs[role] = makeRegNames(arch, detailRole(role))
	}
	b.funcs = make(map[uint64]function)
	var last uint64
	for i, seq := range order {
		if i&0xffff == 0xffff {
			if err := b.ctx.Err(); err != nil {
				return err
			}
		}
		b.processed++
		e := &ev[seq]
		last = e.TimestampNS
		var err error
		switch e.Kind {
		case KindCall:
			b.call(seq, e)
		case KindReturn:
			err = b.ret(seq, e)
		case KindException:
			b.exception(seq, e)
		default:
			b.stats.InvalidEvents++
		}
		if err != nil {
			return err
		}
	}
	if len(b.stack) == 0 {
		return nil
	}
	// The thread ended inside calls: a crash. Close them at its last
	// timestamp, flagged.
	for len(b.stack) > 0 {
		f := b.pop()
		b.stats.CrashedCalls++
		if f.rec != nil {
			b.close(&f, last)
			f.rec.Open = true
			f.rec.Attrs.Set("atf.crashed", trace.Bool(true))
		}
		if len(b.stack) == 0 {
			return b.emitSpan(f.rec, true)
		}
	}
	return nil
}

func (b *threadBuilder) call(seq uint32, e *IndexEvent) {
	depth := len(b.stack)
	f := frame{fid: e.FunctionID, ts: e.TimestampNS, prevSame: -1}
	if depth == 0 {
		b.rootTS, b.rootSeq = e.TimestampNS, seq
	}
	if depth < trace.MaxDepth {
		rec := b.newRecord(e)
		if depth > 0 {
			b.kids = append(b.kids, rec)
		}
		b.attachDetail(rec, seq, roleCall)
		f.rec = rec
	} else {
		b.stack[trace.MaxDepth-1].elided++
		b.stats.CallsElided++
	}
	f.kidsStart = len(b.kids)
	if b.indexed {
		if p, ok := b.top[e.FunctionID]; ok {
			f.prevSame = p
		}
		b.top[e.FunctionID] = depth
	}
	b.stack = append(b.stack, f)
}

// find returns the stack position of the innermost open call of fid. A
// caller that will not pop the frames above it passes popping=false, so
// that the steps of a successful scan count as wasted too.
func (b *threadBuilder) find(fid uint64, popping bool) (int, bool) {
	n := len(b.stack)
	if n == 0 {
		return 0, false
	}
	if b.stack[n-1].fid == fid {
		return n - 1, true
	}
	if b.indexed {
		at, ok := b.top[fid]
		return int(at), ok
	}
	at, found := -1, false
	for i := n - 2; i >= 0; i-- {
		if b.stack[i].fid == fid {
			at, found = i, true
			break
		}
	}
	if !found || !popping {
		b.wasted += int64(n - 1 - max(at, 0))
		if b.wasted > scanBudgetPerEvent*b.processed {
			b.index()
		}
	}
	return at, found
}

// index switches to indexed mode.
func (b *threadBuilder) index() {
	b.indexed = true
	b.top = make(map[uint64]int)
	for i := range b.stack {
		f := &b.stack[i]
		f.prevSame = -1
		if p, ok := b.top[f.fid]; ok {
			f.prevSame = p
		}
		b.top[f.fid] = i
	}
}

func (b *threadBuilder) ret(seq uint32, e *IndexEvent) error {
	at, ok := b.find(e.FunctionID, true)
	if !ok {
		b.stats.OrphanEvents++
		return nil
	}
	for len(b.stack)-1 > at {
		f := b.pop()
		b.stats.UnmatchedCalls++
		if f.rec != nil {
			b.close(&f, e.TimestampNS)
			f.rec.Attrs.Set("atf.unmatched", trace.Bool(true))
		}
	}
	f := b.pop()
	if f.rec != nil {
		b.attachDetail(f.rec, seq, roleReturn)
		b.close(&f, e.TimestampNS)
	}
	if len(b.stack) == 0 {
		return b.emitSpan(f.rec, false)
	}
	return nil
}

func (b *threadBuilder) exception(seq uint32, e *IndexEvent) {
	if len(b.stack) == 0 {
		b.stats.OrphanEvents++
		return
	}
	at, ok := b.find(e.FunctionID, false)
	if !ok {
		at = len(b.stack) - 1
	}
	rec := b.stack[at].rec
	if rec == nil {
		rec = b.stack[trace.MaxDepth-1].rec
	}
	n := int64(1)
	if rec.Exception == nil {
		rec.Exception = &trace.Exception{
			Class: ExceptionClass,
			Message: fmt.Sprintf("EXCEPTION event in %s at index_seq %d, %d ns after the call",
				rec.Method, seq, satInt64(e.TimestampNS-b.stack[at].ts)),
		}
	} else if v, ok := rec.Attrs.Get("atf.exceptions"); ok {
		n = v.Int + 1
	} else {
		n = 2
	}
	if n > 1 {
		rec.Attrs.Set("atf.exceptions", trace.Int(n))
	}
	b.attachDetail(rec, seq, roleException)
}

func (b *threadBuilder) pop() frame {
	f := b.stack[len(b.stack)-1]
	b.stack = b.stack[:len(b.stack)-1]
	if b.indexed {
		if f.prevSame < 0 {
			delete(b.top, f.fid)
		} else {
			b.top[f.fid] = f.prevSame
		}
	}
	return f
}

// close sets the duration, the children and the subtree counts of a
// frame's record; its children move from the kids stack into an exactly
// sized slice.
func (b *threadBuilder) close(f *frame, ts uint64) {
	r := f.rec
	r.DurationNS = satInt64(ts - f.ts) // events are time-ordered: ts >= f.ts
	if k := b.kids[f.kidsStart:]; len(k) > 0 {
		if len(b.kidSlab) < len(k) {
			b.kidSlab = make([]*trace.Record, max(len(k), 4*slabSize))
		}
		r.Children = b.kidSlab[:len(k):len(k)]
		b.kidSlab = b.kidSlab[len(k):]
		copy(r.Children, k)
		clear(k)
		b.kids = b.kids[:f.kidsStart]
	}
	calls := 1 + f.elided
	var errs int64
	if r.Exception != nil {
		errs = 1
	}
	for _, c := range r.Children {
		calls += c.Calls
		errs += c.Errors
	}
	r.Calls, r.Errors = calls, errs
	if f.elided > 0 {
		r.Attrs.Set("atf.calls_elided", trace.Int(f.elided))
	}
}

const slabSize = 256

func (b *threadBuilder) newRecord(e *IndexEvent) *trace.Record {
	if len(b.recSlab) == 0 {
		b.recSlab = make([]trace.Record, slabSize)
	}
	if len(b.attrSlab) == 0 {
		b.attrSlab = make([]trace.Attr, slabSize)
	}
	r := &b.recSlab[0]
	b.recSlab = b.recSlab[1:]
	attrs := b.attrSlab[0:1:1]
	b.attrSlab = b.attrSlab[1:]
	fn := b.function(e.FunctionID)
	attrs[0] = trace.Attr{Key: "atf.function_id", Value: fn.id}
	r.Method = fn.method
	r.StartNS = satInt64(e.TimestampNS - b.rootTS)
	r.Attrs = attrs
	return r
}

// function returns the cached name and id value of fid.
func (b *threadBuilder) function(fid uint64) function {
	if fid == b.lastFID && b.lastFunc.method != "" {
		return b.lastFunc
	}
	fn, ok := b.funcs[fid]
	if !ok {
		fn.id = trace.String(formatFunctionID(fid))
		fn.method = fn.id.Str
		if s, ok := b.symbols[fid]; ok && s.Name != "" {
			fn.method = s.Name
		}
		b.funcs[fid] = fn
	}
	b.lastFID, b.lastFunc = fid, fn
	return fn
}

// formatFunctionID renders a function id as the manifest writes it.
func formatFunctionID(fid uint64) string { return fmt.Sprintf("0x%016x", fid) }

// maxRawDetail bounds the raw payload bytes kept as an attribute.
const maxRawDetail = 1024

// attachDetail follows the event's forward link, checks the back link and
// sets the decoded registers and stack as attributes of rec.
func (b *threadBuilder) attachDetail(rec *trace.Record, seq uint32, role detailRole) {
	if b.via != nil && b.via[seq] != 0 {
		seq = b.via[seq] - 1
	}
	e := &b.thread.Index.Events[seq]
	if e.DetailSeq == NoDetail {
		return
	}
	d, ok := b.thread.DetailOf(seq)
	if !ok {
		b.stats.LinkErrors++
		return
	}
	names := &b.regs[role]
	var vals [numSlots]trace.Value // KindNull: slot absent
	vals[slotDetailSeq] = trace.Int(int64(e.DetailSeq))
	vals[slotIndexSeq] = trace.Int(int64(seq))
	p := DecodePayload(d.Payload)
	if p.Layout == LayoutRaw {
		raw := d.Payload[:min(len(d.Payload), maxRawDetail)]
		vals[slotRaw] = trace.String(hex.EncodeToString(raw))
	} else {
		for i, r := range p.Regs {
			vals[slotX0+i] = trace.Int(int64(r))
		}
		vals[slotLR], vals[slotFP], vals[slotSP] = trace.Int(int64(p.LR)), trace.Int(int64(p.FP)), trace.Int(int64(p.SP))
		if len(p.Stack) > 0 {
			vals[slotStack] = trace.String(hex.EncodeToString(p.Stack))
		}
		if p.Layout == LayoutDrain && role != roleReturn {
			vals[slotOSThread] = trace.Int(int64(p.OSThreadID))
		}
	}
	var buf [numSlots]trace.Attr
	add := buf[:0]
	for _, slot := range names.sorted {
		if vals[slot].Kind != trace.KindNull {
			add = append(add, trace.Attr{Key: names.keys[slot], Value: vals[slot]})
		}
	}
	rec.Attrs = mergeAttrs(b.allocAttrs(len(rec.Attrs)+len(add)), rec.Attrs, add)
}

// allocAttrs returns an empty slice of capacity n from the attribute slab.
func (b *threadBuilder) allocAttrs(n int) trace.Attrs {
	if len(b.attrSlab) < n {
		b.attrSlab = make([]trace.Attr, max(n, slabSize))
	}
	a := b.attrSlab[:0:n]
	b.attrSlab = b.attrSlab[n:]
	return a
}

// mergeAttrs appends to out the sorted a and the sorted add merged (add
// wins on equal keys).
func mergeAttrs(out, a trace.Attrs, add []trace.Attr) trace.Attrs {
	i, j := 0, 0
	for i < len(a) || j < len(add) {
		switch {
		case j == len(add) || i < len(a) && a[i].Key < add[j].Key:
			out = append(out, a[i])
			i++
		case i == len(a) || add[j].Key < a[i].Key:
			out = append(out, add[j])
			j++
		default: // equal keys: add wins
			out = append(out, add[j])
			i++
			j++
		}
	}
	return out
}

// emitSpan wraps a finished top-level record into a span and emits it.
func (b *threadBuilder) emitSpan(root *trace.Record, crashed bool) error {
	if err := b.ctx.Err(); err != nil {
		return err
	}
	rootFID := b.thread.Index.Events[b.rootSeq].FunctionID
	id := b.traceID(rootFID)
	s := &trace.Span{
		TraceID:    id,
		SpanID:     spanID(id),
		Type:       SpanType,
		StartNS:    b.clock.wallNS(b.rootTS),
		DurationNS: root.DurationNS,
		Source:     trace.SourceATF,
		Root:       root,
		Calls:      root.Calls,
	}
	attrs := make(trace.Attrs, len(b.base), len(b.base)+5)
	copy(attrs, b.base)
	attrs.Set("atf.function_id", b.function(rootFID).id)
	attrs.Set("atf.timestamp_ns", trace.Int(satInt64(b.rootTS)))
	attrs.Set("atf.index_seq", trace.Int(int64(b.rootSeq)))
	if sym, ok := b.symbols[rootFID]; ok && sym.Module != "" {
		attrs.Set("atf.module", trace.String(sym.Module))
	}
	if crashed {
		attrs.Set("atf.crashed", trace.Bool(true))
	}
	s.Attrs = attrs
	s.FillSummary()
	s.Error = s.Errors > 0
	b.ordinal++
	b.stats.Traces++
	b.stats.Records += s.Recs
	return b.emit(s)
}

// traceID is the first 16 bytes of SHA-256 over the format, the file's
// stable identity, its size and the trace's key within the file (thread,
// ordinal of the top-level call, its function id and timestamp).
func (b *threadBuilder) traceID(fid uint64) trace.TraceID {
	h := sha256.New()
	var buf [8]byte
	h.Write([]byte("atf\x00"))
	h.Write([]byte(b.info.Key))
	binary.BigEndian.PutUint64(buf[:], uint64(b.size))
	h.Write([]byte{0})
	h.Write(buf[:])
	h.Write([]byte(b.name))
	h.Write([]byte{0})
	for _, v := range [...]uint64{uint64(b.ordinal), fid, b.rootTS} {
		binary.BigEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	var id trace.TraceID
	copy(id[:], h.Sum(nil))
	if id.IsZero() {
		id[15] = 1
	}
	return id
}

// spanID is the first 8 bytes of SHA-256(trace id + "span"), never 0.
func spanID(id trace.TraceID) trace.SpanID {
	sum := sha256.Sum256(append(id[:], "span"...))
	s := trace.SpanID(binary.BigEndian.Uint64(sum[:8]))
	if s == 0 {
		s = 1
	}
	return s
}

// baseAttrs are the span attributes every span of a thread carries.
func baseAttrs(t *Thread, info pathInfo) trace.Attrs {
	var a trace.Attrs
	h := t.Index.Header
	a.Set("source.format", trace.String(trace.SourceATF))
	a.Set("source.file", trace.String(info.Key))
	a.Set("thread", trace.String(t.Name))
	a.Set("atf.thread_id", trace.Int(int64(h.ThreadID)))
	a.Set("atf.arch", trace.String(ArchName(h.Arch)))
	a.Set("atf.os", trace.String(OSName(h.OS)))
	if info.PID >= 0 {
		a.Set("atf.pid", trace.Int(info.PID))
	}
	if info.Session != "" {
		a.Set("atf.session", trace.String(info.Session))
	}
	return a
}

// rawClockWarning is the warning of a session whose wall time is unknown.
const rawClockWarning = "no session_YYYYMMDD_HHMMSS directory in the path: span start times are the writer's raw monotonic clock, not wall time"
