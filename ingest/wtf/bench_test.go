package wtf

import (
	"context"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// Benchmarks of the hot path. MB/s (SetBytes) and events/s are wall-clock;
// cpu-ms/op (all threads, GC included) is steadier on a shared machine.
//
// WTF's own JavaScript loader was measured for comparison with npm
// tracing-framework 2015.7.15-1 (build-out/wtf_node_js_compiled.js) on node:
// wtf.db.load(file) timed with process.cpuUsage over several loads (it
// decodes, sorts each zone and builds its scope tables; it builds no spans).
// BenchmarkLoadBlkClient is the same work here; the Decode benchmarks also
// build and emit every span.

// benchmarkDecode decodes a sample per iteration (spans are built and
// discarded), reporting MB/s via SetBytes and events/s.
func benchmarkDecode(b *testing.B, file string) {
	data := readSample(b, file)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var events int64
	cpu0 := cpuTime()
	for b.Loop() {
		sum, err := Decode(context.Background(), file, data, ingest.Options{}, func(*trace.Span) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		events += sum.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	// CPU time (all threads, GC included) is steadier than wall time on a
	// shared machine.
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
}

// cpuTime is the process's user+system CPU time in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkDecodeLegacyBlkClient(b *testing.B) { benchmarkDecode(b, "blk-client.wtf-trace") }
func BenchmarkDecodeLegacyBlkServer(b *testing.B) { benchmarkDecode(b, "blk-server.wtf-trace") }
func BenchmarkDecodeCFFBinaryJS(b *testing.B)     { benchmarkDecode(b, "cff-js-node.wtf-trace") }
func BenchmarkDecodeCFFJSONJS(b *testing.B)       { benchmarkDecode(b, "cff-js-node.wtf-json") }
func BenchmarkDecodeCFFBinaryCPP(b *testing.B)    { benchmarkDecode(b, "cff-cpp-bindings.wtf-trace") }

// BenchmarkLoadBlkClient measures what WTF's own loader (wtf.db.load) does:
// decode every event and sort the zones, without building spans.
func BenchmarkLoadBlkClient(b *testing.B) {
	data := readSample(b, "blk-client.wtf-trace")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		l := newLoader(context.Background(), encLegacyBinary)
		l.eventHint = eventHint(encLegacyBinary, len(data))
		if err := l.decodeLegacy(data, false); err != nil {
			b.Fatal(err)
		}
		if err := l.prepare(ingest.Options{}, &stats{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(458446*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
}
