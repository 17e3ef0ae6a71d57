package recovery

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/storedir"
)

var (
	fixtureOnce sync.Once
	sharedFix   *fixture
)

// corruptionFixture is one store of 3000 workload spans in about 300
// chunks, built once per test binary; each case works on a copy.
func corruptionFixture(t *testing.T) *fixture {
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "recovery-fixture-")
		if err != nil {
			t.Fatal(err)
		}
		f := buildFixture(t, 42, 3000, 50)
		// buildFixture's directory belongs to this test; keep a copy for
		// the whole binary.
		copyTree(t, f.dir, dir)
		f.dir, f.store = dir, filepath.Join(dir, storedir.StoreName(0))
		sharedFix = f
	})
	if sharedFix == nil {
		t.Fatal("fixture not built")
	}
	if len(sharedFix.chunks) < 50 {
		t.Fatalf("fixture has only %d chunks", len(sharedFix.chunks))
	}
	return sharedFix.clone(t)
}

// corruptionCase damages a copy of the fixture and says what must follow.
type corruptionCase struct {
	name string
	// corrupt damages f and returns the indexes of the chunks whose spans
	// are lost.
	corrupt func(t *testing.T, f *fixture) (lost []int)
	// verify: the problem kinds verify must report before recovery; maybe
	// lists kinds it may report too (the exact set depends on byte-level
	// coincidences).
	verify, maybe []string
	// note: with no verify kinds, verify passes and notes this (index lag
	// is what a crash leaves, not damage).
	note string
	// regions: the bad regions recover reports; moved: bytes moved aside
	// (a function of the fixture).
	regions int
	moved   func(f *fixture) int64
	// extraChunks: good chunks that exist besides the fixture's (duplicates).
	extraChunks int
	// after: problem kinds verify still reports after recovery (damage in
	// the middle of the data file stays where it is).
	after []string
}

func none(*fixture) int64 { return 0 }

func truncateAt(t *testing.T, f *fixture, off int64) {
	if err := os.Truncate(f.dataPath(), off); err != nil {
		t.Fatal(err)
	}
}

func corruptionCases() []corruptionCase {
	last := func(f *fixture) fixtureChunk { return f.chunks[len(f.chunks)-1] }
	mid := func(f *fixture) int { return len(f.chunks) / 2 }
	cases := []corruptionCase{
		{
			name: "truncate inside the last chunk header",
			corrupt: func(t *testing.T, f *fixture) []int {
				truncateAt(t, f, last(f).off+7)
				return []int{len(f.chunks) - 1}
			},
			verify: []string{"dangling-entry", "index-ahead", "tail"},
			// The indexes claim more than the data holds.
			regions: 1, moved: func(f *fixture) int64 { return 7 },
		},
		{
			name: "truncate inside the last chunk payload",
			corrupt: func(t *testing.T, f *fixture) []int {
				c := last(f)
				truncateAt(t, f, c.off+16+(c.next-c.off-16)/2)
				return []int{len(f.chunks) - 1}
			},
			verify:  []string{"dangling-entry", "index-ahead", "tail"},
			regions: 1, moved: func(f *fixture) int64 { c := last(f); return 16 + (c.next-c.off-16)/2 },
		},
		{
			name: "zero a 4 KiB sector in the middle",
			corrupt: func(t *testing.T, f *fixture) []int {
				z := (f.size / 2) &^ 4095
				writeBytes(t, f.dataPath(), z, make([]byte, 4096))
				return f.chunksOverlapping(z, z+4096)
			},
			verify:  []string{"chunk", "dangling-entry"},
			regions: 1, moved: none, after: []string{"chunk"},
		},
		{
			name: "flip one bit in a payload",
			corrupt: func(t *testing.T, f *fixture) []int {
				c := f.chunks[mid(f)]
				flipBit(t, f.dataPath(), c.off+16+(c.next-c.off-16)/2, 3)
				return []int{mid(f)}
			},
			verify:  []string{"chunk", "dangling-entry"},
			regions: 1, moved: none, after: []string{"chunk"},
		},
		{
			name: "delete meta",
			corrupt: func(t *testing.T, f *fixture) []int {
				os.RemoveAll(filepath.Join(f.store, MetaDir))
				return nil
			},
			verify: []string{"index-missing"}, moved: none,
		},
		{
			name: "delete text",
			corrupt: func(t *testing.T, f *fixture) []int {
				os.RemoveAll(filepath.Join(f.store, TextDir))
				return nil
			},
			verify: []string{"index-missing"}, moved: none,
		},
		{
			name: "delete meta and text",
			corrupt: func(t *testing.T, f *fixture) []int {
				os.RemoveAll(filepath.Join(f.store, MetaDir))
				os.RemoveAll(filepath.Join(f.store, TextDir))
				return nil
			},
			verify: []string{"index-missing"}, moved: none,
		},
		{
			name: "corrupt a Pebble sstable of meta",
			corrupt: func(t *testing.T, f *fixture) []int {
				sst := largestFile(t, filepath.Join(f.store, MetaDir), ".sst")
				fi, _ := os.Stat(sst)
				writeBytes(t, sst, fi.Size()/2, bytes.Repeat([]byte{0xa5}, 16))
				return nil
			},
			verify: []string{"index-corrupt"}, moved: none,
		},
		{
			name: "corrupt the Pebble manifest of text",
			corrupt: func(t *testing.T, f *fixture) []int {
				m, _ := filepath.Glob(filepath.Join(f.store, TextDir, "MANIFEST-*"))
				if len(m) == 0 {
					t.Fatal("no MANIFEST in text/")
				}
				for _, p := range m {
					fi, _ := os.Stat(p)
					os.Truncate(p, fi.Size()/2)
				}
				return nil
			},
			verify: []string{"index-corrupt"}, moved: none,
		},
		{
			name: "append garbage",
			corrupt: func(t *testing.T, f *fixture) []int {
				r := rand.New(rand.NewPCG(1, 2))
				g := make([]byte, 1000)
				for i := range g {
					g[i] = byte(r.UintN(256))
				}
				appendBytes(t, f.dataPath(), g)
				return nil
			},
			verify:  []string{"tail"},
			regions: 1, moved: func(*fixture) int64 { return 1000 },
		},
		{
			name: "duplicate a chunk at the end",
			corrupt: func(t *testing.T, f *fixture) []int {
				c := f.chunks[mid(f)]
				appendBytes(t, f.dataPath(), readBytes(t, f.dataPath(), c.off, c.next-c.off))
				return nil
			},
			// Past the indexes' watermarks: the daemon would index it.
			// That is index lag, which verify notes but passes.
			note: "index lag", moved: none, extraChunks: 1,
		},
		{
			name: "duplicate a chunk in place",
			corrupt: func(t *testing.T, f *fixture) []int {
				c := f.chunks[mid(f)]
				data, err := os.ReadFile(f.dataPath())
				if err != nil {
					t.Fatal(err)
				}
				dup := slices.Concat(data[:c.next], data[c.off:c.next], data[c.next:])
				if err := os.WriteFile(f.dataPath(), dup, 0o640); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			// Every later chunk moved: the index points at the wrong bytes.
			verify: []string{"dangling-entry", "entry-mismatch", "unindexed-chunk"},
			moved:  none, extraChunks: 1,
		},
		{
			name: "delete config.props",
			corrupt: func(t *testing.T, f *fixture) []int {
				os.Remove(filepath.Join(f.store, PropsFile))
				return nil
			},
			verify: []string{"props"}, moved: none,
		},
	}
	// A bit in each field of a chunk header costs that chunk.
	for _, field := range []struct {
		name string
		at   int64
		bit  uint
	}{{"magic", 1, 2}, {"stored size", 6, 4}, {"logical size", 10, 1}, {"checksum", 13, 6}} {
		cases = append(cases, corruptionCase{
			name: "flip one bit in a chunk header: " + field.name,
			corrupt: func(t *testing.T, f *fixture) []int {
				flipBit(t, f.dataPath(), f.chunks[mid(f)].off+field.at, field.bit)
				return []int{mid(f)}
			},
			verify:  []string{"chunk", "dangling-entry"},
			regions: 1, moved: none, after: []string{"chunk"},
		})
	}
	// A bit in each field of the file header: the header is repaired and
	// nothing is lost.
	for _, field := range []struct {
		name string
		at   int64
		bit  uint
		kind string
	}{
		{"magic", 2, 0, "header"},
		{"CRC-32 flag", 7, 4, "header"},
		{"compression bits", 7, 1, "header"},
		{"compression to none", 7, 0, "header"},
		{"master checksum", 10, 5, "master"},
		{"reserved", 13, 7, "header"},
	} {
		cases = append(cases, corruptionCase{
			name: "flip one bit in the file header: " + field.name,
			corrupt: func(t *testing.T, f *fixture) []int {
				flipBit(t, f.dataPath(), field.at, field.bit)
				return nil
			},
			verify: []string{field.kind}, moved: none,
		})
	}
	return cases
}

// TestCorruptionTable damages a store of known contents in each way the
// issue lists and checks what verify reports, what recover reports and
// does, that verify is clean afterwards (except for damage in the middle,
// which it keeps naming), and exactly which spans remain readable: all but
// those of the damaged chunks.
func TestCorruptionTable(t *testing.T) {
	corruptionFixture(t) // build it before the parallel cases
	for _, tc := range corruptionCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := corruptionFixture(t)
			lost := tc.corrupt(t, f)
			ctx := context.Background()

			vr, err := VerifyDataDir(ctx, f.dir, Options{})
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			var text strings.Builder
			vr.WriteText(&text)
			t.Logf("verify before:\n%s", text.String())
			if len(tc.verify) == 0 {
				if !vr.OK || !strings.Contains(text.String(), tc.note) {
					t.Fatalf("verify: want OK noting %q", tc.note)
				}
			} else if vr.OK {
				t.Fatal("verify found nothing wrong")
			}
			got := problemKinds(vr.Problems)
			for _, k := range tc.verify {
				if !slices.Contains(got, k) {
					t.Errorf("verify did not report %q (reported %v)", k, got)
				}
			}
			for _, k := range got {
				if !slices.Contains(tc.verify, k) && !slices.Contains(tc.maybe, k) {
					t.Errorf("verify reported %q unexpectedly (want %v)", k, tc.verify)
				}
			}
			// The first bad byte: the first lost chunk, or the old end.
			firstBad := f.size
			if len(lost) > 0 {
				firstBad = f.chunks[lost[0]].off
			}
			for _, p := range vr.Problems {
				if p.Kind == "chunk" || p.Kind == "tail" {
					if p.Offset == nil || *p.Offset != firstBad {
						t.Errorf("verify names the bad region at %v, want %d", p.Offset, firstBad)
					}
				}
			}

			rep, err := RecoverDataDir(ctx, f.dir, Options{})
			if err != nil {
				t.Fatalf("recover: %v", err)
			}
			text.Reset()
			rep.WriteText(&text)
			t.Logf("recover:\n%s", text.String())
			if len(rep.Stores) != 1 {
				t.Fatalf("recover reported %d stores", len(rep.Stores))
			}
			sr := rep.Stores[0]
			wantOK := int64(len(f.chunks) - len(lost) + tc.extraChunks)
			if sr.ChunksOK != wantOK || sr.ChunksBad != tc.regions {
				t.Errorf("recover: %d chunks ok, %d bad; want %d, %d", sr.ChunksOK, sr.ChunksBad, wantOK, tc.regions)
			}
			if want := tc.moved(f); sr.BytesMovedAside != want {
				t.Errorf("recover moved %d bytes aside, want %d", sr.BytesMovedAside, want)
			}
			if !sr.IndexesRebuilt {
				t.Error("recover did not rebuild the indexes")
			}
			if tc.regions > 0 {
				r := sr.BadRegions[0]
				if r.Offset != firstBad {
					t.Errorf("recover names the bad region at %d, want %d", r.Offset, firstBad)
				}
				wantAction := "skipped"
				if tc.moved(f) > 0 {
					wantAction = "cut"
				}
				if r.Action != wantAction {
					t.Errorf("bad region action %q, want %q", r.Action, wantAction)
				}
			}
			if moved := tc.moved(f); moved > 0 {
				if b := fileSize(filepath.Join(f.store, BrokenFile)); b != moved {
					t.Errorf("%s holds %d bytes, want %d", BrokenFile, b, moved)
				}
			}
			var wantSpans int64
			for i, c := range f.chunks {
				if !slices.Contains(lost, i) {
					wantSpans += int64(len(c.spans))
				}
			}
			if tc.extraChunks == 0 && sr.Spans != wantSpans {
				t.Errorf("recover indexed %d spans, want %d", sr.Spans, wantSpans)
			}

			vr, err = VerifyDataDir(ctx, f.dir, Options{})
			if err != nil {
				t.Fatalf("verify after recover: %v", err)
			}
			text.Reset()
			vr.WriteText(&text)
			if got := problemKinds(vr.Problems); !slices.Equal(got, tc.after) {
				t.Errorf("verify after recover reports %v, want %v:\n%s", got, tc.after, text.String())
			}
			f.expectReadable(t, lost)

			// A second recover finds nothing more to repair.
			rep, err = RecoverDataDir(ctx, f.dir, Options{})
			if err != nil {
				t.Fatalf("second recover: %v", err)
			}
			if s := rep.Stores[0]; s.BytesMovedAside != 0 || s.ChunksOK != wantOK {
				t.Errorf("second recover: %d chunks ok, %d bytes moved", s.ChunksOK, s.BytesMovedAside)
			}
		})
	}
}

// TestDryRunChangesNothing: a dry run reports the cut it would make and
// leaves every byte of the store as it was.
func TestDryRunChangesNothing(t *testing.T) {
	f := corruptionFixture(t)
	c := f.chunks[len(f.chunks)-1]
	truncateAt(t, f, c.off+20)
	os.RemoveAll(filepath.Join(f.store, TextDir))
	before := snapshotTree(t, f.store)
	rep, err := RecoverDataDir(context.Background(), f.dir, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	sr := rep.Stores[0]
	if sr.BytesMovedAside != 20 || sr.IndexesRebuilt || len(sr.BadRegions) != 1 || sr.BadRegions[0].Action != "would cut" {
		t.Fatalf("dry run report: %+v", sr)
	}
	if after := snapshotTree(t, f.store); !maps2Equal(before, after) {
		t.Fatal("the dry run changed the store")
	}
}

func snapshotTree(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
		return nil
	})
	return out
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
