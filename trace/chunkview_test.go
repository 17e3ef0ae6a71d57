package trace_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/trace/tracetest"
)

// checkView compares every span of a ChunkView, taken in a shuffled order
// (so that offsets are learned out of order), with DecodeChunk's.
func checkView(t testing.TB, payload []byte, full []*trace.Span, r *rand.Rand) {
	t.Helper()
	v, err := trace.NewChunkView(payload, trace.Limits{})
	if err != nil {
		t.Fatalf("NewChunkView: %v", err)
	}
	if v.Len() != len(full) {
		t.Fatalf("Len = %d, want %d", v.Len(), len(full))
	}
	order := r.Perm(len(full))
	order = append(order, r.Perm(len(full))...) // and again, from learned offsets
	for _, i := range order {
		got, err := v.Span(i)
		if err != nil {
			t.Fatalf("Span(%d): %v", i, err)
		}
		if d := trace.Diff(full[i], got); d != "" {
			t.Fatalf("Span(%d): %s", i, d)
		}
		sum, err := v.Summary(i)
		if err != nil {
			t.Fatalf("Summary(%d): %v", i, err)
		}
		want := *full[i]
		want.Root = shallow(full[i].Root)
		if d := trace.Diff(&want, sum); d != "" {
			t.Fatalf("Summary(%d): %s", i, d)
		}
	}
	for _, i := range []int{-1, len(full), len(full) + 100} {
		if _, err := v.Span(i); !errors.Is(err, trace.ErrNoSuchSpan) {
			t.Fatalf("Span(%d): err = %v, want ErrNoSuchSpan", i, err)
		}
	}
}

// shallow is the root record a summary keeps: its own fields, no
// attributes, exception or children.
func shallow(r *trace.Record) *trace.Record {
	if r == nil {
		return nil
	}
	return &trace.Record{Method: r.Method, StartNS: r.StartNS, DurationNS: r.DurationNS, Calls: r.Calls, Errors: r.Errors, Open: r.Open}
}

func TestChunkViewMatchesDecodeChunk(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for it := range 300 {
		spans := randomBatch(r, tracetest.GenOptions{MaxDepth: 4})
		if it%3 == 0 {
			spans = append(spans, tracetest.RealisticTrace(r, 1+r.IntN(20), 6, 1+r.IntN(50))...)
		}
		payload := mustEncode(t, spans)
		full, err := trace.DecodeChunk(payload, trace.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		checkView(t, payload, full, r)
	}
}

func TestChunkViewEmptyAndCorrupt(t *testing.T) {
	v, err := trace.NewChunkView(mustEncode(t, nil), trace.Limits{})
	if err != nil || v.Len() != 0 {
		t.Fatalf("empty chunk: Len %v, err %v", v, err)
	}
	if _, err := v.Span(0); !errors.Is(err, trace.ErrNoSuchSpan) {
		t.Fatalf("Span(0) of an empty chunk: %v", err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	spans := tracetest.RealisticTrace(r, 8, 6, 10)
	payload := mustEncode(t, spans)
	// Cut anywhere: the view either refuses the prologue or fails the
	// spans that are cut, with a CorruptPayloadError naming an offset
	// inside the payload; the spans before the cut still decode.
	for cut := 0; cut < len(payload); cut += 7 {
		p := payload[:cut]
		v, err := trace.NewChunkView(p, trace.Limits{})
		if err != nil {
			var ce *trace.CorruptPayloadError
			if !errors.As(err, &ce) || ce.Offset > cut {
				t.Fatalf("cut %d: NewChunkView err = %v", cut, err)
			}
			continue
		}
		failed := false
		for i := range v.Len() {
			got, err := v.Span(i)
			if err != nil {
				var ce *trace.CorruptPayloadError
				if !errors.As(err, &ce) || ce.Offset > cut {
					t.Fatalf("cut %d span %d: err = %v", cut, i, err)
				}
				failed = true
				continue
			}
			if failed {
				t.Fatalf("cut %d: span %d decodes after an earlier span failed", cut, i)
			}
			if d := trace.Diff(spans[i], got); d != "" {
				t.Fatalf("cut %d span %d: %s", cut, i, d)
			}
		}
		if !failed {
			t.Fatalf("cut %d of %d: every span decoded", cut, len(payload))
		}
	}
}

// TestChunkViewConcurrent reads one view from many goroutines (run with
// -race): offsets are learned under the view's lock, the string table is
// shared read-only.
func TestChunkViewConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var spans []*trace.Span
	for range 20 {
		spans = append(spans, tracetest.RealisticTrace(r, 10, 6, 15)...)
	}
	payload := mustEncode(t, spans)
	v, err := trace.NewChunkView(payload, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				i := rr.IntN(len(spans))
				got, err := v.Span(i)
				if err != nil {
					errs <- err
					return
				}
				if !got.Equal(spans[i]) {
					errs <- errors.New("span differs: " + trace.Diff(spans[i], got))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// FuzzChunkView: any payload either fails NewChunkView / Span with a
// CorruptPayloadError inside the payload, or decodes exactly what
// DecodeChunkSpan decodes.
func FuzzChunkView(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 9))
	f.Add(mustEncode(f, tracetest.RealisticTrace(r, 3, 6, 5)), uint16(2))
	f.Add(mustEncode(f, nil), uint16(0))
	f.Add(deepPayload(5), uint16(0))
	for range 6 {
		f.Add(mustEncode(f, randomBatch(r, tracetest.GenOptions{MaxDepth: 3})), uint16(r.IntN(4)))
	}
	// More than SpanIndexStride spans: a span index (version 2), and the
	// same spans without one (version 1, as written before it).
	indexed := mustEncode(f, tracetest.RealisticTrace(r, 2*trace.SpanIndexStride+3, 2, 2))
	f.Add(indexed, uint16(trace.SpanIndexStride+2))
	f.Add(indexed, uint16(2*trace.SpanIndexStride))
	old, err := trace.StripSpanIndex(indexed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(old, uint16(trace.SpanIndexStride+2))
	// A payload as the writer cuts it into frames (ChunkEncoder.FrameCuts).
	var enc trace.ChunkEncoder
	framed, err := enc.Encode(nil, tracetest.RealisticTrace(r, 3*trace.SpanIndexStride+5, 3, 3))
	if err != nil {
		f.Fatal(err)
	}
	if cuts := enc.FrameCuts(nil, len(framed)/5); len(cuts) < 2 {
		f.Fatalf("cuts %v", cuts)
	}
	f.Add(framed, uint16(2*trace.SpanIndexStride+1))
	f.Fuzz(func(t *testing.T, payload []byte, i16 uint16) {
		lim := trace.Limits{MaxRecords: 1 << 16}
		// The same payload read through a filler of pieces (as from a
		// chunk stored as frames) reads the same.
		var pv *trace.ChunkView
		var perr error
		if len(payload) > 0 {
			fill := newFakeFiller(payload, []int{int(i16) % len(payload), len(payload) / 2}, -1)
			pv, perr = trace.NewPartialChunkView(fill, lim)
		}
		v, err := trace.NewChunkView(payload, lim)
		if len(payload) > 0 && (err == nil) != (perr == nil) {
			t.Fatalf("NewChunkView err = %v, NewPartialChunkView err = %v", err, perr)
		}
		if err == nil && len(payload) > 0 {
			i := int(i16) % (v.Len() + 1)
			a, aerr := v.Span(i)
			b, berr := pv.Span(i)
			if (aerr == nil) != (berr == nil) || (aerr == nil && trace.Diff(a, b) != "") {
				t.Fatalf("Span(%d): whole view %v, partial view %v", i, aerr, berr)
			}
		}
		if err != nil {
			var ce *trace.CorruptPayloadError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(payload) {
				t.Fatalf("NewChunkView err = %v", err)
			}
			return
		}
		i := int(i16)
		got, err := v.Span(i)
		want, werr := trace.DecodeChunkSpan(payload, i, lim)
		if (err == nil) != (werr == nil) {
			t.Fatalf("Span(%d) err = %v, DecodeChunkSpan err = %v", i, err, werr)
		}
		if err != nil {
			var ce *trace.CorruptPayloadError
			if !errors.Is(err, trace.ErrNoSuchSpan) && (!errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(payload)) {
				t.Fatalf("Span(%d) err = %v", i, err)
			}
			return
		}
		if d := trace.Diff(want, got); d != "" {
			t.Fatalf("Span(%d): %s", i, d)
		}
		if _, err := v.Summary(i); err != nil {
			t.Fatalf("Summary(%d) fails where Span succeeds: %v", i, err)
		}
	})
}

// BenchmarkChunkViewTrace reads the 10 spans of the last trace of the
// batch from a view that has seen the chunk before, as a cached
// trace-by-id does (compare BenchmarkDecodeChunkSpansTrace).
func BenchmarkChunkViewTrace(b *testing.B) {
	spans := benchBatch()
	payload := mustEncode(b, spans)
	v, err := trace.NewChunkView(payload, trace.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := processCPU()
	for b.Loop() {
		for i := 90; i < 100; i++ {
			if _, err := v.Span(i); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportCPU(b, cpu0)
	b.SetBytes(int64(len(payload)))
}

// TestChunkSpanIndex: a batch of more than SpanIndexStride spans is written
// as version 2 (0x83, a span index after the string table); every decoder
// reads it and the same spans written without the index (version 1, as
// stored before the index existed) to the same spans; the index costs at
// most 3 bytes per SpanIndexStride spans plus its 5-byte head.
func TestChunkSpanIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{trace.SpanIndexStride, trace.SpanIndexStride + 1, 2 * trace.SpanIndexStride, 2*trace.SpanIndexStride + 1, 500} {
		var spans []*trace.Span
		for len(spans) < n {
			spans = append(spans, tracetest.RealisticTrace(r, min(10, n-len(spans)), 6, 1+r.IntN(20))...)
		}
		payload := mustEncode(t, spans)
		old, err := trace.StripSpanIndex(payload)
		if err != nil {
			t.Fatal(err)
		}
		if n <= trace.SpanIndexStride {
			if payload[0] != 0x82 || !bytes.Equal(old, payload) {
				t.Fatalf("%d spans: initial byte %#x, want 0x82 (no index)", n, payload[0])
			}
			continue
		}
		marks := (n - 1) / trace.SpanIndexStride
		if payload[0] != 0x83 || old[0] != 0x82 {
			t.Fatalf("%d spans: initial bytes %#x / %#x, want 0x83 / 0x82", n, payload[0], old[0])
		}
		if extra := len(payload) - len(old); extra > 5+3*marks {
			t.Fatalf("%d spans: the span index costs %d bytes, more than 5 + 3 × %d", n, extra, marks)
		}
		for _, p := range [][]byte{payload, old} {
			full, err := trace.DecodeChunk(p, trace.Limits{})
			if err != nil {
				t.Fatalf("%d spans, initial byte %#x: %v", n, p[0], err)
			}
			for i := range spans {
				if d := trace.Diff(spans[i], full[i]); d != "" {
					t.Fatalf("%d spans, initial byte %#x, span %d: %s", n, p[0], i, d)
				}
			}
			checkPartialDecoders(t, p, full, true)
			checkView(t, p, full, r)
		}
		// Re-encoding what a version 1 payload holds writes the index.
		again := mustEncode(t, spans)
		if !bytes.Equal(again, payload) {
			t.Fatalf("%d spans: re-encoding differs", n)
		}
	}
}

// TestChunkSpanIndexWrong: an index entry that does not point at its span
// is found by every decoder that walks there, naming the entry's offset;
// a view reading the marked span directly fails on what it finds there,
// or decodes a span with the wrong identity that the full decoders refuse.
func TestChunkSpanIndexWrong(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	spans := tracetest.RealisticTrace(r, trace.SpanIndexStride+4, 6, 5)
	payload := mustEncode(t, spans)
	old, err := trace.StripSpanIndex(payload)
	if err != nil {
		t.Fatal(err)
	}
	// One mark: c9 82 10 81 + a 3-byte distance (0x19 hh ll).
	diff := len(payload) - len(old)
	if diff != 7 {
		t.Fatalf("index of %d bytes, want 7 (one 3-byte distance)", diff)
	}
	// Find the index: the old payload equals the new one without it.
	at := 1
	for at < len(old) && old[at] == payload[at] {
		at++
	}
	if !bytes.Equal(payload[at:at+4], []byte{0xc9, 0x82, trace.SpanIndexStride, 0x81}) {
		t.Fatalf("span index at %d: % x", at, payload[at:at+7])
	}
	entry := at + 4
	bad := bytes.Clone(payload)
	bad[entry+2]++ // one byte further
	_, err = trace.DecodeChunk(bad, trace.Limits{})
	var ce *trace.CorruptPayloadError
	if !errors.As(err, &ce) || ce.Offset != entry || !strings.Contains(ce.Reason, "span index entry 0") {
		t.Fatalf("DecodeChunk: err = %v, want the span index entry at offset %d", err, entry)
	}
	if _, err := trace.DecodeChunkSummaries(bad, trace.Limits{}); !errors.As(err, &ce) || ce.Offset != entry {
		t.Fatalf("DecodeChunkSummaries: err = %v, want offset %d", err, entry)
	}
	// Walking from span 15 to span 17 crosses the mark: checked there.
	if _, err := trace.DecodeChunkSpans(bad, []int{trace.SpanIndexStride - 1, trace.SpanIndexStride + 1}, trace.Limits{}); !errors.As(err, &ce) || ce.Offset != entry {
		t.Fatalf("DecodeChunkSpans: err = %v, want offset %d", err, entry)
	}
	// Spans before the mark still read.
	v, err := trace.NewChunkView(bad, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range trace.SpanIndexStride {
		got, err := v.Span(i)
		if err != nil || !got.Equal(spans[i]) {
			t.Fatalf("span %d before the bad mark: err %v", i, err)
		}
	}
	if got, err := v.Span(trace.SpanIndexStride); err == nil && got.Equal(spans[trace.SpanIndexStride]) {
		t.Fatalf("span %d read through a wrong mark decodes as itself", trace.SpanIndexStride)
	} else if err != nil && (!errors.As(err, &ce) || ce.Offset > len(bad)) {
		t.Fatalf("span %d: err = %v, want a CorruptPayloadError inside the payload", trace.SpanIndexStride, err)
	}
}

// BenchmarkChunkViewCold is what a get-by-id whose chunk is not cached
// costs after the chunk is read: a new view of a 500-span payload (10
// attributes of high cardinality per span) and one span of it.
func BenchmarkChunkViewCold(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 18))
	var spans []*trace.Span
	for len(spans) < 500 {
		spans = append(spans, tracetest.RealisticTrace(r, 10, 10, 10)...)
	}
	payload := mustEncode(b, spans)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	i := 0
	cpu0 := processCPU()
	for b.Loop() {
		v, err := trace.NewChunkView(payload, trace.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := v.Span(i % len(spans)); err != nil {
			b.Fatal(err)
		}
		i += 97
	}
	reportCPU(b, cpu0)
}

// TestChunkViewStringChecked: a view checks a string of the table when a
// span that uses it is read, and names the entry's offset; the spans not
// using it read.
func TestChunkViewStringChecked(t *testing.T) {
	const tid = "01 50 00000000000000000000000000000001 "
	payload := hx("82 c7 82 61 61 62 c3 28 82 c8 81 c2 a2 " + tid + "0e c6 00 c8 81 c2 a2 " + tid + "0e c6 01")
	v, err := trace.NewChunkView(payload, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if sp, err := v.Span(0); err != nil || sp.Root == nil || sp.Root.Method != "a" {
		t.Fatalf("Span(0) = %+v, %v", sp, err)
	}
	for _, read := range []func(int) (*trace.Span, error){v.Span, v.Summary} {
		_, err := read(1)
		var ce *trace.CorruptPayloadError
		if !errors.As(err, &ce) || ce.Offset != 5 || !strings.Contains(ce.Reason, "entry 1: not valid UTF-8") {
			t.Fatalf("span 1: err = %v, want entry 1 at offset 5 not UTF-8", err)
		}
	}
	if _, err := trace.DecodeChunkSpan(payload, 1, trace.Limits{}); err == nil {
		t.Fatal("DecodeChunkSpan(1) decodes a string that is not UTF-8")
	}
}

// reportCPU reports the process CPU time (user + system) per op since
// start (from startCPU): on a machine shared with other work it compares
// runs better than wall time does.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
