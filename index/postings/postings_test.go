package postings

import (
	"errors"
	"math/rand/v2"
	"slices"
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
		if err != nil {
			return
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
