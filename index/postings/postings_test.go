package postings

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestAppendDecodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name string
		offs []uint32
		kind byte
	}{
		{"single", []uint32{7}, kindList},
		{"zero", []uint32{0}, kindList},
		{"sparse", []uint32{3, 900, 4000}, kindList},
		{"dense run", seq(100, 1100), kindBitmap},
		{"every other", evens(0, 4096), kindBitmap},
		{"last offset", []uint32{4095}, kindList},
	}
	var random []uint32
	for o := uint32(0); o < 4096; o++ {
		if rng.IntN(10) == 0 {
			random = append(random, o)
		}
	}
	cases = append(cases, struct {
		name string
		offs []uint32
		kind byte
	}{"random 10%", random, 0})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			enc := Append(nil, tc.offs)
			if tc.kind != 0 && enc[0] != tc.kind {
				t.Errorf("kind 0x%02x, want 0x%02x", enc[0], tc.kind)
			}
			got, err := Decode(enc, 4096, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.offs) {
				t.Fatalf("round trip: got %v want %v", got, tc.offs)
			}
			if len(enc) > 2*len(tc.offs)+12 {
				t.Errorf("%d offsets took %d bytes", len(tc.offs), len(enc))
			}
		})
	}
}

func TestDecodeUnionsOperands(t *testing.T) {
	// In order (appended batches), out of order and overlapping (merges).
	a, b, c := []uint32{1, 5, 9}, seq(10, 200), []uint32{0, 5, 7, 300}
	val := Append(Append(Append(nil, a), b), c)
	got, err := Decode(val, 4096, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Union(Union(a, b), c)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	compact, err := Compact(nil, val, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Decode(compact, 4096, nil); !slices.Equal(again, want) || len(compact) >= len(val) {
		t.Fatalf("compact: %d bytes (from %d), decodes to %v", len(compact), len(val), again)
	}
	if got := Intersect(slices.Clone(want), []uint32{5, 6, 7, 250, 301}); !slices.Equal(got, []uint32{5, 7}) {
		t.Fatalf("intersect: %v", got)
	}
}

func TestDecodeRejectsCorruption(t *testing.T) {
	good := Append(nil, []uint32{1, 2, 3})
	cases := []struct {
		name string
		val  []byte
	}{
		{"unknown kind", []byte{0x09, 1, 1}},
		{"truncated count", []byte{kindList}},
		{"truncated delta", []byte{kindList, 3, 1, 0}},
		{"zero count", []byte{kindList, 0, 1}},
		{"count beyond input", []byte{kindList, 100, 1}},
		{"offset beyond block", []byte{kindList, 1, 0x80, 0x40}},
		{"delta beyond block", []byte{kindList, 2, 1, 0xff, 0x7f}},
		{"overlong varint", []byte{kindList, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"empty bitmap", []byte{kindBitmap, 0, 1, 0}},
		{"bitmap beyond input", []byte{kindBitmap, 0, 4, 1}},
		{"bitmap beyond block", []byte{kindBitmap, 0x80, 0x20, 1, 1}},
		{"garbage after good", append(slices.Clone(good), 0x01)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.val, 4096, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode(%x) = %v, want ErrCorrupt", tc.val, err)
			}
		})
	}
	if _, err := Decode(good, MaxLimit+1, nil); err == nil {
		t.Fatal("limit above MaxLimit accepted")
	}
}

func seq(from, to uint32) []uint32 {
	var s []uint32
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func evens(from, to uint32) []uint32 {
	var s []uint32
	for i := from; i < to; i += 2 {
		s = append(s, i)
	}
	return s
}

// FuzzDecode: arbitrary values never panic; whatever decodes is a sorted
// set below the limit that survives re-encoding.
func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, []uint32{1, 5, 9}), uint16(4096))
	f.Add(Append(nil, seq(0, 300)), uint16(512))
	f.Add(append(Append(nil, []uint32{40}), Append(nil, []uint32{3, 4})...), uint16(64))
	f.Add([]byte{kindBitmap, 0, 2, 0xff, 0x01}, uint16(16))
	f.Add([]byte{kindList, 0xff, 0xff, 0x03, 0}, uint16(65535))
	f.Fuzz(func(t *testing.T, val []byte, limit uint16) {
		got, err := Decode(val, uint32(limit), nil)
		// A Filter reads the same bytes: it never panics, and over a value
		// that decodes it keeps exactly the candidates in the set.
		var cands []uint32
		for o := uint32(0); o < uint32(limit); o += 1 + o%7 {
			cands = append(cands, o)
		}
		var fl Filter
		fl.Reset(slices.Clone(cands))
		ferr := fl.Add(val, uint32(limit))
		if err != nil {
			return
		}
		if ferr != nil {
			t.Fatalf("Decode accepts %x, Filter says %v", val, ferr)
		}
		if kept, want := fl.Kept(), Intersect(cands, got); !slices.Equal(kept, want) {
			t.Fatalf("filter kept %v, want %v", kept, want)
		}
		for i, o := range got {
			if o >= uint32(limit) || (i > 0 && got[i-1] >= o) {
				t.Fatalf("decoded %v: not a sorted set below %d", got, limit)
			}
		}
		again, err := Decode(Append(nil, got), uint32(limit), nil)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("re-encoding changed %v to %v (%v)", got, again, err)
		}
	})
}

func TestAppendSplitsMixedDensity(t *testing.T) {
	offs := append([]uint32{0}, seq(1000, 2001)...)
	offs = append(offs, 3000, 3500)
	enc := Append(nil, offs)
	if len(enc) > 160 {
		t.Fatalf("sparse + dense run took %d bytes", len(enc))
	}
	got, err := Decode(enc, 4096, nil)
	if err != nil || !slices.Equal(got, offs) {
		t.Fatalf("round trip failed: %v", err)
	}
}

// randomValue builds a posting value of 1–4 operands (lists and bitmaps,
// overlapping and out of order, as merges leave them) and returns it with
// the set it denotes.
func randomValue(rng *rand.Rand, limit uint32) ([]byte, []uint32) {
	var val []byte
	var set []uint32
	for range 1 + rng.IntN(4) {
		var offs []uint32
		lo := rng.Uint32N(limit)
		hi := lo + rng.Uint32N(limit-lo) + 1
		gap := 1 + rng.IntN(80) // mean gap about gap/2
		if hi-lo > 1<<14 {
			gap *= int((hi - lo) >> 14) // at most ~2,000 offsets
		}
		for o := lo + uint32(rng.IntN(gap)); o < hi; o += 1 + uint32(rng.IntN(gap)) {
			offs = append(offs, o)
		}
		if len(offs) == 0 {
			offs = []uint32{lo}
		}
		val = Append(val, offs)
		set = Union(set, offs)
	}
	return val, set
}

func TestFilterAgreesWithDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var f Filter
	for i := range 3000 {
		// Block sizes of both indexes (up to 2^16: the bit-set path)
		// and larger ones (the merging path).
		limit := uint32(1) << (4 + rng.IntN(17))
		// One or two values (a union, as a text conjunct's sources are).
		nvals := 1 + rng.IntN(2)
		var vals [][]byte
		var want []uint32
		for range nvals {
			v, set := randomValue(rng, limit)
			vals = append(vals, v)
			want = Union(want, set)
		}
		cands, _ := randomValue(rng, limit)
		cset, err := Decode(cands, limit, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(4) == 0 { // few candidates, as after a rare list
			cset = cset[:min(len(cset), 1+rng.IntN(5))]
		}
		want = Intersect(slices.Clone(cset), want)
		f.Reset(slices.Clone(cset))
		for _, v := range vals {
			if err := f.Add(v, limit); err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
		}
		if got := f.Kept(); !slices.Equal(got, want) {
			t.Fatalf("case %d: filter kept %v, want %v (candidates %v)", i, got, want, cset)
		}
	}
}

func TestFilterReportsCorruptionWithOffset(t *testing.T) {
	good := Append(nil, []uint32{1, 2, 3})
	cases := []struct {
		name  string
		val   []byte
		cands []uint32
		want  string
	}{
		{"unknown kind", append(slices.Clone(good), 0x09, 1, 1), []uint32{0, 4000}, "kind 0x09 at byte 4"},
		{"truncated delta", []byte{kindList, 3, 1, 0, 0x80}, []uint32{0, 3, 4000}, "delta at byte 4"},
		{"truncated tail past the candidates", []byte{kindList, 4, 1, 0, 0x80, 0x80}, []uint32{0, 1}, "list operand at byte 0: truncated"},
		{"offset beyond block", []byte{kindList, 1, 0x80, 0x40}, []uint32{0}, "offset 8192"},
		{"bitmap beyond input", append(slices.Clone(good), kindBitmap, 0, 4, 1), []uint32{0, 4000}, "bitmap operand at byte 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f Filter
			f.Reset(tc.cands)
			err := f.Add(tc.val, 4096)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Add(%x) = %v, want ErrCorrupt naming %q", tc.val, err, tc.want)
			}
		})
	}
}
