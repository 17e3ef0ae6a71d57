package trace

import (
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// decodeFloat reads back one encoded float through the payload decoder.
func decodeFloat(t *testing.T, b []byte) float64 {
	t.Helper()
	d := chunkDecoder{p: b, lim: DefaultLimits()}
	var v Value
	if err := d.value(&v, 1); err != nil || v.Kind != KindFloat || d.off != len(b) {
		t.Fatalf("% x: %v, kind %s, %d of %d bytes read", b, err, v.Kind, d.off, len(b))
	}
	return v.Float
}

// TestHalfFloatsExhaustive: every half-precision value encodes as itself
// (the shortest exact form) and decodes to the same value; NaNs encode as
// the canonical 0xf97e00.
func TestHalfFloatsExhaustive(t *testing.T) {
	for h := range 1 << 16 {
		f := halfToFloat64(uint16(h))
		got := appendFloat(nil, f)
		want := []byte{0xf9, byte(h >> 8), byte(h)}
		if math.IsNaN(f) {
			want = []byte{0xf9, 0x7e, 0x00}
		}
		if string(got) != string(want) {
			t.Fatalf("half 0x%04x (%v): encoded % x, want % x", h, f, got, want)
		}
		back := decodeFloat(t, got)
		if math.Float64bits(back) != math.Float64bits(f) && !(math.IsNaN(f) && math.IsNaN(back)) {
			t.Fatalf("half 0x%04x: %v decoded as %v", h, f, back)
		}
	}
}

func TestFloatWidths(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0, "f90000"},
		{math.Copysign(0, -1), "f98000"},
		{1, "f93c00"},
		{1.5, "f93e00"},
		{-2, "f9c000"},
		{65504, "f97bff"},                     // largest half
		{65505, "fa477fe100"},                 // integral, but needs float32
		{math.Ldexp(1, -24), "f90001"},        // smallest half subnormal
		{math.Ldexp(3, -24), "f90003"},        // half subnormal
		{math.Ldexp(1, -25), "fa33000000"},    // below half's range
		{math.Ldexp(1, -14), "f90400"},        // smallest half normal
		{math.Ldexp(2049, -11), "fa3f801000"}, // 11 mantissa bits: not half
		{math.Inf(1), "f97c00"},
		{math.Inf(-1), "f9fc00"},
		{math.NaN(), "f97e00"},
		{math.Float64frombits(0x7ff0000000000001), "f97e00"}, // signalling NaN payload is not kept
		{float64(float32(0.1)), "fa3dcccccd"},
		{0.1, "fb3fb999999999999a"},
		{math.MaxFloat64, "fb7fefffffffffffff"},
		{math.SmallestNonzeroFloat64, "fb0000000000000001"},
		{float64(math.SmallestNonzeroFloat32), "fa00000001"},
	}
	for _, c := range cases {
		got := hex.EncodeToString(appendFloat(nil, c.f))
		if got != c.want {
			t.Errorf("%v: encoded %s, want %s", c.f, got, c.want)
		}
		b, _ := hex.DecodeString(got)
		back := decodeFloat(t, b)
		if back != c.f && !(math.IsNaN(c.f) && math.IsNaN(back)) || math.Signbit(back) != math.Signbit(c.f) && !math.IsNaN(c.f) {
			t.Errorf("%v decoded as %v", c.f, back)
		}
	}
	// Random float32 and float64 bit patterns survive exactly.
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		var f float64
		if r.IntN(2) == 0 {
			f = float64(math.Float32frombits(r.Uint32()))
		} else {
			f = math.Float64frombits(r.Uint64())
		}
		back := decodeFloat(t, appendFloat(nil, f))
		if math.IsNaN(f) {
			if !math.IsNaN(back) {
				t.Fatalf("NaN decoded as %v", back)
			}
			continue
		}
		if math.Float64bits(back) != math.Float64bits(f) {
			t.Fatalf("%v (0x%x) decoded as %v", f, math.Float64bits(f), back)
		}
	}
}

func TestFloorMillis(t *testing.T) {
	for _, c := range []struct{ ns, ms int64 }{
		{0, 0}, {999_999, 0}, {1_000_000, 1}, {-1, -1}, {-1_000_000, -1}, {-1_000_001, -2},
		{math.MaxInt64, 9_223_372_036_854}, {math.MinInt64, -9_223_372_036_855},
	} {
		if got := floorMillis(c.ns); got != c.ms {
			t.Errorf("floorMillis(%d) = %d, want %d", c.ns, got, c.ms)
		}
	}
}
