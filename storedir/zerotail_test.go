package storedir

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// TestOpenStoreWithZeroTail: what a kill -9 leaves in an open store is its
// data file with the zeros preallocated after the last chunk (the daemon
// had no chance to cut them). Opening it loses nothing, cuts nothing to
// .broken, counts no index lag for the zeros, and the next appends go
// right after the last chunk; closing leaves no zero tail. A chunk written
// only partly over the zeros is a torn tail as before: cut, and the cut
// bytes kept in .broken.
func TestOpenStoreWithZeroTail(t *testing.T) {
	ctx := context.Background()
	spans := genWorkload(61, 300)
	for _, tc := range []struct {
		name      string
		dropIndex bool // the indexes are lost too: rebuilt from offset 0
		torn      bool // the last chunk was written only partly
	}{
		{name: "zero tail"},
		{name: "zero tail, indexes lost", dropIndex: true},
		{name: "torn chunk then zeros", torn: true, dropIndex: true}, // its watermark was before it
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions()
			o.Sync = SyncBatch
			o.MaxStoreSize = 64 << 20
			db := openTestDB(t, dir, o)
			appendAll(t, db, spans[:200], 10)
			st := db.Stores()
			if len(st) != 1 {
				t.Fatalf("%d stores", len(st))
			}
			storeDir := filepath.Join(dir, st[0].ID)
			dataPath := filepath.Join(storeDir, dataFile)
			// The data file while the store is open ends in zeros.
			s := db.current
			end := s.data.Size()
			if fi, _ := os.Stat(dataPath); fi.Size() <= end {
				t.Fatalf("open data file of %d bytes, data %d: not preallocated", fi.Size(), end)
			}
			lastChunk := int64(0)
			sc := s.data.Scanner()
			for sc.Next() {
				lastChunk, _ = sc.Chunk()
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(dataPath); fi.Size() != end {
				t.Fatalf("closed data file of %d bytes, data %d", fi.Size(), end)
			}
			// Put back what a crash leaves: the zero tail, (part of the
			// last chunk lost), (no indexes).
			b, err := os.ReadFile(dataPath)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, make([]byte, chunk.PreallocStep)...)
			var tornBytes []byte
			if tc.torn {
				n := (end - lastChunk) / 2
				clear(b[lastChunk+n : end])
				tornBytes = bytes.Clone(b[lastChunk:]) // zeros included, as any torn tail
			}
			if err := os.WriteFile(dataPath, b, 0o640); err != nil {
				t.Fatal(err)
			}
			if tc.dropIndex {
				os.RemoveAll(filepath.Join(storeDir, metaDir))
				os.RemoveAll(filepath.Join(storeDir, textDir))
			}

			db = openTestDB(t, dir, o)
			defer func() {
				if db != nil {
					db.Close()
				}
			}()
			s = db.current
			if s == nil || s.catching.Load() {
				t.Fatal("the reopened store is not the writing store")
			}
			wantEnd := end
			if tc.torn {
				wantEnd = lastChunk
			}
			if s.data.Size() != wantEnd {
				t.Fatalf("reopened: data ends at %d, want %d", s.data.Size(), wantEnd)
			}
			if st := db.Stores(); len(st) != 1 || st[0].IndexLag != 0 {
				t.Fatalf("reopened: stores %+v; want one, whose index lag does not count the zeros", st)
			}
			broken, _ := os.ReadFile(filepath.Join(storeDir, brokenFile))
			if !bytes.Equal(broken, tornBytes) {
				t.Fatalf(".broken holds %d bytes, want the %d cut", len(broken), len(tornBytes))
			}
			// Every span acknowledged before is there (all of the torn
			// chunk's spans were written alone: the test lost them on
			// purpose, not the store).
			lost := map[trace.SpanID]bool{}
			if tc.torn {
				for _, sp := range spans[190:200] {
					lost[sp.SpanID] = true
				}
			}
			for _, sp := range spans[:200] {
				got, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID)
				if lost[sp.SpanID] {
					continue
				}
				if err != nil || got.DurationNS != sp.DurationNS {
					t.Fatalf("span %s/%s after reopen: %v", sp.TraceID, sp.SpanID, err)
				}
			}
			appendAll(t, db, spans[200:], 10)
			for _, sp := range spans[200:] {
				if _, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID); err != nil {
					t.Fatalf("span appended after reopen: %v", err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = nil
			// The file holds its chunks back to back and nothing else.
			f, err := chunk.Open(dataPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc = f.Scanner()
			n := 0
			for sc.Next() {
				n++
			}
			if _, z := sc.ZeroTail(); z != 0 || len(sc.BadRegions()) != 0 || n == 0 {
				t.Fatalf("after close: %d chunks, zero tail %d, bad %v", n, z, sc.BadRegions())
			}
		})
	}
}
