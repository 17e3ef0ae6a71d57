package trace_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/trace/tracetest"
)

// checkLayoutMatchesDecodeChunk decodes payload with DecodeChunkLayout and
// DecodeChunk and fails unless both return the same spans or the same
// error. It returns the layout (nil on an error) and the spans.
func checkLayoutMatchesDecodeChunk(t *testing.T, payload []byte, lim trace.Limits) (*trace.PayloadLayout, []*trace.Span, error) {
	t.Helper()
	want, wantErr := trace.DecodeChunk(payload, lim)
	got, layout, err := trace.DecodeChunkLayout(payload, lim)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("DecodeChunkLayout error %v, DecodeChunk error %v", err, wantErr)
	}
	if err != nil {
		if layout != nil || got != nil {
			t.Fatalf("DecodeChunkLayout returned a layout or spans with error %v", err)
		}
		return nil, nil, err
	}
	if len(got) != len(want) {
		t.Fatalf("DecodeChunkLayout: %d spans, DecodeChunk %d", len(got), len(want))
	}
	for i := range want {
		if d := trace.Diff(want[i], got[i]); d != "" {
			t.Fatalf("span %d differs from DecodeChunk's: %s", i, d)
		}
	}
	return layout, got, nil
}

// TestDecodeChunkLayoutOfEncoderOutput: whatever ChunkEncoder writes is
// storable as sent, and the layout cuts it into frames exactly where the
// encoder's FrameCuts cuts it (the store then writes the same chunk
// whether it encodes the spans or keeps the bytes it was sent). Random
// batches (every value kind, exceptions, deep trees), realistic traces of
// every size around the span index stride, and the golden example of
// docs/format/chunk-payload.md (the Zorka sample capture's span).
func TestDecodeChunkLayoutOfEncoderOutput(t *testing.T) {
	var enc trace.ChunkEncoder
	check := func(t *testing.T, spans []*trace.Span) {
		t.Helper()
		payload, err := enc.Encode(nil, spans)
		if err != nil {
			t.Fatal(err)
		}
		layout, _, err := checkLayoutMatchesDecodeChunk(t, payload, trace.Limits{})
		if err != nil {
			t.Fatalf("%d spans: %v", len(spans), err)
		}
		if ok, err := layout.Storable(); !ok {
			t.Fatalf("%d spans: encoder output not storable: %v", len(spans), err)
		}
		for _, target := range []int{1, 64, 1 << 10, 8 << 10, 64 << 10} {
			want := enc.FrameCuts(nil, target)
			if got := layout.FrameCuts(nil, target); !slices.Equal(got, want) {
				t.Fatalf("%d spans, target %d: cuts %v, encoder's %v", len(spans), target, got, want)
			}
		}
	}
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5a1e))
		check(t, randomBatch(r, tracetest.GenOptions{NonFinite: true}))
	}
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, trace.SpanIndexStride, trace.SpanIndexStride + 1, 2*trace.SpanIndexStride + 1, 500} {
		check(t, tracetest.RealisticTrace(r, n, 6, 20))
	}
	check(t, []*trace.Span{zorkaSampleSpan(), exampleSpan()})
	golden := hx(parseAnnotatedHex(goldenChunk))
	if layout, _, err := checkLayoutMatchesDecodeChunk(t, golden, trace.Limits{}); err != nil {
		t.Fatal(err)
	} else if ok, err := layout.Storable(); !ok {
		t.Fatalf("golden payload: %v", err)
	}
}

// TestDecodeChunkLayoutNotStorable: payloads every decoder reads but the
// encoder would not have written so are decoded as usual and reported not
// storable, naming why; their FrameCuts is empty.
func TestDecodeChunkLayoutNotStorable(t *testing.T) {
	const tid = "50 00000000000000000000000000000001"
	r := rand.New(rand.NewPCG(9, 9))
	indexed := mustEncode(t, tracetest.RealisticTrace(r, 2*trace.SpanIndexStride+3, 2, 2))
	unindexed, err := trace.StripSpanIndex(indexed)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		payload []byte
		lim     trace.Limits
		reason  string
	}{
		{"version 1 with more spans than the stride", unindexed, trace.Limits{}, "span index stride 0 (none: 0), want 16"},
		{"version 2 of two spans at stride 1 (the format document's example)",
			hx("83 c7 80 c9 82 01 81 16 82 c8 81 c2 a1 01" + tid + "c8 81 c2 a1 01" + tid), trace.Limits{},
			"span index in a payload of 2 spans"},
		{"a string no span uses", hx("82 c7 82 61 61 61 62 81 c8 81 c2 a2 01" + tid + "07 c6 00"), trace.Limits{},
			"string table of 2 entries, 1 used"},
		{"strings not in first-use order", hx("82 c7 82 61 61 61 62 82 c8 81 c2 a2 01" + tid + "07 c6 01 c8 81 c2 a2 01" + tid + "07 c6 00"),
			trace.Limits{}, "string table not in first-use order"},
		{"limits beyond the defaults", indexed, trace.Limits{MaxStrings: 1 << 23}, "decoded under limits beyond DefaultLimits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			layout, spans, err := checkLayoutMatchesDecodeChunk(t, c.payload, c.lim)
			if err != nil {
				t.Fatalf("does not decode: %v", err)
			}
			if len(spans) == 0 {
				t.Fatal("no spans decoded")
			}
			ok, err := layout.Storable()
			if ok || err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Storable() = %v, %v; want false naming %q", ok, err, c.reason)
			}
			if cuts := layout.FrameCuts(nil, 1); len(cuts) != 0 {
				t.Fatalf("cuts %v of a payload not storable", cuts)
			}
		})
	}
}

// TestDecodeChunkLayoutMalformed: truncated and damaged payloads fail as
// DecodeChunk fails them (a *CorruptPayloadError at an offset inside the
// payload), never with a panic; a damaged byte that still decodes yields
// the spans DecodeChunk yields.
func TestDecodeChunkLayoutMalformed(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	payload := mustEncode(t, tracetest.RealisticTrace(r, 3*trace.SpanIndexStride+5, 6, 8))
	failed := 0
	check := func(p []byte) {
		_, _, err := checkLayoutMatchesDecodeChunk(t, p, trace.Limits{})
		if err == nil {
			return
		}
		failed++
		var ce *trace.CorruptPayloadError
		if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(p) {
			t.Fatalf("error %v: want a CorruptPayloadError inside the %d bytes", err, len(p))
		}
	}
	for n := 0; n < len(payload); n += 1 + n/64 {
		check(payload[:n])
	}
	for i := range 2000 {
		p := bytes.Clone(payload)
		at := r.IntN(len(p))
		p[at] ^= byte(1 + i%255)
		check(p)
	}
	if failed < 100 {
		t.Fatalf("only %d of the damaged payloads failed to decode", failed)
	}
}

// FuzzDecodeChunkLayout: DecodeChunkLayout agrees with DecodeChunk on any
// input; a payload it calls storable decodes under DefaultLimits, holds
// the strings the encoder's payload of the same spans holds, and cuts into
// ascending frames inside it; a payload the encoder writes byte for byte
// is storable, cut where the encoder cuts it.
func FuzzDecodeChunkLayout(f *testing.F) {
	f.Add(mustEncode(f, []*trace.Span{zorkaSampleSpan(), exampleSpan()}))
	f.Add(mustEncode(f, nil))
	f.Add(deepPayload(5))
	r := rand.New(rand.NewPCG(4, 4))
	for range 4 {
		f.Add(mustEncode(f, randomBatch(r, tracetest.GenOptions{NonFinite: true, MaxDepth: 3})))
	}
	indexed := mustEncode(f, tracetest.RealisticTrace(r, 2*trace.SpanIndexStride+3, 2, 2))
	f.Add(indexed)
	if old, err := trace.StripSpanIndex(indexed); err == nil {
		f.Add(old)
	}
	const tid = "50 00000000000000000000000000000001"
	f.Add(hx("82 c7 82 61 61 61 62 82 c8 81 c2 a2 01" + tid + "07 c6 01 c8 81 c2 a2 01" + tid + "07 c6 00"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		lim := trace.Limits{MaxRecords: 1 << 16}
		layout, spans, err := checkLayoutMatchesDecodeChunk(t, payload, lim)
		if err != nil {
			return
		}
		var enc trace.ChunkEncoder
		again, err := enc.Encode(nil, spans)
		if err != nil {
			t.Fatalf("decoded spans do not encode: %v", err)
		}
		ok, _ := layout.Storable()
		if bytes.Equal(again, payload) {
			if !ok {
				t.Fatal("the encoder's own payload is not storable")
			}
			if got, want := layout.FrameCuts(nil, 16), enc.FrameCuts(nil, 16); !slices.Equal(got, want) {
				t.Fatalf("cuts %v, encoder's %v", got, want)
			}
		}
		if !ok {
			return
		}
		if _, err := trace.DecodeChunk(payload, trace.DefaultLimits()); err != nil {
			t.Fatalf("storable payload fails under DefaultLimits: %v", err)
		}
		have, err := trace.ChunkStrings(payload, trace.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := trace.ChunkStrings(again, trace.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(slices.Compact(slices.Sorted(slices.Values(have))), slices.Sorted(slices.Values(want))) {
			t.Fatalf("storable payload's strings %q, the encoder's %q", have, want)
		}
		prev := 0
		for _, c := range layout.FrameCuts(nil, 16) {
			if c <= prev || c >= len(payload) {
				t.Fatalf("cut %d after %d in a payload of %d bytes", c, prev, len(payload))
			}
			prev = c
		}
	})
}

// TestNilPayloadLayout: a nil layout is not storable and cuts nothing.
func TestNilPayloadLayout(t *testing.T) {
	var l *trace.PayloadLayout
	if ok, err := l.Storable(); ok || err == nil || !strings.Contains(err.Error(), "no layout") {
		t.Fatalf("Storable() = %v, %v", ok, err)
	}
	if cuts := l.FrameCuts(nil, 1); len(cuts) != 0 {
		t.Fatalf("cuts %v", cuts)
	}
}
