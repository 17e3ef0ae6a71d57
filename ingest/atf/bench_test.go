package atf

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// benchEvents generates about n events of well-formed traces: a root with
// ten children of two grandchildren each (31 calls, 62 events per trace).
// Every linkEvery-th event is recorded with detail (a linked lane copy and
// a 540-byte detail record); 0 = none.
func benchEvents(n, linkEvery int) (index, detail []byte) {
	events := make([]IndexEvent, 0, n+n/max(linkEvery, 1))
	var recs []detailRec
	ts := uint64(1_000_000_000)
	emit := func(fid uint64, kind, depth uint32) {
		ts += 17
		e := IndexEvent{TimestampNS: ts, FunctionID: fid, Kind: kind, Depth: depth, DetailSeq: NoDetail}
		events = append(events, e)
		if linkEvery > 0 && len(events)%linkEvery == 0 {
			e.TimestampNS++
			e.DetailSeq = uint32(len(recs))
			recs = append(recs, detailRec{eventType: DetailFunctionCall, indexSeq: uint32(len(events)), ts: e.TimestampNS,
				payload: drainPayload(e.TimestampNS, fid, 1, kind, depth, [8]uint64{1, 2, 3, 4, 5, 6, 7, 8}, 9, 10, 11, make([]byte, 32))})
			events = append(events, e)
		}
	}
	for len(events) < n {
		emit(1<<32|1, KindCall, 1)
		for c := range 10 {
			emit(1<<32|uint64(2+c), KindCall, 2)
			for g := range 2 {
				emit(2<<32|uint64(g), KindCall, 3)
				emit(2<<32|uint64(g), KindReturn, 3)
			}
			emit(1<<32|uint64(2+c), KindReturn, 2)
		}
		emit(1<<32|1, KindReturn, 1)
	}
	index = buildIndex(indexOpts{}, events)
	if recs != nil {
		detail = buildDetail(false, ArchARM64, 0, recs, nil)
	}
	return index, detail
}

const benchN = 1 << 20 // events: a 32 MiB index file

func reportEvents(b *testing.B, events int64) {
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMemcpyBaseline copies the same bytes: the memory bandwidth the
// decode benchmarks compare with.
func BenchmarkMemcpyBaseline(b *testing.B) {
	idx, _ := benchEvents(benchN, 0)
	dst := make([]byte, len(idx))
	b.SetBytes(int64(len(idx)))
	for b.Loop() {
		copy(dst, idx)
	}
}

// BenchmarkParseIndex decodes a 32 MiB index image into events.
func BenchmarkParseIndex(b *testing.B) {
	idx, _ := benchEvents(benchN, 0)
	b.SetBytes(int64(len(idx)))
	var n int64
	for b.Loop() {
		f, err := ParseIndex("index.atf", idx)
		if err != nil {
			b.Fatal(err)
		}
		n = f.Count
	}
	reportEvents(b, n)
}

// BenchmarkReadIndexFile reads and decodes the index file from disk (page
// cache) in 1 MiB pieces.
func BenchmarkReadIndexFile(b *testing.B) {
	idx, _ := benchEvents(benchN, 0)
	p := filepath.Join(b.TempDir(), "index.atf")
	if err := os.WriteFile(p, idx, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(idx)))
	var n int64
	for b.Loop() {
		fh, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		f, err := ReadIndex(context.Background(), "index.atf", fh, int64(len(idx)))
		fh.Close()
		if err != nil {
			b.Fatal(err)
		}
		n = f.Count
	}
	reportEvents(b, n)
}

func benchDecode(b *testing.B, linkEvery int) {
	idx, det := benchEvents(benchN, linkEvery)
	b.SetBytes(int64(len(idx) + len(det)))
	in := ThreadInput{Name: "session_20250101_000000/pid_1/thread_0/index.atf", Index: idx, Detail: det}
	var sum *ingest.Summary
	for b.Loop() {
		var err error
		sum, err = DecodeThread(context.Background(), in, ingest.Options{}, func(*trace.Span) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	reportEvents(b, sum.Events)
	b.ReportMetric(float64(sum.Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDecode maps a 32 MiB index image onto spans (1M events, 16.9k
// traces of 31 records).
func BenchmarkDecode(b *testing.B) { benchDecode(b, 0) }

// BenchmarkDecodeWithDetail: one event in eight recorded with detail (lane
// copies merged, registers decoded into attributes).
func BenchmarkDecodeWithDetail(b *testing.B) { benchDecode(b, 8) }

// BenchmarkDecodeIndexEvents is the event decode loop alone, into a reused
// slice (no allocation, no page faults): compare with MemcpyBaseline.
func BenchmarkDecodeIndexEvents(b *testing.B) {
	idx, _ := benchEvents(benchN, 0)
	n := (len(idx) - HeaderSize - FooterSize) / IndexEventSize
	dst := make([]IndexEvent, n)
	b.SetBytes(int64(n * IndexEventSize))
	for b.Loop() {
		decodeIndexEvents(dst, idx[HeaderSize:HeaderSize+n*IndexEventSize])
	}
	reportEvents(b, int64(n))
}
