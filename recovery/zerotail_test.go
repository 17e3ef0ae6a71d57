package recovery

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/storedir"
)

// TestZeroTail: the zeros an open store's writer preallocates after its
// last chunk (left there by a crash) are the end of the data: verify
// notes them, recover cuts them without moving anything to .broken and
// loses nothing. In a sealed store (which ends with its last chunk) they
// are a problem: verify reports it, recover cuts them and seals again.
func TestZeroTail(t *testing.T) {
	ctx := context.Background()
	for _, sealed := range []bool{false, true} {
		f := corruptionFixture(t).clone(t)
		if sealed {
			db, err := storedir.Open(ctx, f.dir, testStoreOptions())
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		appendBytes(t, f.dataPath(), make([]byte, chunk.PreallocStep-123))
		rep, err := VerifyDataDir(ctx, f.dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := rep.Stores[0]
		if s.ChunksOK != int64(len(f.chunks)) || s.ChunksBad != 0 {
			t.Fatalf("sealed %v: verify read %d chunks, %d bad; want %d, 0", sealed, s.ChunksOK, s.ChunksBad, len(f.chunks))
		}
		kinds := problemKinds(rep.Problems)
		if sealed {
			if rep.OK || !slices.Contains(kinds, "tail") {
				t.Fatalf("sealed store with a zero tail: verify OK %v, problems %v", rep.OK, kinds)
			}
		} else {
			if !rep.OK || len(kinds) != 0 || !slices.ContainsFunc(s.Notes, func(n string) bool { return strings.Contains(n, "zero bytes preallocated") }) {
				t.Fatalf("open store with a zero tail: verify OK %v, problems %v, notes %v", rep.OK, rep.Problems, s.Notes)
			}
		}
		rrep, err := RecoverDataDir(ctx, f.dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		rs := rrep.Stores[0]
		if len(rs.BadRegions) != 0 || rs.BytesMovedAside != 0 || !slices.ContainsFunc(rs.Actions, func(a string) bool { return strings.Contains(a, "zero bytes preallocated") }) {
			t.Fatalf("sealed %v: recover: bad %v, moved %d, actions %v", sealed, rs.BadRegions, rs.BytesMovedAside, rs.Actions)
		}
		if _, err := os.Stat(filepath.Join(f.store, BrokenFile)); err == nil {
			t.Fatalf("sealed %v: recover wrote %s for a zero tail", sealed, BrokenFile)
		}
		if fi, _ := os.Stat(f.dataPath()); fi.Size() != f.size {
			t.Fatalf("sealed %v: data file %d bytes after recover, want %d", sealed, fi.Size(), f.size)
		}
		wantState := config.StateOpen
		if sealed {
			wantState = config.StateSealed
		}
		if rs.State != wantState {
			t.Fatalf("sealed %v: recovered state %s", sealed, rs.State)
		}
		rep, err = VerifyDataDir(ctx, f.dir, Options{})
		if err != nil || !rep.OK {
			t.Fatalf("sealed %v: verify after recover: %v %v", sealed, err, rep.Problems)
		}
		f.expectReadable(t, nil)
	}
}
