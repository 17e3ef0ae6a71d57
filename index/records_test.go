package index

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func sampleRecords() []traceRec {
	id := [16]byte{0xab, 1, 2}
	refs := []SpanRef{
		{SpanID: 10, ParentID: 0, ChunkNum: 0, Loc: Location{ChunkOffset: 16, Index: 0}, StartNS: 1_700_000_000_000_000_000, DurationNS: 5_000_000},
		{SpanID: 11, ParentID: 10, ChunkNum: 0, Loc: Location{ChunkOffset: 16, Index: 1}, StartNS: 1_700_000_000_000_123_000, DurationNS: 1_000, Error: true},
		{SpanID: 12, ParentID: 13, ChunkNum: 2, Loc: Location{ChunkOffset: 9000, Index: 7}, StartNS: 1_699_999_999_999_999_999, DurationNS: 0},
		{SpanID: 13, ParentID: 0xdeadbeef, ChunkNum: 1, Loc: Location{ChunkOffset: 9000, Index: 8}, StartNS: math.MinInt64 / 2, DurationNS: -7},
		{SpanID: 10, ParentID: 0, ChunkNum: 1, Loc: Location{ChunkOffset: math.MaxInt64, Index: math.MaxUint32}, StartNS: math.MaxInt64 / 2, DurationNS: math.MaxInt64},
	}
	seqs := []uint64{5, 6, 9, 10, 1 << 40}
	recs := make([]traceRec, len(refs))
	for i := range refs {
		refs[i].TraceID = id
		recs[i] = traceRec{ref: refs[i], seq: seqs[i]}
	}
	return recs
}

func TestTraceRecordsRoundTrip(t *testing.T) {
	recs := sampleRecords()
	id := recs[0].ref.TraceID
	// Two operands, as two batches write them.
	val := appendTraceOperand(nil, recs[:2])
	val = appendTraceOperand(val, recs[2:])
	got, err := decodeTraceValue(val, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, recs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, recs)
	}
	// Every truncation is an error naming the trace, never a panic.
	for n := 1; n < len(val); n++ {
		if n == len(appendTraceOperand(nil, recs[:2])) {
			continue // a whole first operand is a valid value
		}
		if _, err := decodeTraceValue(val[:n], id, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
}

func TestTraceRecordsRejectHostileInput(t *testing.T) {
	id := [16]byte{1}
	cases := []struct {
		name string
		val  []byte
	}{
		{"huge count", []byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"zero count", []byte{0, 0}},
		{"follower flag on first record", append([]byte{0, 1, recNextSeq}, make([]byte, 12)...)},
		{"both parent kinds", append([]byte{0, 1, recParentMask}, make([]byte, 12)...)},
		{"parent ref to self", append(append([]byte{0, 1, recParentRef | recChunkZero}, make([]byte, 8)...), 0, 0, 0, 0, 0)},
		{"chunk number overflow", append(append([]byte{0, 1, 0}, make([]byte, 8)...), 0xff, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeTraceValue(tc.val, id, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestColumnRoundTripAndCorruption(t *testing.T) {
	entries := []colEntry{{100, 3}, {90, colError | 5}, {1 << 62, 0}, {-5, 63}}
	val := appendColumnOperand(nil, 0, entries[:2])
	val = appendColumnOperand(val, 2, entries[2:])
	var col column
	if err := decodeColumn(val, 7, 64, 4, &col); err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if col.start[i] != e.start || col.flags[i] != e.flags {
			t.Fatalf("entry %d: got %d/%x want %+v", i, col.start[i], col.flags[i], e)
		}
	}
	// A view older than the last operand ignores it.
	if err := decodeColumn(val, 7, 64, 2, &col); err != nil || len(col.start) != 2 {
		t.Fatalf("partial view: %v", err)
	}
	for _, tc := range []struct {
		name string
		val  []byte
		n    uint32
	}{
		{"missing entries", val[:len(appendColumnOperand(nil, 0, entries[:2]))], 4},
		{"beyond block", appendColumnOperand(nil, 63, entries[:2]), 64},
		{"truncated", val[:len(val)-1], 4},
		{"count beyond input", []byte{0, 100, 1, 1}, 4},
	} {
		if err := decodeColumn(tc.val, 7, 64, tc.n, &col); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: got %v", tc.name, err)
		}
	}
}

func TestSeqGroupAndSummary(t *testing.T) {
	a, b := [16]byte{1}, [16]byte{2}
	val := appendSeqOperand(nil, 0, []traceRun{{a, 3}, {b, 2}})
	val = appendSeqOperand(val, 5, []traceRun{{a, 59}})
	var g seqGroup
	if err := decodeSeqGroup(val, 3, &g); err != nil {
		t.Fatal(err)
	}
	if g.present != math.MaxUint64 || g.ids[2] != a || g.ids[3] != b || g.ids[63] != a {
		t.Fatalf("decoded %+v", g.present)
	}
	if err := decodeSeqGroup(appendSeqOperand(nil, 60, []traceRun{{a, 5}}), 3, &g); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("run past the group: %v", err)
	}

	s := blockSummary{minStart: -3, maxStart: 1 << 60, n: 17}
	got, err := decodeSummary(appendSummary(nil, s), 1, 64)
	if err != nil || got != s {
		t.Fatalf("summary round trip: %+v %v", got, err)
	}
	for _, bad := range []blockSummary{{0, 0, 0}, {5, 4, 1}, {0, 0, 65}} {
		if _, err := decodeSummary(appendSummary(nil, bad), 1, 64); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("summary %+v accepted: %v", bad, err)
		}
	}
	if _, err := decodeSummary(append(appendSummary(nil, s), 0), 1, 64); !errors.Is(err, ErrCorrupt) {
		t.Fatal("trailing bytes accepted")
	}
}

func FuzzDecodeTraceValue(f *testing.F) {
	recs := sampleRecords()
	f.Add(appendTraceOperand(nil, recs))
	f.Add(appendTraceOperand(appendTraceOperand(nil, recs[:1]), recs[1:3]))
	f.Add([]byte{0, 1, recParentRef, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, val []byte) {
		id := [16]byte{9}
		got, err := decodeTraceValue(val, id, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if len(got) > len(val)/minRecordBytes+1 {
			t.Fatalf("%d records from %d bytes", len(got), len(val))
		}
		for _, r := range got {
			if r.ref.TraceID != id {
				t.Fatal("trace id not set")
			}
		}
	})
}

func FuzzDecodeColumn(f *testing.F) {
	f.Add(appendColumnOperand(nil, 0, []colEntry{{1, 2}, {3, 4}}), uint16(2))
	f.Add(appendColumnOperand(appendColumnOperand(nil, 1, []colEntry{{5, 0}}), 0, []colEntry{{-1, 0x85}}), uint16(2))
	f.Fuzz(func(t *testing.T, val []byte, n uint16) {
		var col column
		n %= 4097
		err := decodeColumn(val, 1, 4096, uint32(n), &col)
		if err == nil && (len(col.start) != int(n) || len(col.flags) != int(n)) {
			t.Fatalf("decoded %d entries, want %d", len(col.start), n)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error without ErrCorrupt: %v", err)
		}
	})
}

func FuzzDecodeSeqGroup(f *testing.F) {
	f.Add(appendSeqOperand(nil, 0, []traceRun{{[16]byte{1}, 64}}))
	f.Add(appendSeqOperand(appendSeqOperand(nil, 3, []traceRun{{[16]byte{1}, 2}}), 0, []traceRun{{[16]byte{2}, 1}}))
	f.Fuzz(func(t *testing.T, val []byte) {
		var g seqGroup
		if err := decodeSeqGroup(val, 1, &g); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error without ErrCorrupt: %v", err)
		}
	})
}

func FuzzDecodeSummary(f *testing.F) {
	f.Add(appendSummary(nil, blockSummary{1, 2, 3}))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, val []byte) {
		s, err := decodeSummary(val, 1, 4096)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if s.n == 0 || s.n > 4096 || s.minStart > s.maxStart {
			t.Fatalf("accepted %+v", s)
		}
	})
}

func FuzzReadOrdered(f *testing.F) {
	f.Add(appendOrdered(nil, 0))
	f.Add(appendOrdered(nil, 1<<40))
	f.Add([]byte{9, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, ok := readOrdered(b)
		if !ok {
			return
		}
		if n > len(b) || string(appendOrdered(nil, v)) != string(b[:n]) {
			t.Fatalf("readOrdered(%x) = %d, %d: not canonical", b, v, n)
		}
	})
}

func TestRowsRoundTripAndCorruption(t *testing.T) {
	rows := []row{{attrs: []KV{{1, 2}, {3, 1 << 40}}, texts: []uint64{7, 8}}, {}, {texts: []uint64{9}}}
	val := appendRowsOperand(nil, 0, rows[:1])
	val = appendRowsOperand(val, 1, rows[1:])
	var got []row
	var offs []uint32
	err := decodeRows(val, 3, 64, 3, func(off uint32, r row) {
		offs = append(offs, off)
		got = append(got, row{attrs: slices.Clone(r.attrs), texts: slices.Clone(r.texts)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(offs, []uint32{0, 1, 2}) || len(got) != 3 || !slices.Equal(got[0].attrs, rows[0].attrs) || !slices.Equal(got[2].texts, rows[2].texts) {
		t.Fatalf("round trip: %v %+v", offs, got)
	}
	for n := 1; n < len(val); n++ {
		if n == len(appendRowsOperand(nil, 0, rows[:1])) {
			continue
		}
		if err := decodeRows(val[:n], 3, 64, 3, func(uint32, row) {}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	if err := decodeRows([]byte{0, 1, 0xff, 0xff, 0x7f}, 3, 64, 3, func(uint32, row) {}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("huge attribute count: %v", err)
	}
}

func FuzzDecodeRows(f *testing.F) {
	f.Add(appendRowsOperand(nil, 0, []row{{attrs: []KV{{1, 2}}, texts: []uint64{3}}}), uint16(1))
	f.Add(appendRowsOperand(appendRowsOperand(nil, 2, []row{{}}), 0, []row{{}, {texts: []uint64{1}}}), uint16(3))
	f.Fuzz(func(t *testing.T, val []byte, n uint16) {
		n %= 4097
		err := decodeRows(val, 1, 4096, uint32(n), func(off uint32, r row) {
			if off >= uint32(n) {
				t.Fatalf("row at offset %d beyond %d", off, n)
			}
		})
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error without ErrCorrupt: %v", err)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	f.Add(appendState(nil, state{spans: 100, traces: 10, watermark: 5, tail: blockSummary{1, 2, 100 % 64}}), uint8(6))
	f.Add(appendState(nil, state{spans: 64}), uint8(6))
	f.Fuzz(func(t *testing.T, val []byte, shift uint8) {
		shift = MinBlockShift + shift%(MaxBlockShift-MinBlockShift+1)
		s, err := decodeState(val, 1<<shift)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if s.traces > s.spans || s.tail.n != uint32(s.spans%(1<<shift)) {
			t.Fatalf("accepted %+v", s)
		}
	})
}
