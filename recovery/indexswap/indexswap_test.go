package indexswap

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newStoreDir makes a store directory whose meta/ and text/ hold a file
// "v" reading "old", and whose .rebuild directories hold "new".
func newStoreDir(t *testing.T, rebuild bool) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range indexDirs {
		write(t, filepath.Join(dir, n, "v"), "old")
		if rebuild {
			write(t, filepath.Join(dir, n+RebuildSuffix, "v"), "new")
			write(t, filepath.Join(dir, n+RebuildSuffix, "sub", "w"), "new")
		}
	}
	return dir
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o640); err != nil {
		t.Fatal(err)
	}
}

// versions returns what each index holds ("old", "new" or "missing") and
// the directory's entries.
func versions(t *testing.T, dir string) ([]string, []string) {
	t.Helper()
	var vs []string
	for _, n := range indexDirs {
		b, err := os.ReadFile(filepath.Join(dir, n, "v"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			vs = append(vs, "missing")
		case err != nil:
			t.Fatal(err)
		default:
			vs = append(vs, string(b))
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return vs, names
}

func TestCommit(t *testing.T) {
	dir := newStoreDir(t, true)
	if err := Commit(dir, indexDirs, nil); err != nil {
		t.Fatal(err)
	}
	vs, names := versions(t, dir)
	if !slices.Equal(vs, []string{"new", "new"}) || !slices.Equal(names, []string{"meta", "text"}) {
		t.Fatalf("after commit: %v, entries %v", vs, names)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "meta", "sub", "w")); err != nil || string(b) != "new" {
		t.Fatalf("nested file: %q %v", b, err)
	}
	if out, err := FinishInterrupted(dir); err != nil || out != Clean {
		t.Fatalf("finish after a clean commit: %v %v", out, err)
	}
}

// TestCrashAtEveryStep interrupts Commit after each of its durable steps
// and checks that FinishInterrupted leaves both old indexes (before the
// marker) or both new ones (after it), never a mix, with nothing left over.
func TestCrashAtEveryStep(t *testing.T) {
	var steps []string
	dir := newStoreDir(t, true)
	if err := Commit(dir, indexDirs, func(s, n string) error { steps = append(steps, s+" "+n); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 7 {
		t.Fatalf("steps: %v", steps)
	}
	errCrash := errors.New("crash")
	for i, st := range steps {
		t.Run(st, func(t *testing.T) {
			dir := newStoreDir(t, true)
			n := 0
			err := Commit(dir, indexDirs, func(string, string) error {
				n++
				if n == i+1 {
					return errCrash
				}
				return nil
			})
			if !errors.Is(err, errCrash) {
				t.Fatalf("commit: %v", err)
			}
			// A crash during FinishInterrupted too: run it twice.
			out, err := FinishInterrupted(dir)
			if err != nil {
				t.Fatal(err)
			}
			if out2, err := FinishInterrupted(dir); err != nil || out2 != Clean {
				t.Fatalf("second finish: %v %v", out2, err)
			}
			vs, names := versions(t, dir)
			// Step 2 writes the marker: before it the swap rolls back, after
			// it forward; after the last step (marker removed) only the
			// replaced indexes are left to remove.
			want, wantOut := "old", RolledBack
			switch {
			case i == len(steps)-1:
				want, wantOut = "new", Clean
			case i >= 1:
				want, wantOut = "new", RolledForward
			}
			if !slices.Equal(vs, []string{want, want}) {
				t.Fatalf("crash after %q: indexes %v, want both %s", st, vs, want)
			}
			if !slices.Equal(names, []string{"meta", "text"}) {
				t.Fatalf("crash after %q: leftovers %v", st, names)
			}
			if out != wantOut {
				t.Fatalf("crash after %q: outcome %v, want %v", st, out, wantOut)
			}
		})
	}
}

func TestRollBackWithoutMarker(t *testing.T) {
	dir := newStoreDir(t, true)
	write(t, filepath.Join(dir, "meta.old", "v"), "older")
	write(t, filepath.Join(dir, Marker+".tmp"), "half")
	pending, err := Pending(dir)
	if err != nil || len(pending) != 4 {
		t.Fatalf("pending: %v %v", pending, err)
	}
	out, err := FinishInterrupted(dir)
	if err != nil || out != RolledBack {
		t.Fatalf("finish: %v %v", out, err)
	}
	vs, names := versions(t, dir)
	if !slices.Equal(vs, []string{"old", "old"}) || !slices.Equal(names, []string{"meta", "text"}) {
		t.Fatalf("after rollback: %v %v", vs, names)
	}
}

func TestRollForwardWithIndexMissing(t *testing.T) {
	dir := newStoreDir(t, true)
	os.RemoveAll(filepath.Join(dir, "text")) // the index was deleted before recovery
	if err := Commit(dir, indexDirs, nil); err != nil {
		t.Fatal(err)
	}
	if vs, _ := versions(t, dir); !slices.Equal(vs, []string{"new", "new"}) {
		t.Fatalf("after commit: %v", vs)
	}
}

func TestBadMarkerRefused(t *testing.T) {
	for name, content := range map[string]string{
		"foreign header": "something else\nmeta\n",
		"path traversal": markerHeader + "\n../../etc\n",
		"duplicate":      markerHeader + "\nmeta\nmeta\n",
		"empty":          markerHeader + "\n",
		"huge":           markerHeader + "\n" + strings.Repeat("x", maxMarkerSize),
	} {
		t.Run(name, func(t *testing.T) {
			dir := newStoreDir(t, true)
			write(t, filepath.Join(dir, Marker), content)
			if _, err := FinishInterrupted(dir); err == nil {
				t.Fatal("a bad marker was accepted")
			}
			if vs, _ := versions(t, dir); !slices.Equal(vs, []string{"old", "old"}) {
				t.Fatalf("a bad marker changed the indexes: %v", vs)
			}
		})
	}
}

func TestCommitRefusesBadInput(t *testing.T) {
	dir := newStoreDir(t, false)
	if err := Commit(dir, indexDirs, nil); err == nil {
		t.Fatal("commit without rebuilt indexes succeeded")
	}
	if err := Commit(dir, []string{"../x"}, nil); err == nil {
		t.Fatal("commit of a foreign name succeeded")
	}
	if err := Commit(dir, nil, nil); err == nil {
		t.Fatal("empty commit succeeded")
	}
}
