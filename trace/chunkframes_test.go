package trace_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/trace/tracetest"
)

// frameTarget is the frame size the frame tests cut payloads for.
const frameTarget = 8 << 10

// framedBatch encodes spans with a ChunkEncoder and appends the payload to
// a new zstd data file as one chunk cut where FrameCuts says; it returns
// the payload, the cuts, the file and the chunk's offset.
func framedBatch(t testing.TB, spans []*trace.Span, target int) (payload []byte, cuts []int, f *chunk.File, off int64) {
	t.Helper()
	var enc trace.ChunkEncoder
	payload, err := enc.Encode(nil, spans)
	if err != nil {
		t.Fatal(err)
	}
	cuts = enc.FrameCuts(nil, target)
	opt := chunk.Options{Compression: chunk.Zstd, Checksums: true}
	c, err := chunk.EncodeFrames(payload, cuts, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err = chunk.Create(filepath.Join(t.TempDir(), "traces.zts"), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if off, err = f.AppendEncoded(c); err != nil {
		t.Fatal(err)
	}
	return payload, cuts, f, off
}

func realisticSpans(r *rand.Rand, traces int) []*trace.Span {
	var spans []*trace.Span
	for range traces {
		spans = append(spans, tracetest.RealisticTrace(r, 10, 6, 20)...)
	}
	return spans
}

// TestFrameCuts: the cuts of a large indexed payload are the first span's
// start and then marked spans at least target bytes apart; a payload
// without a span index, or of at most twice the target, is not cut.
func TestFrameCuts(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	spans := realisticSpans(r, 40)
	payload, cuts, _, _ := framedBatch(t, spans, frameTarget)
	if len(cuts) < 4 {
		t.Fatalf("%d cuts of a %d-byte payload at target %d", len(cuts), len(payload), frameTarget)
	}
	v, err := trace.NewChunkView(payload, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := trace.SpanStart(v, 0); cuts[0] != first {
		t.Fatalf("first cut at %d, span 0 starts at %d", cuts[0], first)
	}
	marked := map[int]bool{}
	for i := trace.SpanIndexStride; i < v.Len(); i += trace.SpanIndexStride {
		off, _ := trace.SpanStart(v, i)
		marked[off] = true
	}
	for k, c := range cuts[1:] {
		if !marked[c] {
			t.Fatalf("cut %d at %d is not where a marked span starts", k+1, c)
		}
		if c-cuts[k] < frameTarget {
			t.Fatalf("cut %d at %d, %d bytes after the previous", k+1, c, c-cuts[k])
		}
	}
	if len(payload)-cuts[len(cuts)-1] < frameTarget/2 {
		t.Fatalf("last piece of %d bytes", len(payload)-cuts[len(cuts)-1])
	}
	var enc trace.ChunkEncoder
	if _, err := enc.Encode(nil, spans[:trace.SpanIndexStride]); err != nil { // version 1: no span index
		t.Fatal(err)
	}
	if c := enc.FrameCuts(nil, 64); len(c) != 0 {
		t.Fatalf("cuts %v of a payload without a span index", c)
	}
	p, err := enc.Encode(nil, spans[:3*trace.SpanIndexStride])
	if err != nil {
		t.Fatal(err)
	}
	if c := enc.FrameCuts(nil, len(p)/2); len(c) != 0 {
		t.Fatalf("cuts %v of a payload of at most twice the target", c)
	}
	if _, err := enc.Encode(nil, []*trace.Span{nil}); err == nil {
		t.Fatal("nil span encodes")
	}
	if c := enc.FrameCuts(nil, 64); len(c) != 0 {
		t.Fatalf("cuts %v after a failed Encode", c)
	}
}

// TestPartialChunkViewFrames: a view over a chunk read with ReadFrames
// decodes every span as DecodeChunk does, and reading one span decompresses
// only the frame of the string table and the frame holding the span.
func TestPartialChunkViewFrames(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	payload, cuts, f, off := framedBatch(t, realisticSpans(r, 40), frameTarget)
	full, err := trace.DecodeChunk(payload, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	read := func() (*chunk.Frames, *trace.ChunkView) {
		fr, _, err := f.ReadFrames(off)
		if err != nil {
			t.Fatal(err)
		}
		if fr.Frames() != len(cuts)+1 {
			t.Fatalf("%d frames for %d cuts", fr.Frames(), len(cuts))
		}
		v, err := trace.NewPartialChunkView(fr, trace.Limits{})
		if err != nil {
			t.Fatalf("NewPartialChunkView: %v", err)
		}
		return fr, v
	}
	// A span inside the third frame that is not its first (so the view
	// walks to it from the marked span starting the frame).
	bounds := append(append([]int{0}, cuts...), len(payload))
	whole, _ := trace.NewChunkView(payload, trace.Limits{})
	i := -1
	for k := range full {
		if s, _ := trace.SpanStart(whole, k); s > bounds[2] && s < bounds[3] {
			i = k
			break
		}
	}
	if i < 0 {
		t.Fatalf("no span starts inside [%d, %d)", bounds[2], bounds[3])
	}
	fr, v := read()
	got, err := v.Span(i)
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(full[i], got); d != "" {
		t.Fatalf("Span(%d): %s", i, d)
	}
	for k := 0; k+1 < len(bounds); k++ {
		if decoded, should := fr.Decoded(k), k == 0 || k == 2; decoded != should {
			t.Fatalf("frame %d [%d, %d): decoded %v, want %v", k, bounds[k], bounds[k+1], decoded, should)
		}
	}
	// Every span and summary, in any order, from a fresh view.
	_, v = read()
	for _, i := range append(r.Perm(len(full)), r.Perm(len(full))...) {
		got, err := v.Span(i)
		if err != nil {
			t.Fatalf("Span(%d): %v", i, err)
		}
		if d := trace.Diff(full[i], got); d != "" {
			t.Fatalf("Span(%d): %s", i, d)
		}
		if _, err := v.Summary(i); err != nil {
			t.Fatalf("Summary(%d): %v", i, err)
		}
	}
}

// fakeFiller is a Filler over a payload cut at arbitrary offsets, as
// chunk.Frames is over frames: Fill returns a copy of the one piece
// holding the range, else a copy of the whole payload.
type fakeFiller struct {
	src    []byte
	bounds []int
	fail   int // the piece that fails to fill (-1: none)
}

var errFakeFrame = errors.New("fake frame damaged")

func newFakeFiller(src []byte, cuts []int, fail int) *fakeFiller {
	b := []int{0}
	for _, c := range cuts {
		if c > b[len(b)-1] && c < len(src) {
			b = append(b, c)
		}
	}
	return &fakeFiller{src: src, bounds: append(b, len(src)), fail: fail}
}

func (f *fakeFiller) Size() int { return len(f.src) }

func (f *fakeFiller) Fill(lo, hi int) ([]byte, int, error) {
	if hi == lo {
		hi = min(lo+1, len(f.src))
	}
	var touched []int
	for k := 0; k+1 < len(f.bounds); k++ {
		if f.bounds[k+1] > lo && f.bounds[k] < hi {
			touched = append(touched, k)
		}
	}
	for _, k := range touched {
		if k == f.fail {
			return nil, 0, errFakeFrame
		}
	}
	if len(touched) == 1 {
		k := touched[0]
		return bytes.Clone(f.src[f.bounds[k]:f.bounds[k+1]]), f.bounds[k], nil
	}
	if f.fail >= 0 {
		return nil, 0, errFakeFrame // the whole payload holds the failing piece
	}
	return bytes.Clone(f.src), 0, nil
}

// TestPartialChunkViewAnyCuts: pieces cut anywhere (not where the writer
// cuts: inside the string table, inside spans) still read every span right,
// and a piece that fails to fill fails the reads that need it with its
// error, not others.
func TestPartialChunkViewAnyCuts(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	payload := mustEncode(t, realisticSpans(r, 8))
	full, err := trace.DecodeChunk(payload, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cuts := range [][]int{{1}, {5, 77, 2000}, {len(payload) / 2}, {len(payload) / 3, 2 * len(payload) / 3}} {
		f := newFakeFiller(payload, cuts, -1)
		v, err := trace.NewPartialChunkView(f, trace.Limits{})
		if err != nil {
			t.Fatalf("cuts %v: %v", cuts, err)
		}
		for _, i := range r.Perm(len(full)) {
			got, err := v.Span(i)
			if err != nil {
				t.Fatalf("cuts %v: Span(%d): %v", cuts, i, err)
			}
			if d := trace.Diff(full[i], got); d != "" {
				t.Fatalf("cuts %v: Span(%d): %s", cuts, i, d)
			}
		}
	}
	// The last half fails: spans wholly in the first half read, the last
	// span does not, with the filler's error.
	f := newFakeFiller(payload, []int{len(payload) / 2}, 1)
	v, err := trace.NewPartialChunkView(f, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Span(len(full) - 1); !errors.Is(err, errFakeFrame) {
		t.Fatalf("Span of the last span: %v, want the fill's error", err)
	}
	if f0 := newFakeFiller(payload, []int{len(payload) / 2}, 0); f0 != nil {
		if _, err := trace.NewPartialChunkView(f0, trace.Limits{}); !errors.Is(err, errFakeFrame) {
			t.Fatalf("NewPartialChunkView with the first piece failing: %v", err)
		}
	}
}

// releasingFiller is a fakeFiller that gives its buffers back on Release
// (a trace.Releaser, as chunk.Frames is): a Fill after it fails.
type releasingFiller struct {
	*fakeFiller
	released bool
}

var errFakeReleased = errors.New("fake filler released")

func (f *releasingFiller) Fill(lo, hi int) ([]byte, int, error) {
	if f.released {
		return nil, 0, errFakeReleased
	}
	return f.fakeFiller.Fill(lo, hi)
}

func (f *releasingFiller) Release() { f.released = true }

// TestChunkViewReleaseLendsArrays: a released partial view over a
// Releaser gives its arrays (entry heads, checked bits, span starts) to
// a later view, which reads every span right: no stale span start is
// taken for a known one, and no stale checked bit lets a string that is
// not UTF-8 through; a read of the released view fails with its filler's
// error.
func TestChunkViewReleaseLendsArrays(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	payloadA := mustEncode(t, realisticSpans(r, 12))
	payloadC := mustEncode(t, realisticSpans(r, 12))
	wantC, err := trace.DecodeChunk(payloadC, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	const tid = "01 50 00000000000000000000000000000001 "
	bad := hx("82 c7 82 61 61 62 c3 28 82 c8 81 c2 a2 " + tid + "0e c6 00 c8 81 c2 a2 " + tid + "0e c6 01")
	view := func(p []byte) (*trace.ChunkView, *releasingFiller) {
		f := &releasingFiller{fakeFiller: newFakeFiller(p, nil, -1)}
		v, err := trace.NewPartialChunkView(f, trace.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return v, f
	}
	lent := 0
	for round := range 20 {
		a, _ := view(payloadA)
		for i := a.Len() - 1; i >= 0; i-- { // every span start known, every entry checked
			if _, err := a.Span(i); err != nil {
				t.Fatal(err)
			}
		}
		entsA := trace.ViewEntsAt(a)
		a.Release()
		if _, err := a.Span(3); !errors.Is(err, errFakeReleased) {
			t.Fatalf("round %d: Span after Release: %v, want the filler's error", round, err)
		}
		b, _ := view(bad)
		if trace.ViewEntsAt(b) == entsA {
			lent++
		}
		if sp, err := b.Span(0); err != nil || sp.Root == nil || sp.Root.Method != "a" {
			t.Fatalf("round %d: bad payload's span 0 = %+v, %v", round, sp, err)
		}
		if _, err := b.Span(1); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Fatalf("round %d: span 1 of a table entry not UTF-8 read through a lent view: %v", round, err)
		}
		b.Release()
		c, _ := view(payloadC)
		for _, i := range r.Perm(c.Len()) {
			got, err := c.Span(i)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(wantC[i]) {
				t.Fatalf("round %d: span %d of a view with lent arrays differs: %s", round, i, trace.Diff(wantC[i], got))
			}
		}
		c.Release()
	}
	if lent == 0 {
		t.Fatal("no view was lent a released view's arrays in 20 rounds")
	}
}
