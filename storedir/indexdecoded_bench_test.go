package storedir

import (
	"testing"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/trace"
)

// BenchmarkIndexDecodedChunks indexes what batched CBOR ingest hands the
// indexer: chunks of 500 new spans of the bench workload (every user id,
// SQL statement and exception message drawn afresh, so most of them are
// strings the text index has not seen), decoded from their payload (the
// spans of a chunk share one copy of its string table), one chunk per
// group, through a store's ChunkIndexer. Generating, encoding and decoding
// are not measured: cpu-µs/span is the process's CPU time over the
// IndexChunks calls only (the text commit's goroutine and Pebble's work
// during them included).
func BenchmarkIndexDecodedChunks(b *testing.B) {
	const perChunk = 500
	g := bench.NewGenerator(bench.Workload{Seed: 7})
	ix := openTestIndexes(b)
	var x ChunkIndexer
	var pool []*trace.Span
	var payload []byte
	var cpu int64
	off := int64(16)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for len(pool) < perChunk {
			pool = append(pool, g.Trace()...)
		}
		var err error
		payload, err = trace.EncodeChunk(payload[:0], pool[:perChunk])
		if err != nil {
			b.Fatal(err)
		}
		pool = append(pool[:0], pool[perChunk:]...)
		spans, err := trace.DecodeChunk(payload, trace.DefaultLimits())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := processCPU()
		if err := x.IndexChunks(ix.meta, ix.text, []ChunkSpans{{Off: off, Next: off + int64(len(payload)), Spans: spans}}, true, true); err != nil {
			b.Fatal(err)
		}
		cpu += int64(processCPU() - t0)
		off += int64(len(payload))
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/1e3/float64(b.N*perChunk), "cpu-µs/span")
	b.ReportMetric(float64(ix.text.Count())/float64(b.N*perChunk), "strings/span")
}
