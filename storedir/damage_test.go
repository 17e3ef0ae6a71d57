package storedir

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// countingHandler counts log records whose message contains a substring.
type countingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count(sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// spanRef names one span.
type spanRef struct {
	trace trace.TraceID
	span  trace.SpanID
}

// storedChunk is one chunk of a data file and the spans it holds.
type storedChunk struct {
	off, next int64
	spans     []*trace.Span
}

func scanStoredChunks(t testing.TB, path string) []storedChunk {
	t.Helper()
	f, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []storedChunk
	sc := f.Scanner()
	for sc.Next() {
		off, payload := sc.Chunk()
		spans, err := trace.DecodeChunk(payload, trace.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, storedChunk{off, sc.Offset(), spans})
	}
	if err := sc.Err(); err != nil || len(sc.BadRegions()) > 0 {
		t.Fatalf("scan %s: %v %v", path, err, sc.BadRegions())
	}
	return out
}

// flipBit flips one bit of the file at off.
func flipBit(t testing.TB, path string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedChunkSkippedByReads flips one bit in one chunk of a sealed
// store, in each part of the chunk, and reads through the DB: searches and
// gets answer without the spans of that chunk and with a warning naming
// the store and offset, every other span reads back whole, the damage is
// logged once and counted once however often reads meet it.
func TestDamagedChunkSkippedByReads(t *testing.T) {
	cases := []struct {
		name string
		at   int64 // offset into the chunk (chunk header is 16 bytes)
		mask byte
	}{
		{"chunk magic", 1, 0x01},
		{"stored size", 5, 0x40},
		{"logical size", 9, 0x10},
		{"checksum", 14, 0x80},
		{"payload first byte", chunk.ChunkHeaderSize, 0x04},
		{"payload middle", -1, 0x20}, // -1: the middle of the stored bytes
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions()
			o.MaxStoreSize = 64 << 20
			spans := genWorkload(71, 1200)
			db := openTestDB(t, dir, o)
			appendAll(t, db, spans, 100)
			if err := db.Rotate(); err != nil { // seal store 000000
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, StoreName(0), dataFile)
			chunks := scanStoredChunks(t, path)
			if len(chunks) < 4 {
				t.Fatalf("want several chunks, got %d", len(chunks))
			}
			bad := chunks[len(chunks)/2]
			at := bad.off + tc.at
			if tc.at < 0 {
				at = bad.off + (bad.next-bad.off)/2
			}
			flipBit(t, path, at, tc.mask)
			lost := map[spanRef]bool{}
			for _, sp := range bad.spans {
				lost[spanRef{sp.TraceID, sp.SpanID}] = true
			}

			logs := &countingHandler{}
			o.Logger = slog.New(logs)
			db = openTestDB(t, dir, o)
			defer db.Close()
			wantWarning := Warning{Store: StoreName(0), Offset: bad.off}

			// Search, span mode, small pages: every span but the lost ones.
			q := Query{Spans: true, Limit: 37}
			got := map[spanRef]bool{}
			warned := 0
			for pages := 0; ; pages++ {
				res, err := db.Search(context.Background(), q)
				if err != nil {
					t.Fatalf("search page %d: %v", pages, err)
				}
				for _, w := range res.Warnings {
					if w.Store != wantWarning.Store || w.Offset != wantWarning.Offset || w.Error == "" {
						t.Fatalf("warning %+v, want store %s offset %d", w, wantWarning.Store, wantWarning.Offset)
					}
					warned++
				}
				for _, sp := range res.Spans {
					got[spanRef{sp.TraceID, sp.SpanID}] = true
				}
				if res.Cursor == "" {
					break
				}
				q.Cursor = res.Cursor
			}
			if warned == 0 {
				t.Fatal("no search page warned about the damaged chunk")
			}
			for _, sp := range spans {
				k := spanRef{sp.TraceID, sp.SpanID}
				if got[k] == lost[k] {
					t.Fatalf("span %s/%s: in results %v, in the damaged chunk %v", sp.TraceID, sp.SpanID, got[k], lost[k])
				}
			}
			// Trace mode, one page.
			res, err := db.Search(context.Background(), Query{Limit: MaxSearchLimit})
			if err != nil || len(res.Warnings) != 1 {
				t.Fatalf("trace-mode search: %v, warnings %+v", err, res.Warnings)
			}

			// Get: a trace with a span in the damaged chunk answers what is
			// left, with the warning; a span only there is not found.
			victim := bad.spans[0]
			roots, warns, err := db.GetTraceWithWarnings(context.Background(), victim.TraceID)
			if err != nil || len(warns) != 1 || warns[0].Offset != bad.off {
				t.Fatalf("get trace %s: %v, warnings %+v", victim.TraceID, err, warns)
			}
			if len(roots) == 0 && len(warns) == 0 {
				t.Fatal("get of a damaged trace answered nothing and no warning")
			}
			sp, warns, err := db.GetSpanWithWarnings(context.Background(), victim.TraceID, victim.SpanID)
			if err != nil || sp != nil && sp.ChunkNum == victim.ChunkNum && len(warns) == 0 {
				t.Fatalf("get span in the damaged chunk: %v %v %+v", sp, err, warns)
			}
			if _, err := db.GetSpan(context.Background(), victim.TraceID, victim.SpanID); sp == nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("GetSpan of a span only in the damaged chunk: %v", err)
			}
			// Every span outside the damaged chunk reads back whole.
			for i, want := range spans {
				if lost[spanRef{want.TraceID, want.SpanID}] || i%7 != 0 {
					continue
				}
				g, err := db.GetSpan(context.Background(), want.TraceID, want.SpanID)
				if err != nil {
					t.Fatalf("span %s/%s: %v", want.TraceID, want.SpanID, err)
				}
				w, gg := *want, *g
				w.Children, gg.Children = nil, nil
				if !gg.Equal(&w) {
					t.Fatalf("span %s/%s differs: %s", want.TraceID, want.SpanID, trace.Diff(&w, &gg))
				}
			}
			if n := db.DamagedChunks(); n != 1 {
				t.Fatalf("DamagedChunks = %d, want 1", n)
			}
			if n := logs.count("damaged chunk"); n != 1 {
				t.Fatalf("the damaged chunk was logged %d times, want once", n)
			}
		})
	}
}

// TestDamagedChunkIOErrorStillFails: an I/O error is not damage — a read
// that cannot reach the disk fails instead of answering partial results.
func TestDamagedChunkIOErrorStillFails(t *testing.T) {
	if isChunkDamage(errors.New("read: input/output error")) {
		t.Fatal("an I/O error counted as a damaged chunk")
	}
	if !isChunkDamage(&chunk.CorruptionError{Offset: 16, Reason: chunk.Checksum}) {
		t.Fatal("a corrupt chunk not counted as damage")
	}
}
