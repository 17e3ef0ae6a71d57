package migrate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// The fixture of store format version 1: a data directory as ztsd 1 writes
// it, reduced to what defines it (each store's config.props and
// traces.zts; the indexes are rebuilt from them), plus the Trace JSON of
// every trace it holds. Regenerate (only while storedir.FormatVersion is 1)
// with
//
//	ZTSD_UPDATE_FIXTURES=1 go test ./migrate -run TestFixtureV1
//
// When version 2 arrives, keep v1 as it is and add v2 next to it.
const (
	fixtureV1Dir      = "../testdata/stores/v1"
	fixtureV1Expected = "../testdata/stores/v1/expected.jsonl"
	// What the fixture holds: 3 stores (lz4+crc32 sealed, zlib+crc32
	// sealed, uncompressed without checksums open), 84 pieces in 16
	// traces, some spread over two stores, one of them a span streamed in
	// three pieces across two stores, one with every kind of value.
	fixtureV1Stores = 3
	fixtureV1Pieces = 84
	fixtureV1Traces = 16
)

// fixtureV1Spans are the spans of the v1 fixture, per store.
func fixtureV1Spans() [3][]*trace.Span {
	var out [3][]*trace.Span
	w := workload.Spans(101, 80)
	out[0] = slices.Clone(w[:45])
	out[1] = slices.Clone(w[45:70])
	out[2] = slices.Clone(w[70:])
	// A streamed span in three pieces, the last one in the next store.
	tid := trace.TraceID{0x5e, 0x7e, 0xa3, 0xed, 1}
	for c := 0; c < 3; c++ {
		root := &trace.Record{Method: "void Servlet.service(Request, Response)", Open: c < 2, Calls: int64(3 * (c + 1))}
		if c > 0 {
			root.Children = []*trace.Record{{Method: fmt.Sprintf("Dao.query#%d", c), StartNS: int64(c) * 1000, DurationNS: 400, Calls: 1,
				Attrs: trace.Attrs{{Key: "sql", Value: trace.String("SELECT * FROM t WHERE id = ?")}}}}
		}
		if c == 2 {
			root.DurationNS = 5000
		}
		sp := &trace.Span{TraceID: tid, SpanID: 0x51, Type: "http", StartNS: workload.Base + 7, ChunkNum: uint32(c), Root: root, Source: trace.SourceZorka}
		sp.Attrs.Set("piece", trace.Int(int64(c)))
		sp.FillSummary()
		out[c/2] = append(out[c/2], sp)
	}
	// A span with every kind of value, an exception chain and non-ASCII text.
	ex := &trace.Exception{Class: "java.sql.SQLException", Message: "deadlock détecté ☠",
		Stack: []trace.StackFrame{{Class: "org.h2.Driver", Method: "exec", File: "Driver.java", Line: 42}, {Class: "Main", Method: "main", Line: -1}},
		Cause: &trace.Exception{Class: "java.io.IOException", Message: "broken pipe"}}
	edge := &trace.Span{TraceID: trace.TraceID{0xed, 0x9e}, SpanID: 0xed9e, Type: "edge", StartNS: workload.Base + 99, DurationNS: 12345,
		Error: true, Source: trace.SourceJSON,
		Root: &trace.Record{Method: "Edge.run", DurationNS: 12345, Calls: 2, Exception: ex,
			Children: []*trace.Record{{Method: "Edge.child", StartNS: 5, DurationNS: 0}}}}
	edge.Attrs.Set("float", trace.Float(3.25))
	edge.Attrs.Set("half", trace.Float(0.5))
	edge.Attrs.Set("big", trace.Int(-1<<62))
	edge.Attrs.Set("null", trace.Null())
	edge.Attrs.Set("bool", trace.Bool(false))
	edge.Attrs.Set("list", trace.List(trace.Int(1), trace.String("two"), trace.List()))
	edge.Attrs.Set("map", trace.MapValue(trace.Attrs{{Key: "z", Value: trace.Int(1)}, {Key: "a", Value: trace.String("")}}))
	edge.Attrs.Set("unicode ключ", trace.String("значение 🚀"))
	edge.FillSummary()
	out[1] = append(out[1], edge)
	return out
}

// generateFixtureV1 writes the fixture into dir.
func generateFixtureV1(t *testing.T, dir string) {
	parts := fixtureV1Spans()
	opts := []chunk.Options{lz4crc, {Compression: chunk.Zlib, Checksums: true}, {}}
	tmp := filepath.Join(t.TempDir(), "gen")
	for i, spans := range parts {
		o := storedir.DefaultOptions()
		o.Sync = storedir.SyncNone
		o.Chunk = opts[i]
		o.ChunkTargetSize = 4 << 10
		o.Now = fixedNow
		db, err := storedir.Open(context.Background(), tmp, o)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		for j := 0; j < len(spans); j += 10 {
			if err := db.Append(context.Background(), spans[j:min(j+10, len(spans))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(dir)
	for i := range parts {
		name := storedir.StoreName(uint32(i))
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		for _, f := range []string{propsFileName, dataFileName} {
			b, err := os.ReadFile(filepath.Join(tmp, name, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var all []*trace.Span
	for _, p := range parts {
		all = append(all, p...)
	}
	var buf bytes.Buffer
	writeTracesJSON(t, &buf, readTraces(t, tmp, traceIDs(all)), traceIDs(all))
	if err := os.WriteFile(filepath.Join(dir, "expected.jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeTracesJSON writes each trace's roots as Trace JSON lines, in id order.
func writeTracesJSON(t testing.TB, w *bytes.Buffer, traces map[trace.TraceID][]*trace.Span, ids []trace.TraceID) {
	t.Helper()
	for _, id := range ids {
		for _, r := range traces[id] {
			b, err := r.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			w.Write(b)
			w.WriteByte('\n')
		}
	}
}

// TestFixtureV1 migrates the checked-in store of format version 1 (to
// zlib) and compares every trace, as Trace JSON, with what it is known to
// hold.
func TestFixtureV1(t *testing.T) {
	if os.Getenv("ZTSD_UPDATE_FIXTURES") != "" {
		if storedir.FormatVersion != 1 {
			t.Fatal("the v1 fixture must be generated by a ztsd that writes format version 1")
		}
		generateFixtureV1(t, fixtureV1Dir)
	}
	src := filepath.Join(t.TempDir(), "v1")
	copyTree(t, fixtureV1Dir, src)
	os.Remove(filepath.Join(src, "expected.jsonl"))
	for i := 0; i < fixtureV1Stores; i++ {
		p, err := os.ReadFile(filepath.Join(src, storedir.StoreName(uint32(i)), propsFileName))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(p), "format.version=1\n") {
			t.Fatalf("fixture store %d is not format version 1:\n%s", i, p)
		}
	}
	expected, err := os.ReadFile(fixtureV1Expected)
	if err != nil {
		t.Fatal(err)
	}
	var ids []trace.TraceID
	seen := map[trace.TraceID]bool{}
	sc := bufio.NewScanner(bytes.NewReader(expected))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var sp trace.Span
		if err := sp.UnmarshalJSON(sc.Bytes()); err != nil {
			t.Fatal(err)
		}
		if !seen[sp.TraceID] {
			seen[sp.TraceID] = true
			ids = append(ids, sp.TraceID)
		}
	}
	if len(ids) != fixtureV1Traces {
		t.Fatalf("expected.jsonl holds %d traces, want %d", len(ids), fixtureV1Traces)
	}
	to := filepath.Join(t.TempDir(), "migrated")
	rep := migrateOK(t, Options{Sources: []string{src}, Target: to, Compression: ptr(chunk.Zlib)})
	if rep.SourceStores != fixtureV1Stores || rep.TargetStores != fixtureV1Stores || rep.SpansWritten != fixtureV1Pieces ||
		rep.Verify.Traces != fixtureV1Traces || rep.UpgradedStores != 0 || rep.BadRegionsTotal != 0 {
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Log(b.String())
		t.Fatalf("report: %d source stores, %d target stores, %d pieces, %d traces, %d upgraded, %d bad regions",
			rep.SourceStores, rep.TargetStores, rep.SpansWritten, rep.Verify.Traces, rep.UpgradedStores, rep.BadRegionsTotal)
	}
	var got bytes.Buffer
	writeTracesJSON(t, &got, readTraces(t, to, ids), ids)
	if !bytes.Equal(got.Bytes(), expected) {
		gl, el := strings.Split(got.String(), "\n"), strings.Split(string(expected), "\n")
		for i := range min(len(gl), len(el)) {
			if gl[i] != el[i] {
				t.Fatalf("line %d differs:\n got %s\nwant %s", i+1, gl[i], el[i])
			}
		}
		t.Fatalf("%d lines, want %d", len(gl), len(el))
	}
	mustVerify(t, to)
}
