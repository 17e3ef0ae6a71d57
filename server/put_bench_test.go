package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// putBodies returns the bench workload (bench.Generator, seed 3) as
// requests of about 500 spans each, as `ztsctl bench`'s batched phases send
// them: CBOR chunk payloads (application/cbor) or Trace JSON lines. cycle
// shifts every trace id, so that each cycle's requests store new spans
// (identical spans sent again are not stored again: storedir's
// checkVersions).
func putBodies(tb testing.TB, format string, cycle uint64, n int) (bodies [][]byte, counts []int) {
	tb.Helper()
	g := bench.NewGenerator(bench.Workload{Seed: 3})
	var enc trace.ChunkEncoder
	var batch []*trace.Span
	spans := 0
	flush := func() {
		for _, sp := range batch {
			for k := range 8 {
				sp.TraceID[8+k] ^= byte(cycle >> (8 * k))
			}
		}
		var body []byte
		var err error
		if format == "cbor" {
			body, err = enc.Encode(nil, batch)
		} else {
			var b bytes.Buffer
			for _, sp := range batch {
				line, e := sp.MarshalJSON()
				if e != nil {
					err = e
					break
				}
				b.Write(line)
				b.WriteByte('\n')
			}
			body = b.Bytes()
		}
		if err != nil {
			tb.Fatal(err)
		}
		bodies = append(bodies, body)
		counts = append(counts, len(batch))
		spans += len(batch)
		batch = batch[:0]
	}
	for spans < n {
		batch = append(batch, g.Trace()...)
		if len(batch) >= 500 {
			flush()
		}
	}
	return bodies, counts
}

// threadCPU is the CPU time of the calling OS thread (CLOCK_THREAD_CPUTIME_ID).
func threadCPU(tb testing.TB) time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		tb.Fatal(errno)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkPut measures POST /v1/traces of batched requests (about 500
// spans of the bench workload each) through the handler, called directly
// (no socket), into a store with sync=none. handler-cpu-µs/span is the CPU
// of the calling goroutine's thread (locked to it) in the handler: reading
// and decoding the body, validation, encoding and compressing the chunks,
// the duplicate check — what the daemon spends per request before the
// committer and the indexer, which run on other threads; cpu-µs/span is
// the process's while the handler runs (indexing included).
func BenchmarkPut(b *testing.B) {
	for _, format := range []string{"cbor", "json"} {
		b.Run(format, func(b *testing.B) {
			ct := map[string]string{"cbor": "application/cbor", "json": "application/x-ndjson"}[format]
			h := putBenchHandler(b)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var handlerCPU, procCPU time.Duration
			var spans int
			var bodies [][]byte
			var counts []int
			cycle := uint64(0)
			next := 0
			for b.Loop() {
				if next == len(bodies) {
					b.StopTimer()
					bodies, counts = putBodies(b, format, cycle, 10_000)
					cycle++
					next = 0
					b.StartTimer()
				}
				body, n := bodies[next], counts[next]
				next++
				req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(body))
				req.Header.Set("Content-Type", ct)
				w := httptest.NewRecorder()
				t0, p0 := threadCPU(b), processCPU()
				h.ServeHTTP(w, req)
				handlerCPU += threadCPU(b) - t0
				procCPU += processCPU() - p0
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body.String())
				}
				spans += n
			}
			b.ReportMetric(float64(handlerCPU.Nanoseconds())/1e3/float64(spans), "handler-cpu-µs/span")
			b.ReportMetric(float64(procCPU.Nanoseconds())/1e3/float64(spans), "cpu-µs/span")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkPutOneSpan measures POST /v1/traces of one span per request
// (CBOR, the bench workload), the unbatched writers' requests, through the
// handler called directly (no socket) into a store with sync=none:
// handler-cpu-µs/span is the CPU of the calling goroutine's thread in the
// handler (reading and decoding the body, validation, the duplicate
// check, preparing the request for the committer, waiting for it).
func BenchmarkPutOneSpan(b *testing.B) {
	h := putBenchHandler(b)
	g := bench.NewGenerator(bench.Workload{Seed: 4})
	var enc trace.ChunkEncoder
	var bodies [][]byte
	for len(bodies) < 20_000 {
		for _, sp := range g.Trace() {
			body, err := enc.Encode(nil, []*trace.Span{sp})
			if err != nil {
				b.Fatal(err)
			}
			bodies = append(bodies, body)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var handlerCPU time.Duration
	n := 0
	for b.Loop() {
		if n == len(bodies) {
			b.Fatalf("more than the %d distinct requests prepared: use -benchtime %dx or less", len(bodies), len(bodies))
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(bodies[n]))
		req.Header.Set("Content-Type", "application/cbor")
		w := httptest.NewRecorder()
		t0 := threadCPU(b)
		h.ServeHTTP(w, req)
		handlerCPU += threadCPU(b) - t0
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
		n++
	}
	b.ReportMetric(float64(handlerCPU.Nanoseconds())/1e3/float64(n), "handler-cpu-µs/span")
}

// putBenchHandler is the handler of a server on a new store with
// sync=none (the put benchmarks measure the CPU of a request, not the
// disk's fsyncs), closed when b ends.
func putBenchHandler(b *testing.B) http.Handler {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return New(db, Options{Access: Access{Disabled: true}}).Handler()
}
