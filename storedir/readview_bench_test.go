package storedir

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// BenchmarkReadView measures what a get-by-id whose chunk is not in the
// chunk cache costs once its index entry is found: reading the chunk,
// decoding the frames of its string table and of one span (as readView
// and ChunkView.Span do), on the chunks of a store of the bench workload
// written by DB.Append (500-span requests, the writer's frame cuts), its
// DB closed so that nothing else runs. "known" reads with the chunk's
// layout kept when it has one (chunk.File.ReadFramesKnown: a chunk with a
// zstd first frame read before), "first" as a first read of the chunk
// (chunk.File.ReadFrames: the header and the LZ4 lead frame, which lists
// the other frames; of a chunk with a zstd first frame, written before
// LZ4 lead frames, the whole chunk with its CRC-32). The chunks this DB
// writes have LZ4 lead frames, so the two read them alike. Process CPU
// per read is reported as cpu-ns/op.
func BenchmarkReadView(b *testing.B) {
	dir := b.TempDir()
	reqs, spans, _ := benchRequests(2, 20_000, 500)
	stored := len(spans)
	o := benchOptions(SyncNone)
	db, err := Open(context.Background(), dir, o)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range reqs {
		if err := db.Append(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	f, err := chunk.Open(filepath.Join(dir, StoreName(0), dataFile))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	type framed struct {
		off    int64
		layout *chunk.Layout
		spans  int
	}
	var chunks []framed
	for off := int64(chunk.HeaderSize); off < f.Size(); {
		fr, next, err := f.ReadFrames(off)
		if err != nil {
			b.Fatal(err)
		}
		if fr.Frames() > 1 {
			v, err := trace.NewPartialChunkView(fr, trace.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			chunks = append(chunks, framed{off, fr.Layout(), v.Len()})
		}
		off = next
	}
	if len(chunks) < 10 {
		b.Fatalf("%d chunks stored as frames, want at least 10", len(chunks))
	}
	run := func(b *testing.B, known bool) {
		r := rand.New(rand.NewPCG(5, 6))
		cpu0 := processCPU()
		for b.Loop() {
			c := chunks[r.IntN(len(chunks))]
			var fr *chunk.Frames
			var err error
			if known && c.layout != nil {
				fr, _, err = f.ReadFramesKnown(c.off, c.layout)
			} else {
				fr, _, err = f.ReadFrames(c.off)
			}
			if err != nil {
				b.Fatal(err)
			}
			v, err := trace.NewPartialChunkView(fr, trace.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Span(r.IntN(c.spans)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(f.Size())/float64(stored), "data-B/span")
	}
	b.Run("known", func(b *testing.B) { run(b, true) })
	b.Run("first", func(b *testing.B) { run(b, false) })
}
