package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// getFixture is a server over a store of generated traces (the bench
// workload), reached over a real socket.
type getFixture struct {
	srv    *httptest.Server
	db     *storedir.DB
	traces []trace.TraceID
	spans  map[trace.TraceID]int
}

func newGetFixture(tb testing.TB, n int) *getFixture {
	return newGetFixtureCache(tb, n, 0)
}

// newGetFixtureCache is newGetFixture with a chunk cache of cacheViews
// views (0: the default).
func newGetFixtureCache(tb testing.TB, n, cacheViews int) *getFixture {
	tb.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.ChunkCacheViews = cacheViews
	db, err := storedir.Open(context.Background(), tb.TempDir(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	f := &getFixture{db: db, spans: map[trace.TraceID]int{}}
	g := bench.NewGenerator(bench.Workload{Seed: 7})
	var req []*trace.Span
	for stored := 0; stored < n; {
		tr := g.Trace()
		f.traces = append(f.traces, tr[0].TraceID)
		f.spans[tr[0].TraceID] = len(tr)
		req = append(req, tr...)
		if len(req) >= 500 || stored+len(req) >= n {
			if err := db.Append(context.Background(), req); err != nil {
				tb.Fatal(err)
			}
			stored += len(req)
			req = nil
		}
	}
	f.srv = httptest.NewServer(New(db, Options{Access: Access{Disabled: true}}).Handler())
	tb.Cleanup(f.srv.Close)
	return f
}

// TestGetAnswerFraming: GET /v1/traces/{id} answers with the whole body's
// Content-Length (not chunked), one Trace JSON line per root span, for
// traces of one to many spans.
func TestGetAnswerFraming(t *testing.T) {
	f := newGetFixture(t, 2000)
	checked := 0
	for _, id := range f.traces {
		resp, err := f.srv.Client().Get(f.srv.URL + "/v1/traces/" + id.String())
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("trace %s: %d %s", id, resp.StatusCode, body)
		}
		if len(resp.TransferEncoding) != 0 || resp.ContentLength != int64(len(body)) {
			t.Fatalf("trace %s: transfer encoding %q, Content-Length %d, body %d bytes", id, resp.TransferEncoding, resp.ContentLength, len(body))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Fatalf("trace %s: Content-Type %q", id, ct)
		}
		spans := 0
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if err := trace.DecodeJSONLines(bytes.NewReader(sc.Bytes()), trace.Limits{}, func(sp *trace.Span) error {
				if sp.TraceID != id {
					return fmt.Errorf("span of trace %s", sp.TraceID)
				}
				spans += countTree(sp)
				return nil
			}); err != nil {
				t.Fatalf("trace %s: %v", id, err)
			}
		}
		if spans != f.spans[id] {
			t.Fatalf("trace %s: %d spans in the answer, %d stored", id, spans, f.spans[id])
		}
		if checked++; checked == 200 {
			break
		}
	}
}

// TestGetAnswersConcurrent: concurrent gets, through a chunk cache of one
// view (so that the payload buffers of the chunks a get read are reused by
// the next gets as soon as it answered), each answer exactly the trace's
// Trace JSON as an unscoped read of it gives: no answer holds bytes of
// another get's chunk.
func TestGetAnswersConcurrent(t *testing.T) {
	f := newGetFixtureCache(t, 3000, 1)
	want := map[trace.TraceID][]byte{}
	for _, id := range f.traces {
		roots, err := f.db.GetTrace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := appendTraceJSON(nil, roots)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = b
	}
	errs := make(chan error, 4)
	for c := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(c), 9))
			for range 100 {
				id := f.traces[r.IntN(len(f.traces))]
				resp, err := f.srv.Client().Get(f.srv.URL + "/v1/traces/" + id.String())
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Equal(body, want[id])) {
					err = fmt.Errorf("trace %s: %d, answer\n%s\nwant\n%s", id, resp.StatusCode, body, want[id])
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func countTree(sp *trace.Span) int {
	n := 1
	for _, c := range sp.Children {
		n += countTree(c)
	}
	return n
}

// BenchmarkGetTrace measures GET /v1/traces/{id} of random stored traces
// over a keep-alive connection, handler and socket included; cpu-ns/op is
// the whole process's (server and client). "hot" has every chunk in the
// chunk cache; "cold" a cache of one view, so that almost every get reads
// and decompresses its chunk's string table and span frame, as at 10M
// spans.
func BenchmarkGetTrace(b *testing.B) {
	for _, bc := range []struct {
		name  string
		views int
	}{{"hot", 0}, {"cold", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newGetFixtureCache(b, 20_000, bc.views)
			hc := f.srv.Client()
			r := rand.New(rand.NewPCG(3, 4))
			var buf bytes.Buffer
			cpu0 := processCPU()
			for b.Loop() {
				resp, err := hc.Get(f.srv.URL + "/v1/traces/" + f.traces[r.IntN(len(f.traces))].String())
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				if _, err := buf.ReadFrom(resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%d %s", resp.StatusCode, buf.Bytes())
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
