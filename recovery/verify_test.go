package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/textindex"
)

// TestSpanTextsMatchTextIndex: the strings verify expects in the text
// index (spanTexts) are exactly the strings storedir interns for the same
// spans, so verify neither misses a dropped string nor flags one that was
// never meant to be there.
func TestSpanTextsMatchTextIndex(t *testing.T) {
	f := corruptionFixture(t)
	want := map[string]bool{}
	for _, sp := range f.spans {
		spanTexts(sp, func(s string) { want[s] = true })
	}
	tx, err := textindex.OpenReadOnly(filepath.Join(f.store, TextDir), textindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	got := map[string]bool{}
	for id := uint64(1); id <= tx.Count(); id++ {
		s, err := tx.String(id)
		if err != nil {
			t.Fatalf("string %d: %v", id, err)
		}
		got[s] = true
	}
	for s := range want {
		if !got[s] {
			t.Errorf("spanTexts yields %q, which storedir did not intern", s)
		}
	}
	for s := range got {
		if !want[s] {
			t.Errorf("storedir interned %q, which spanTexts does not yield", s)
		}
	}
	if len(got) < 100 {
		t.Fatalf("only %d strings interned", len(got))
	}
}

// TestVerifyCleanStore: a store written and closed by storedir verifies
// clean, with every count right, and verify writes nothing.
func TestVerifyCleanStore(t *testing.T) {
	f := corruptionFixture(t)
	before := snapshotTree(t, f.dir)
	rep, err := VerifyDataDir(context.Background(), f.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteText(&b)
	if !rep.OK || len(rep.Problems) != 0 {
		t.Fatalf("verify of a clean store:\n%s", b.String())
	}
	s := rep.Stores[0]
	if s.ChunksOK != int64(len(f.chunks)) || s.Spans != int64(len(f.spans)) || !s.IndexesChecked || s.State != "open" {
		t.Fatalf("verify counts: %+v", s)
	}
	if !strings.Contains(b.String(), "verify: OK") {
		t.Fatalf("text report: %s", b.String())
	}
	if after := snapshotTree(t, f.dir); !maps2Equal(before, after) {
		t.Fatal("verify changed the data directory")
	}
}

// TestVerifyNextToDaemon: while the data directory is locked (a daemon
// runs) verify checks the data files only, and recover refuses to run.
func TestVerifyNextToDaemon(t *testing.T) {
	f := corruptionFixture(t)
	db, err := storedir.Open(context.Background(), f.dir, testStoreOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := VerifyDataDir(context.Background(), f.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Stores[0].IndexesChecked || len(rep.Notes) == 0 {
		t.Fatalf("verify next to a daemon: ok=%v indexes checked=%v notes=%v", rep.OK, rep.Stores[0].IndexesChecked, rep.Notes)
	}
	for _, dry := range []bool{false, true} {
		_, err = RecoverDataDir(context.Background(), f.dir, Options{DryRun: dry})
		if !errors.Is(err, storedir.ErrLocked) || !strings.Contains(err.Error(), "pid") {
			t.Fatalf("recover (dry run %v) next to a daemon: %v", dry, err)
		}
		_, err = RecoverStore(context.Background(), f.store, Options{DryRun: dry})
		if !errors.Is(err, storedir.ErrLocked) {
			t.Fatalf("recover --store (dry run %v) next to a daemon: %v", dry, err)
		}
	}
}

// TestRecoverWithoutIndexesOrProps: a data directory holding nothing but
// data files is rebuilt completely.
func TestRecoverWithoutIndexesOrProps(t *testing.T) {
	f := corruptionFixture(t)
	for _, n := range []string{MetaDir, TextDir, PropsFile} {
		if err := os.RemoveAll(filepath.Join(f.store, n)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := VerifyDataDir(context.Background(), f.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := problemKinds(rep.Problems); strings.Join(got, ",") != "index-missing,props" {
		t.Fatalf("verify: %v", got)
	}
	rr, err := RecoverStore(context.Background(), f.store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Traces == 0 || rr.Spans != int64(len(f.spans)) {
		t.Fatalf("recover: %+v", rr)
	}
	rep, err = VerifyStore(context.Background(), f.store, Options{})
	if err != nil || !rep.OK {
		t.Fatalf("verify after recover: %v %+v", err, rep.Problems)
	}
	f.expectReadable(t, nil)
}
