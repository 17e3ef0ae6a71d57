package atf

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// flatEvents returns n alternating call/return events of function 1.
func flatEvents(n int) []IndexEvent {
	ev := make([]IndexEvent, n)
	for i := range ev {
		ev[i] = IndexEvent{TimestampNS: uint64(100 + 10*i), FunctionID: 1, Kind: KindCall + uint32(i%2), Depth: 1, DetailSeq: NoDetail}
	}
	return ev
}

func TestIndexLayoutRecovery(t *testing.T) {
	withFooterOffset := func(b []byte, off uint64) []byte {
		binary.LittleEndian.PutUint64(b[40:], off)
		return b
	}
	gap := func() []byte {
		// events_offset 128: 64 unused bytes after the header.
		b := buildIndex(indexOpts{}, flatEvents(4))
		out := append([]byte{}, b[:HeaderSize]...)
		out = append(out, make([]byte, 64)...)
		out = append(out, b[HeaderSize:]...)
		binary.LittleEndian.PutUint64(out[32:], 128)
		binary.LittleEndian.PutUint64(out[40:], 128+4*32)
		return out
	}
	cases := []struct {
		name     string
		data     []byte
		recovery Recovery
		count    int64
		torn     int64
		clamped  bool
	}{
		{"clean", buildIndex(indexOpts{}, flatEvents(6)), RecoveryFooter, 6, 0, false},
		{"empty clean", buildIndex(indexOpts{}, nil), RecoveryFooter, 0, 0, false},
		{"header 100 footer 50", buildIndex(indexOpts{footerCount: 50, footerCountSet: true}, flatEvents(100)), RecoveryFooter, 50, 50 * 32, false},
		{"footer beyond capacity", buildIndex(indexOpts{footerCount: 1 << 40, footerCountSet: true}, flatEvents(3)), RecoveryFooter, 3, 0, true},
		{"footer count overflow", buildIndex(indexOpts{footerCount: ^uint64(0), footerCountSet: true}, flatEvents(3)), RecoveryFooter, 3, 0, true},
		{"placeholder torn", buildIndex(indexOpts{shape: shapePlaceholder, torn: make([]byte, 10)}, flatEvents(4)), RecoverySize, 4, 10, false},
		{"placeholder empty", buildIndex(indexOpts{shape: shapePlaceholder}, nil), RecoverySize, 0, 0, false},
		{"placeholder 31 torn", buildIndex(indexOpts{shape: shapePlaceholder, torn: make([]byte, 31)}, nil), RecoverySize, 0, 31, false},
		{"footer without header", buildIndex(indexOpts{shape: shapeFooterNoHeader}, flatEvents(3)), RecoveryEOFFooter, 3, 0, false},
		{"footer offset at garbage", withFooterOffset(buildIndex(indexOpts{}, flatEvents(4)), 96), RecoveryEOFFooter, 4, 0, false},
		{"footer offset beyond file", withFooterOffset(buildIndex(indexOpts{}, flatEvents(4)), 1<<62), RecoveryEOFFooter, 4, 0, false},
		{"footer offset misaligned", withFooterOffset(buildIndex(indexOpts{}, flatEvents(4)), 65), RecoveryEOFFooter, 4, 0, false},
		{"trailing bytes after footer", append(buildIndex(indexOpts{}, flatEvents(2)), 1, 2, 3), RecoveryFooter, 2, 3, false},
		{"events offset gap", gap(), RecoveryFooter, 4, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseIndex("index.atf", c.data)
			if err != nil {
				t.Fatal(err)
			}
			if f.Recovery != c.recovery || f.Count != c.count || f.TornBytes != c.torn || f.Clamped != c.clamped || int64(len(f.Events)) != c.count {
				t.Errorf("got %s count %d torn %d clamped %v; want %s %d %d %v",
					f.Recovery, f.Count, f.TornBytes, f.Clamped, c.recovery, c.count, c.torn, c.clamped)
			}
			for i, e := range f.Events {
				if e.TimestampNS != uint64(100+10*i) || e.Kind != KindCall+uint32(i%2) {
					t.Errorf("event %d = %+v", i, e)
					break
				}
			}
		})
	}
}

func TestIndexHeaderErrors(t *testing.T) {
	good := buildIndex(indexOpts{}, flatEvents(2))
	mut := func(off int, v ...byte) []byte {
		b := append([]byte{}, good...)
		copy(b[off:], v)
		return b
	}
	cases := []struct {
		name   string
		data   []byte
		err    error
		offset int64
		msg    string
	}{
		{"empty", nil, ErrTruncated, 0, "0 bytes"},
		{"short", good[:32], ErrTruncated, 0, "32 bytes"},
		{"magic", mut(0, 'A', 'T', 'D', '2'), ErrNotATF, 0, "magic"},
		{"big endian", mut(4, 0), ErrUnsupported, 4, "endian"},
		{"version 99", mut(5, 99), ErrUnsupported, 5, "version 99"},
		{"event size 64", mut(24, 64), ErrUnsupported, 24, "event size 64"},
		{"events offset 0", mut(32, 0), ErrCorrupt, 32, "events offset 0"},
		{"events offset beyond file", mut(32, 0, 0, 0, 0, 0, 0, 0, 1), ErrCorrupt, 32, "outside the file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseIndex("thread_0/index.atf", c.data)
			var fe *FormatError
			if !errors.Is(err, c.err) || !errors.As(err, &fe) || fe.Offset != c.offset || !strings.Contains(err.Error(), c.msg) ||
				!strings.Contains(err.Error(), "thread_0/index.atf") {
				t.Errorf("err = %v; want %v at offset %d mentioning %q", err, c.err, c.offset, c.msg)
			}
			if Sniff(c.data) && errors.Is(err, ErrNotATF) {
				t.Errorf("Sniff accepted a bad magic")
			}
		})
	}
}

func detailOf(recs ...detailRec) []byte { return buildDetail(false, ArchARM64, 0, recs, nil) }

func TestDetailWalk(t *testing.T) {
	rec := func(seq uint32, n int) detailRec {
		return detailRec{eventType: DetailFunctionCall, indexSeq: seq, ts: uint64(seq), payload: make([]byte, n)}
	}
	clean := detailOf(rec(0, 516), rec(1, 76), rec(2, 0))
	crashed := buildDetail(true, ArchARM64, 0, []detailRec{rec(0, 516), rec(1, 10)}, nil)
	tooShort := buildDetail(true, ArchARM64, 0, []detailRec{rec(0, 16)}, binary.LittleEndian.AppendUint32(nil, 23))
	overrun := buildDetail(true, ArchARM64, 0, []detailRec{rec(0, 16)}, append(binary.LittleEndian.AppendUint32(nil, 540), make([]byte, 100)...))
	badFooter := detailOf(rec(0, 16), rec(1, 16))
	binary.LittleEndian.PutUint64(badFooter[len(badFooter)-56:], 7) // footer count 7, 2 records
	cases := []struct {
		name     string
		data     []byte
		n        int
		recovery Recovery
		torn     int64
		lengths  []uint32
	}{
		{"clean", clean, 3, RecoveryFooter, 0, []uint32{540, 100, 24}},
		{"crashed", crashed, 2, RecoveryWalk, 0, []uint32{540, 34}},
		{"length below header", tooShort, 1, RecoveryWalk, 4, []uint32{40}},
		{"torn record", overrun, 1, RecoveryWalk, 104, []uint32{40}},
		{"footer disagrees", badFooter, 2, RecoveryWalk, 0, []uint32{40, 40}},
		{"header only", buildDetail(true, ArchARM64, 0, nil, nil), 0, RecoveryWalk, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDetail("detail.atf", c.data)
			if err != nil {
				t.Fatal(err)
			}
			if d.Len() != c.n || d.Recovery != c.recovery || d.TornBytes != c.torn {
				t.Errorf("got %d records %s torn %d; want %d %s %d", d.Len(), d.Recovery, d.TornBytes, c.n, c.recovery, c.torn)
			}
			for i, l := range c.lengths {
				r, ok := d.Record(uint32(i))
				if !ok || r.Length != l || r.IndexSeq != uint32(i) || len(r.Payload) != int(l)-DetailRecordHeaderSize {
					t.Errorf("record %d = %+v", i, r)
				}
			}
			if _, ok := d.Record(uint32(c.n)); ok {
				t.Errorf("record %d beyond the end found", c.n)
			}
		})
	}
	for _, c := range []struct {
		name   string
		data   []byte
		err    error
		offset int64
	}{
		{"short", clean[:40], ErrTruncated, 0},
		{"magic", append([]byte("ATI2"), clean[4:]...), ErrNotATF, 0},
		{"endian", append(append([]byte{}, clean[:4]...), append([]byte{2}, clean[5:]...)...), ErrUnsupported, 4},
		{"version", append(append([]byte{}, clean[:5]...), append([]byte{3}, clean[6:]...)...), ErrUnsupported, 5},
		{"events offset", append(append([]byte{}, clean[:20]...), append([]byte{0xff, 0xff, 0xff}, clean[23:]...)...), ErrCorrupt, 20},
	} {
		_, err := ParseDetail("detail.atf", c.data)
		var fe *FormatError
		if !errors.Is(err, c.err) || !errors.As(err, &fe) || fe.Offset != c.offset {
			t.Errorf("%s: err = %v, want %v at %d", c.name, err, c.err, c.offset)
		}
	}
}

func TestDecodePayloadLayouts(t *testing.T) {
	regs := [8]uint64{1, 2, 3, 4, 5, 6, 7, 8}
	d := DecodePayload(documentedPayload(0xabc, regs, 9, 10, 11, []byte{0xde, 0xad}))
	if d.Layout != LayoutDocumented || d.FunctionID != 0xabc || d.Regs != regs || d.LR != 9 || d.FP != 10 || d.SP != 11 || string(d.Stack) != "\xde\xad" {
		t.Errorf("documented: %+v", d)
	}
	// A stack_size that overruns the payload, or exceeds 256: raw.
	bad := documentedPayload(1, regs, 0, 0, 0, nil)
	binary.LittleEndian.PutUint16(bad[96:], 5)
	if d := DecodePayload(bad); d.Layout != LayoutRaw {
		t.Errorf("overrunning stack: %s", d.Layout)
	}
	if d := DecodePayload(make([]byte, 50)); d.Layout != LayoutRaw {
		t.Errorf("50 bytes: %s", d.Layout)
	}
	// Drain layout: stack_size beyond 128 is clamped to the snapshot area.
	p := drainPayload(1, 2, 3, KindCall, 1, regs, 4, 5, 6, nil)
	binary.LittleEndian.PutUint32(p[248:], 4000)
	if d := DecodePayload(p); d.Layout != LayoutDrain || len(d.Stack) != 128 || d.OSThreadID != 3 || d.LR != 4 {
		t.Errorf("drain: %+v", d)
	}
}

// decodeEvents runs DecodeThread on events (and detail records) and
// returns the summary and spans.
func decodeEvents(t *testing.T, arch uint8, ev []IndexEvent, recs []detailRec) (*ingest.Summary, []*trace.Span) {
	t.Helper()
	in := ThreadInput{Name: "session_20250101_000000/pid_1/thread_0/index.atf", Index: buildIndex(indexOpts{arch: arch}, ev)}
	if recs != nil {
		in.Detail = buildDetail(false, arch, 0, recs, nil)
	}
	var spans []*trace.Span
	sum, err := DecodeThread(context.Background(), in, ingest.Options{}, func(s *trace.Span) error {
		if err := s.Validate(); err != nil {
			t.Errorf("invalid span: %v", err)
		}
		spans = append(spans, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum, spans
}

func ev(ts uint64, fid uint64, kind, depth uint32) IndexEvent {
	return IndexEvent{TimestampNS: ts, FunctionID: fid, Kind: kind, Depth: depth, DetailSeq: NoDetail}
}

func linkedEv(ts uint64, fid uint64, kind, depth, det uint32) IndexEvent {
	e := ev(ts, fid, kind, depth)
	e.DetailSeq = det
	return e
}

func TestBuilderEdgeCases(t *testing.T) {
	const f, g, h = 0x100000001, 0x100000002, 0x100000003
	type want struct {
		shapes                                     []string
		orphans, invalid, unmatched, crashed, errs int64
	}
	cases := []struct {
		name string
		ev   []IndexEvent
		want want
	}{
		{"orphan return", []IndexEvent{ev(10, f, KindReturn, 1)}, want{orphans: 1}},
		{"orphan exception", []IndexEvent{ev(10, f, KindException, 1)}, want{orphans: 1}},
		{"return closes unreturned callee",
			[]IndexEvent{ev(10, f, KindCall, 1), ev(20, g, KindCall, 2), ev(30, f, KindReturn, 1)},
			want{shapes: []string{"f(0+20)[g(10+10)]"}, unmatched: 1}},
		{"return of a callee that is not open",
			[]IndexEvent{ev(10, f, KindCall, 1), ev(15, h, KindReturn, 2), ev(30, f, KindReturn, 1)},
			want{shapes: []string{"f(0+20)"}, orphans: 1}},
		{"exception marks the open call",
			[]IndexEvent{ev(10, f, KindCall, 1), ev(20, g, KindCall, 2), ev(25, f, KindException, 1), ev(30, g, KindReturn, 2), ev(40, f, KindReturn, 1)},
			want{shapes: []string{"f(0+30)X[g(10+10)]"}, errs: 1}},
		{"exception of an unknown function marks the innermost call",
			[]IndexEvent{ev(10, f, KindCall, 1), ev(20, g, KindCall, 2), ev(25, h, KindException, 3), ev(30, g, KindReturn, 2), ev(40, f, KindReturn, 1)},
			want{shapes: []string{"f(0+30)[g(10+10)X]"}, errs: 1}},
		{"unknown kind", []IndexEvent{ev(10, f, KindCall, 1), ev(15, f, 9, 1), ev(20, f, KindReturn, 1)},
			want{shapes: []string{"f(0+10)"}, invalid: 1}},
		{"unsorted, recursion",
			[]IndexEvent{ev(40, f, KindReturn, 1), ev(20, f, KindCall, 2), ev(10, f, KindCall, 1), ev(30, f, KindReturn, 2), ev(50, g, KindCall, 1), ev(50, g, KindReturn, 1)},
			want{shapes: []string{"f(0+30)[f(10+10)]", "g(0+0)"}}},
		{"crash closes at the last timestamp",
			[]IndexEvent{ev(10, f, KindCall, 1), ev(20, g, KindCall, 2), ev(30, g, KindReturn, 2), ev(35, h, KindCall, 2)},
			want{shapes: []string{"f(0+25)![g(10+10),h(25+0)!]"}, crashed: 2}},
	}
	names := map[uint64]string{f: "f", g: "g", h: "h"}
	var render func(r *trace.Record) string
	render = func(r *trace.Record) string {
		s := names[uint64(mustFID(t, r))] + "(" + itoa(r.StartNS) + "+" + itoa(r.DurationNS) + ")"
		if v, ok := r.Attrs.Get("atf.crashed"); ok && v.Bool {
			s += "!"
		}
		if r.Exception != nil {
			s += "X"
		}
		if len(r.Children) > 0 {
			var kids []string
			for _, c := range r.Children {
				kids = append(kids, render(c))
			}
			s += "[" + strings.Join(kids, ",") + "]"
		}
		return s
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sum, spans := decodeEvents(t, ArchARM64, c.ev, nil)
			var got []string
			var errs int64
			for _, s := range spans {
				got = append(got, render(s.Root))
				errs += s.Errors
				if s.Error != (s.Errors > 0) {
					t.Errorf("span Error flag %v with %d errors", s.Error, s.Errors)
				}
			}
			if strings.Join(got, " ") != strings.Join(c.want.shapes, " ") {
				t.Errorf("spans %q, want %q", got, c.want.shapes)
			}
			d := sum.Details
			if d["orphan_events"].(int64) != c.want.orphans || d["invalid_events"].(int64) != c.want.invalid ||
				d["unmatched_calls"].(int64) != c.want.unmatched || d["crashed_calls"].(int64) != c.want.crashed || errs != c.want.errs {
				t.Errorf("details %v, errors %d; want %+v", d, errs, c.want)
			}
			if sum.Events != int64(len(c.ev)) {
				t.Errorf("events %d, want %d", sum.Events, len(c.ev))
			}
		})
	}
}

func mustFID(t *testing.T, r *trace.Record) uint64 {
	v, ok := r.Attrs.Get("atf.function_id")
	if !ok {
		t.Fatalf("record without atf.function_id")
	}
	var fid uint64
	for _, c := range v.Str[2:] {
		fid = fid<<4 | uint64(strings.IndexRune("0123456789abcdef", c))
	}
	return fid
}

func TestDeepRecursionIsElided(t *testing.T) {
	const depth = trace.MaxDepth + 5
	var evs []IndexEvent
	for i := range depth {
		evs = append(evs, ev(uint64(i), 7, KindCall, uint32(i+1)))
	}
	evs = append(evs, ev(depth+1, 7, KindException, depth)) // in an elided call
	for i := depth - 1; i >= 0; i-- {
		evs = append(evs, ev(uint64(2*depth-i), 7, KindReturn, uint32(i+1)))
	}
	sum, spans := decodeEvents(t, ArchARM64, evs, nil)
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Recs != trace.MaxDepth || s.Calls != depth || sum.Details["calls_elided"].(int64) != 5 || sum.Records != trace.MaxDepth {
		t.Errorf("recs %d calls %d elided %v", s.Recs, s.Calls, sum.Details["calls_elided"])
	}
	deepest := s.Root
	for len(deepest.Children) > 0 {
		deepest = deepest.Children[0]
	}
	if v, _ := deepest.Attrs.Get("atf.calls_elided"); v.Int != 5 || deepest.Exception == nil {
		t.Errorf("deepest record: %v %v", deepest.Attrs, deepest.Exception)
	}
}

func TestDetailAttributes(t *testing.T) {
	regs := [8]uint64{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7}
	evs := []IndexEvent{
		linkedEv(10, 1, KindCall, 1, 0),
		linkedEv(15, 1, KindException, 1, 1),
		linkedEv(20, 1, KindReturn, 1, 2),
		linkedEv(30, 2, KindCall, 1, 3),   // raw payload
		linkedEv(40, 2, KindReturn, 1, 9), // no such record
	}
	recs := []detailRec{
		{DetailFunctionCall, 0, 0, 10, documentedPayload(1, regs, 0xb0, 0xb1, 0xb2, []byte{1, 2, 3})},
		{DetailFunctionCall, 1, 0, 15, drainPayload(15, 1, 0x77, KindException, 1, regs, 0, 0, 0, nil)},
		{DetailFunctionReturn, 2, 0, 20, drainPayload(20, 1, 0x77, KindReturn, 1, [8]uint64{0x42}, 0, 0, 0xb2, nil)},
		{DetailFunctionCall, 3, 0, 30, []byte("hello")},
		{DetailFunctionCall, 0, 0, 30, nil}, // back link to an event linked elsewhere
	}
	for _, c := range []struct {
		arch uint8
		want map[string]int64
		none []string
	}{
		{ArchX8664, map[string]int64{"atf.reg.rdi": 0xa0, "atf.reg.r9": 0xa5, "atf.reg.rbp": 0xa6, "atf.reg.rsp": 0xa7,
			"atf.ret.reg.rax": 0x42, "atf.ret.reg.rsp": 0xb2, "atf.exc.reg.rdi": 0xa0, "atf.exc.os_thread_id": 0x77, "atf.exc.detail_seq": 1},
			[]string{"atf.reg.x0", "atf.reg.lr", "atf.ret.reg.rdi"}},
		{ArchARM64, map[string]int64{"atf.reg.x0": 0xa0, "atf.reg.x7": 0xa7, "atf.reg.lr": 0xb0, "atf.reg.fp": 0xb1, "atf.reg.sp": 0xb2,
			"atf.ret.reg.x0": 0x42, "atf.ret.reg.sp": 0xb2, "atf.detail_seq": 0, "atf.ret.detail_seq": 2, "atf.ret.index_seq": 2},
			[]string{"atf.reg.rdi", "atf.ret.reg.x1", "atf.os_thread_id"}},
	} {
		sum, spans := decodeEvents(t, c.arch, evs, recs)
		if len(spans) != 2 {
			t.Fatalf("%d spans", len(spans))
		}
		a := spans[0].Root.Attrs
		for k, w := range c.want {
			if v, ok := a.Get(k); !ok || v.Int != w {
				t.Errorf("%s: %s = %v, want %#x", ArchName(c.arch), k, v, w)
			}
		}
		for _, k := range c.none {
			if _, ok := a.Get(k); ok {
				t.Errorf("%s: unexpected %s", ArchName(c.arch), k)
			}
		}
		if v, _ := a.Get("atf.stack"); v.Str != "010203" {
			t.Errorf("stack %q", v.Str)
		}
		if v, _ := spans[1].Root.Attrs.Get("atf.detail_raw"); v.Str != "68656c6c6f" {
			t.Errorf("raw payload %q", v.Str)
		}
		if sum.Details["link_errors"].(int64) != 1 || sum.Details["unlinked_details"].(int64) != 1 {
			t.Errorf("link errors %v, unlinked %v", sum.Details["link_errors"], sum.Details["unlinked_details"])
		}
	}
}

// TestHostileLookupsSwitchToIndexedMode: returns and exceptions that make
// the builder scan a deep stack switch it to the O(1) function index, and
// the result is the same as the scanning mode's.
func TestHostileLookupsSwitchToIndexedMode(t *testing.T) {
	const depth, orphans, exceptions = 3000, 50000, 1000
	var evs []IndexEvent
	ts := uint64(0)
	add := func(fid uint64, kind uint32) {
		ts++
		evs = append(evs, ev(ts, fid, kind, 0))
	}
	for i := range depth {
		add(uint64(i), KindCall)
	}
	for range orphans {
		add(1<<40, KindReturn)
	}
	for range exceptions {
		add(0, KindException)
	}
	add(10, KindReturn) // closes 11..depth-1 unmatched
	add(10, KindCall)
	add(10, KindReturn)
	add(0, KindReturn) // closes 1..9 unmatched
	idx, err := ParseIndex("index.atf", buildIndex(indexOpts{}, evs))
	if err != nil {
		t.Fatal(err)
	}
	var spans []*trace.Span
	b := &threadBuilder{ctx: context.Background(), thread: &Thread{Name: "thread_0", Index: idx},
		emit: func(s *trace.Span) error { spans = append(spans, s); return nil }}
	if err := b.build(orderEvents(idx.Events)); err != nil {
		t.Fatal(err)
	}
	if !b.indexed {
		t.Errorf("builder did not switch to indexed mode")
	}
	if len(spans) != 1 || b.stats.OrphanEvents != orphans || b.stats.UnmatchedCalls != depth-11+9 || b.stats.CallsElided != depth-trace.MaxDepth {
		t.Fatalf("spans %d, stats %+v", len(spans), b.stats)
	}
	root := spans[0].Root
	if v, _ := root.Attrs.Get("atf.exceptions"); root.Exception == nil || v.Int != exceptions {
		t.Errorf("root exceptions: %v %v", root.Exception, v)
	}
	if err := spans[0].Validate(); err != nil {
		t.Error(err)
	}
	// f9 holds f10 twice: the one closed by its return and the new call.
	f9 := root
	for range 9 {
		f9 = f9.Children[0]
	}
	if len(f9.Children) != 2 || f9.Children[1].DurationNS != 1 || len(f9.Children[1].Children) != 0 {
		t.Errorf("f9 children: %d", len(f9.Children))
	}
}
