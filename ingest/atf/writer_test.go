package atf

// A test writer of ATF v2 files following the layouts of ADA's C writer,
// and a generator of random sessions (call trees, detail lanes, the
// drain's duplicated and unsorted lane copies, crash shapes) whose every
// event must read back.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// fileShape is how a writer left a file.
type fileShape int

const (
	shapeClean          fileShape = iota // header rewritten, footer written
	shapePlaceholder                     // crashed: placeholder header, no footer
	shapeFooterNoHeader                  // footer written, header rewrite lost
)

func (s fileShape) String() string {
	return [...]string{"clean", "placeholder", "footer-no-header"}[s]
}

type indexOpts struct {
	shape    fileShape
	arch     uint8 // default arm64
	threadID uint32
	torn     []byte // appended after the events (placeholder shape)
	// footerCount overrides the footer's event count when >= 0 (set it
	// with footerCountSet).
	footerCount    uint64
	footerCountSet bool
}

// buildIndex writes an index.atf image.
func buildIndex(o indexOpts, events []IndexEvent) []byte {
	arch := o.arch
	if arch == 0 {
		arch = ArchARM64
	}
	n := len(events)
	b := make([]byte, HeaderSize, HeaderSize+n*IndexEventSize+FooterSize+len(o.torn))
	copy(b, IndexMagic)
	b[4], b[5], b[6], b[7] = EndianLittle, SupportedVersion, arch, 3
	binary.LittleEndian.PutUint32(b[12:], o.threadID)
	b[16] = 1
	binary.LittleEndian.PutUint32(b[24:], IndexEventSize)
	binary.LittleEndian.PutUint64(b[32:], HeaderSize)
	binary.LittleEndian.PutUint64(b[40:], HeaderSize) // placeholder footer offset
	var e [IndexEventSize]byte
	hasDetail := false
	for _, ev := range events {
		binary.LittleEndian.PutUint64(e[0:], ev.TimestampNS)
		binary.LittleEndian.PutUint64(e[8:], ev.FunctionID)
		binary.LittleEndian.PutUint32(e[16:], ev.ThreadID)
		binary.LittleEndian.PutUint32(e[20:], ev.Kind)
		binary.LittleEndian.PutUint32(e[24:], ev.Depth)
		binary.LittleEndian.PutUint32(e[28:], ev.DetailSeq)
		b = append(b, e[:]...)
		hasDetail = hasDetail || ev.DetailSeq != NoDetail
	}
	var first, last uint64
	if n > 0 {
		first, last = events[0].TimestampNS, events[n-1].TimestampNS
	}
	if o.shape == shapePlaceholder {
		return append(b, o.torn...)
	}
	footerOff := len(b)
	count := uint64(n)
	if o.footerCountSet {
		count = o.footerCount
	}
	var f [FooterSize]byte
	copy(f[:], IndexFooterMagic)
	binary.LittleEndian.PutUint64(f[8:], count)
	binary.LittleEndian.PutUint64(f[16:], first)
	binary.LittleEndian.PutUint64(f[24:], last)
	binary.LittleEndian.PutUint64(f[32:], count*IndexEventSize)
	b = append(b, f[:]...)
	if o.shape == shapeClean {
		if hasDetail {
			b[8] = 1
		}
		binary.LittleEndian.PutUint32(b[28:], uint32(n))
		binary.LittleEndian.PutUint64(b[40:], uint64(footerOff))
		binary.LittleEndian.PutUint64(b[48:], first)
		binary.LittleEndian.PutUint64(b[56:], last)
	}
	return b
}

type detailRec struct {
	eventType uint16
	indexSeq  uint32
	threadID  uint32
	ts        uint64
	payload   []byte
}

// buildDetail writes a detail.atf image; a crashed file has a placeholder
// header, no footer and optionally a torn tail.
func buildDetail(crashed bool, arch uint8, threadID uint32, recs []detailRec, torn []byte) []byte {
	b := make([]byte, HeaderSize)
	copy(b, DetailMagic)
	b[4], b[5], b[6], b[7] = EndianLittle, SupportedVersion, arch, 3
	binary.LittleEndian.PutUint32(b[12:], threadID)
	binary.LittleEndian.PutUint64(b[20:], HeaderSize)
	var first, last uint64
	minSeq, maxSeq := uint64(^uint32(0)), uint64(0)
	for i, r := range recs {
		var h [DetailRecordHeaderSize]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(DetailRecordHeaderSize+len(r.payload)))
		binary.LittleEndian.PutUint16(h[4:], r.eventType)
		binary.LittleEndian.PutUint32(h[8:], r.indexSeq)
		binary.LittleEndian.PutUint32(h[12:], r.threadID)
		binary.LittleEndian.PutUint64(h[16:], r.ts)
		b = append(b, h[:]...)
		b = append(b, r.payload...)
		if i == 0 {
			first = r.ts
		}
		last = r.ts
		minSeq, maxSeq = min(minSeq, uint64(r.indexSeq)), max(maxSeq, uint64(r.indexSeq))
	}
	if crashed {
		return append(b, torn...)
	}
	length := uint64(len(b) - HeaderSize)
	binary.LittleEndian.PutUint64(b[28:], uint64(len(recs)))
	binary.LittleEndian.PutUint64(b[36:], length)
	binary.LittleEndian.PutUint64(b[44:], minSeq)
	binary.LittleEndian.PutUint64(b[52:], maxSeq)
	var f [FooterSize]byte
	copy(f[:], DetailFooterMagic)
	binary.LittleEndian.PutUint64(f[8:], uint64(len(recs)))
	binary.LittleEndian.PutUint64(f[16:], length)
	binary.LittleEndian.PutUint64(f[24:], first)
	binary.LittleEndian.PutUint64(f[32:], last)
	return append(b, f[:]...)
}

// drainPayload is the agent's 516-byte DetailEvent.
func drainPayload(ts, fid uint64, osTID, kind, depth uint32, regs [8]uint64, lr, fp, sp uint64, stack []byte) []byte {
	p := make([]byte, DrainPayloadSize)
	binary.LittleEndian.PutUint64(p[0:], ts)
	binary.LittleEndian.PutUint64(p[8:], fid)
	binary.LittleEndian.PutUint32(p[16:], osTID)
	binary.LittleEndian.PutUint32(p[20:], kind)
	binary.LittleEndian.PutUint32(p[24:], depth)
	for i, r := range regs {
		binary.LittleEndian.PutUint64(p[32+8*i:], r)
	}
	binary.LittleEndian.PutUint64(p[96:], lr)
	binary.LittleEndian.PutUint64(p[104:], fp)
	binary.LittleEndian.PutUint64(p[112:], sp)
	copy(p[120:248], stack)
	binary.LittleEndian.PutUint32(p[248:], uint32(len(stack)))
	return p
}

// documentedPayload is the spec's DetailFunctionPayload.
func documentedPayload(fid uint64, regs [8]uint64, lr, fp, sp uint64, stack []byte) []byte {
	p := make([]byte, DocumentedPayloadSize, DocumentedPayloadSize+len(stack))
	binary.LittleEndian.PutUint64(p[0:], fid)
	for i, r := range regs {
		binary.LittleEndian.PutUint64(p[8+8*i:], r)
	}
	binary.LittleEndian.PutUint64(p[72:], lr)
	binary.LittleEndian.PutUint64(p[80:], fp)
	binary.LittleEndian.PutUint64(p[88:], sp)
	binary.LittleEndian.PutUint16(p[96:], uint16(len(stack)))
	return append(p, stack...)
}

// ---- random sessions ----

// gEvent is one logical event of the generated model: what the tracer saw.
type gEvent struct {
	kind   uint32
	fid    uint64
	depth  uint32
	ts     uint64
	linked bool // recorded with detail (a second, linked index copy)
	delta  uint64
	regs   [8]uint64
	call   *gCall
	// physical positions in index.atf (-1 = not written)
	copyPos, linkedPos int
}

type gCall struct {
	fid       uint64
	call, ret *gEvent
	exc       *gEvent
	children  []*gCall
}

type genThread struct {
	num    int
	arch   uint8
	shape  fileShape
	roots  []*gCall
	events []*gEvent // logical, time order
	index  []byte
	detail []byte // nil when no linked event survived
	// what survived in the file
	written int // physical index events written
	torn    int
}

type genSession struct {
	threads []*genThread
	names   map[uint64]string // manifest symbols
}

// genThreadModel generates random call trees on one thread starting at ts.
func genThreadModel(r *rand.Rand, num int, ts uint64, detailRate float64) *genThread {
	th := &genThread{num: num, arch: []uint8{ArchARM64, ArchX8664}[r.IntN(2)]}
	next := func() uint64 { ts += 3 + uint64(r.IntN(3000)); return ts }
	fids := make([]uint64, 1+r.IntN(12))
	for i := range fids {
		fids[i] = uint64(r.Uint32())<<32 | uint64(1+i)
	}
	newEvent := func(kind uint32, c *gCall, depth uint32) *gEvent {
		e := &gEvent{kind: kind, fid: c.fid, depth: depth, ts: next(), call: c, copyPos: -1, linkedPos: -1}
		if r.Float64() < detailRate {
			e.linked = true
			e.delta = uint64(r.IntN(3))
			for i := range e.regs {
				e.regs[i] = r.Uint64() >> uint(r.IntN(64))
			}
		}
		th.events = append(th.events, e)
		return e
	}
	var gen func(depth uint32) *gCall
	gen = func(depth uint32) *gCall {
		c := &gCall{fid: fids[r.IntN(len(fids))]}
		c.call = newEvent(KindCall, c, depth)
		kids := 0
		if depth < 7 {
			kids = r.IntN(4)
		}
		excAt := -1
		if r.IntN(8) == 0 {
			excAt = r.IntN(kids + 1)
		}
		for i := 0; i <= kids; i++ {
			if i == excAt {
				c.exc = newEvent(KindException, c, depth)
			}
			if i < kids {
				c.children = append(c.children, gen(depth+1))
			}
		}
		c.ret = newEvent(KindReturn, c, depth)
		return c
	}
	for range 1 + r.IntN(6) {
		th.roots = append(th.roots, gen(1))
	}
	return th
}

// write lays the model out as the drain does: per batch, the index lane's
// copies, then the detail lane's linked copies; optionally shuffled; then
// applies the crash shape.
func (th *genThread) write(r *rand.Rand, shuffle bool) {
	type phys struct {
		e      *gEvent
		linked bool
	}
	var file []phys
	for i := 0; i < len(th.events); {
		n := 1 + r.IntN(16)
		batch := th.events[i:min(len(th.events), i+n)]
		for _, e := range batch {
			// Not what the drain writes, but a reader must cope: a linked
			// event without its index-lane copy (never in crash shapes,
			// whose expectations assume a time prefix survives).
			if e.linked && th.shape != shapePlaceholder && r.IntN(5) == 0 {
				continue
			}
			file = append(file, phys{e, false})
		}
		for _, e := range batch {
			if e.linked {
				file = append(file, phys{e, true})
			}
		}
		i += n
	}
	if shuffle {
		r.Shuffle(len(file), func(i, j int) { file[i], file[j] = file[j], file[i] })
	}
	th.written = len(file)
	if th.shape == shapePlaceholder {
		th.written = r.IntN(len(file) + 1)
		th.torn = r.IntN(IndexEventSize)
	}
	var events []IndexEvent
	var recs []detailRec
	for pos, p := range file[:th.written] {
		e := p.e
		ev := IndexEvent{TimestampNS: e.ts, FunctionID: e.fid, ThreadID: uint32(th.num), Kind: e.kind, Depth: e.depth, DetailSeq: NoDetail}
		if p.linked {
			e.linkedPos = pos
			ev.TimestampNS += e.delta
			ev.DetailSeq = uint32(len(recs))
			et := uint16(DetailFunctionCall)
			if e.kind == KindReturn {
				et = DetailFunctionReturn
			}
			var stack []byte
			if e.kind == KindCall {
				stack = make([]byte, r.IntN(129))
				for i := range stack {
					stack[i] = byte(r.Uint32())
				}
			}
			recs = append(recs, detailRec{eventType: et, indexSeq: uint32(pos), threadID: uint32(th.num), ts: ev.TimestampNS,
				payload: drainPayload(ev.TimestampNS, e.fid, 0x1000+uint32(th.num), e.kind, e.depth, e.regs, 1, 2, 3, stack)})
		} else {
			e.copyPos = pos
		}
		events = append(events, ev)
	}
	torn := make([]byte, th.torn)
	for i := range torn {
		torn[i] = byte(r.Uint32())
	}
	th.index = buildIndex(indexOpts{shape: th.shape, arch: th.arch, threadID: uint32(th.num), torn: torn}, events)
	if len(recs) > 0 || th.shape == shapeClean && r.IntN(2) == 0 {
		var dtorn []byte
		if th.shape == shapePlaceholder && r.IntN(2) == 0 {
			// A torn record: a header that claims more than was written.
			dtorn = binary.LittleEndian.AppendUint32(nil, 540)
			dtorn = append(dtorn, make([]byte, r.IntN(300))...)
		}
		th.detail = buildDetail(th.shape != shapeClean, th.arch, uint32(th.num), recs, dtorn)
	}
}

// survived reports whether a logical event has a copy in the file, and its
// timestamp there (the earliest copy's).
func (e *gEvent) survived() (uint64, bool) {
	switch {
	case e == nil:
		return 0, false
	case e.copyPos >= 0:
		return e.ts, true
	case e.linkedPos >= 0:
		return e.ts + e.delta, true
	}
	return 0, false
}

// expected renders the spans the thread must produce, in the notation of
// describe, and the counts.
func (th *genThread) expected(names map[uint64]string) (shapes []string, startTS []uint64, records, crashed, dups int64) {
	var last uint64
	for _, e := range th.events {
		if ts, ok := e.survived(); ok {
			last = max(last, ts)
		}
		if e.copyPos >= 0 && e.linkedPos >= 0 {
			dups++
		}
	}
	var render func(c *gCall, rootTS uint64) string
	render = func(c *gCall, rootTS uint64) string {
		start, _ := c.call.survived()
		end, ok := c.ret.survived()
		records++
		flags := ""
		if !ok {
			end = last
			flags += "!"
			crashed++
		}
		if _, ok := c.exc.survived(); ok {
			flags += "X"
		}
		if c.call.linkedPos >= 0 {
			flags += fmt.Sprintf("d%x", c.call.regs[0])
		}
		if ok && c.ret.linkedPos >= 0 {
			flags += fmt.Sprintf("r%x", c.ret.regs[0])
		}
		name, ok := names[c.fid]
		if !ok {
			name = formatFunctionID(c.fid)
		}
		s := fmt.Sprintf("%s(%d+%d){%s}", name, start-rootTS, end-start, flags)
		var kids []string
		for _, k := range c.children {
			if _, ok := k.call.survived(); ok {
				kids = append(kids, render(k, rootTS))
			}
		}
		if len(kids) > 0 {
			s += "[" + strings.Join(kids, ",") + "]"
		}
		return s
	}
	for _, c := range th.roots {
		if ts, ok := c.call.survived(); ok {
			shapes = append(shapes, render(c, ts))
			startTS = append(startTS, ts)
		}
	}
	return shapes, startTS, records, crashed, dups
}

// describe renders an emitted record tree in the notation of expected.
func describe(r *trace.Record, arch uint8) string {
	x0, ret := "atf.reg.x0", "atf.ret.reg.x0"
	if arch == ArchX8664 {
		x0, ret = "atf.reg.rdi", "atf.ret.reg.rax"
	}
	flags := ""
	if v, ok := r.Attrs.Get("atf.crashed"); ok && v.Bool {
		flags += "!"
	}
	if r.Exception != nil {
		flags += "X"
	}
	if v, ok := r.Attrs.Get(x0); ok {
		flags += fmt.Sprintf("d%x", uint64(v.Int))
	}
	if v, ok := r.Attrs.Get(ret); ok {
		flags += fmt.Sprintf("r%x", uint64(v.Int))
	}
	s := fmt.Sprintf("%s(%d+%d){%s}", r.Method, r.StartNS, r.DurationNS, flags)
	if len(r.Children) > 0 {
		var kids []string
		for _, c := range r.Children {
			kids = append(kids, describe(c, arch))
		}
		s += "[" + strings.Join(kids, ",") + "]"
	}
	return s
}

func genSessionModel(r *rand.Rand, threads int, withManifest bool) *genSession {
	s := &genSession{names: map[uint64]string{}}
	for i := range threads {
		th := genThreadModel(r, i, 1_000_000_000+uint64(r.IntN(1_000_000)), []float64{0, 0.3, 1}[r.IntN(3)])
		th.shape = fileShape(r.IntN(3))
		th.write(r, th.shape != shapePlaceholder && r.IntN(3) == 0)
		s.threads = append(s.threads, th)
		if withManifest {
			for _, e := range th.events {
				if r.IntN(2) == 0 {
					s.names[e.fid] = fmt.Sprintf("fn_%x", e.fid)
				}
			}
		}
	}
	return s
}

func (s *genSession) manifest() []byte {
	var sb strings.Builder
	sb.WriteString(`{"threads":[`)
	for i, th := range s.threads {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id":%d,"has_detail":true}`, th.num)
	}
	sb.WriteString(`],"time_start_ns":0,"time_end_ns":0,"clock_type":1,"modules":[],"symbols":[`)
	fids := make([]uint64, 0, len(s.names))
	for fid := range s.names {
		fids = append(fids, fid)
	}
	sort.Slice(fids, func(i, j int) bool { return fids[i] < fids[j] })
	for i, fid := range fids {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"function_id":"0x%016x","module_id":%d,"symbol_index":%d,"name":%q}`, fid, fid>>32, uint32(fid), s.names[fid])
	}
	sb.WriteString(`],"format_version":"2.1"}`)
	return []byte(sb.String())
}

// checkThread compares a thread's emitted spans and summary with its model.
func checkThread(t *testing.T, th *genThread, names map[uint64]string, spans []*trace.Span, base int64, minTS uint64) {
	t.Helper()
	want, starts, _, _, _ := th.expected(names)
	if len(spans) != len(want) {
		t.Fatalf("thread %d (%s): %d spans, want %d", th.num, th.shape, len(spans), len(want))
	}
	for i, s := range spans {
		if err := s.Validate(); err != nil {
			t.Errorf("span invalid: %v", err)
		}
		if got := describe(s.Root, th.arch); got != want[i] {
			t.Errorf("thread %d (%s) span %d:\n got %s\nwant %s", th.num, th.shape, i, got, want[i])
		}
		if s.StartNS != base+int64(starts[i]-minTS) {
			t.Errorf("thread %d span %d: start %d, want %d", th.num, i, s.StartNS, base+int64(starts[i]-minTS))
		}
		if v, _ := s.Attrs.Get("thread"); v.Str != fmt.Sprintf("thread_%d", th.num) {
			t.Errorf("thread attr %v", v)
		}
	}
}

func (th *genThread) minTS() (uint64, bool) {
	lo, any := ^uint64(0), false
	for _, e := range th.events {
		if ts, ok := e.survived(); ok {
			lo, any = min(lo, ts), true
		}
	}
	return lo, any
}

// TestRandomThreadsReadBack decodes random single threads from memory.
func TestRandomThreadsReadBack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano()
	var totEvents, totRecords, totCrashed, totDups, totDetails, totErrors int64
	shapes := map[fileShape]int{}
	defer func() {
		t.Logf("%d events, %d records, %d crashed, %d lane copies removed, %d detail records, %d exceptions; shapes %v",
			totEvents, totRecords, totCrashed, totDups, totDetails, totErrors, shapes)
		if totCrashed == 0 || totDups == 0 || totDetails == 0 || totErrors == 0 || len(shapes) != 3 {
			t.Errorf("the generator did not cover every case")
		}
	}()
	for iter := range 300 {
		s := genSessionModel(r, 1, iter%2 == 0)
		th := s.threads[0]
		name := fmt.Sprintf("x/session_20250304_050607/pid_9/thread_%d/index.atf", th.num)
		in := ThreadInput{Name: name, Index: th.index, Detail: th.detail}
		if iter%2 == 0 {
			in.Manifest = s.manifest()
		}
		var spans []*trace.Span
		sum, err := DecodeThread(context.Background(), in, ingest.Options{}, func(sp *trace.Span) error {
			spans = append(spans, sp)
			return nil
		})
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		minTS, _ := th.minTS()
		checkThread(t, th, s.names, spans, base, minTS)
		_, _, records, crashed, dups := th.expected(s.names)
		totEvents += sum.Events
		totRecords += sum.Records
		totCrashed += crashed
		totDups += dups
		totDetails += sum.Details["detail_events"].(int64)
		for _, sp := range spans {
			totErrors += sp.Errors
		}
		shapes[th.shape]++
		if sum.Events != int64(th.written) || sum.Records != records || sum.Traces != int64(len(spans)) ||
			sum.Details["crashed_calls"].(int64) != crashed || sum.Details["duplicates_removed"].(int64) != dups {
			t.Errorf("iter %d (%s): summary %+v; want events %d records %d crashed %d dups %d",
				iter, th.shape, sum, th.written, records, crashed, dups)
		}
		for _, k := range []string{"orphan_events", "invalid_events", "link_errors", "unlinked_details", "unmatched_calls"} {
			if sum.Details[k].(int64) != 0 {
				t.Errorf("iter %d: %s = %d", iter, k, sum.Details[k])
			}
		}
		rep := sum.Details["files"].(map[string]FileReport)["session_20250304_050607/pid_9/thread_0/index.atf"]
		wantRec := map[fileShape]Recovery{shapeClean: RecoveryFooter, shapePlaceholder: RecoverySize, shapeFooterNoHeader: RecoveryEOFFooter}[th.shape]
		if rep.Recovery != wantRec || rep.Events != int64(th.written) || rep.TornBytes != int64(th.torn) {
			t.Errorf("iter %d (%s): file report %+v, want %s %d torn %d", iter, th.shape, rep, wantRec, th.written, th.torn)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// TestRandomSessionsOnDisk imports random multi-thread sessions written to
// a session directory.
func TestRandomSessionsOnDisk(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2024, 12, 31, 23, 59, 58, 0, time.UTC).UnixNano()
	for iter := range 20 {
		s := genSessionModel(r, 1+r.IntN(4), iter%3 != 0)
		dir := filepath.Join(t.TempDir(), "trace", "session_20241231_235958", fmt.Sprintf("pid_%d", 100+iter))
		var minTS uint64 = ^uint64(0)
		var events int64
		for _, th := range s.threads {
			td := filepath.Join(dir, fmt.Sprintf("thread_%d", th.num))
			writeFile(t, filepath.Join(td, IndexFileName), th.index)
			if th.detail != nil {
				writeFile(t, filepath.Join(td, DetailFileName), th.detail)
			}
			if lo, ok := th.minTS(); ok {
				minTS = min(minTS, lo)
			}
			events += int64(th.written)
		}
		if iter%3 != 0 {
			writeFile(t, filepath.Join(dir, ManifestFileName), s.manifest())
		} else {
			s.names = nil
		}
		// Import from the bundle root: discovery walks down to the threads.
		root := filepath.Dir(filepath.Dir(dir))
		byThread := map[string][]*trace.Span{}
		sum, err := Import(context.Background(), root, ingest.Options{}, func(sp *trace.Span) error {
			v, _ := sp.Attrs.Get("thread")
			byThread[v.Str] = append(byThread[v.Str], sp)
			return nil
		})
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if sum.Events != events || sum.Details["threads"].(int64) != int64(len(s.threads)) {
			t.Errorf("iter %d: events %d want %d, threads %v", iter, sum.Events, events, sum.Details["threads"])
		}
		for _, th := range s.threads {
			checkThread(t, th, s.names, byThread[fmt.Sprintf("thread_%d", th.num)], base, minTS)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// writeSession writes a generated session under dir and returns dir.
func writeSession(t testing.TB, dir string, s *genSession) {
	for _, th := range s.threads {
		td := filepath.Join(dir, fmt.Sprintf("thread_%d", th.num))
		writeFile(t, filepath.Join(td, IndexFileName), th.index)
		if th.detail != nil {
			writeFile(t, filepath.Join(td, DetailFileName), th.detail)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFileName), s.manifest(), 0o644); err != nil {
		t.Fatal(err)
	}
}
