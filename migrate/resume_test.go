package migrate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

var errCrash = errors.New("simulated crash")

// crashAt returns a hook failing at its n-th call (1-based) and a counter
// of the calls it saw.
func crashAt(n int) (func(string) error, *[]string) {
	var steps []string
	return func(step string) error {
		steps = append(steps, step)
		if len(steps) == n {
			return errCrash
		}
		return nil
	}, &steps
}

// TestInterruptAtEveryStep stops a migration after each durable step in
// turn (and, every other time, the resumed run once more at a random later
// step), then runs it to completion: every result verifies, holds every
// piece once, and equals the source — for a new target and in place. In
// place, only the steps after the copy are interrupted (the copy is the
// same code) unless ZTSD_MIGRATE_EXHAUSTIVE is set.
func TestInterruptAtEveryStep(t *testing.T) {
	exhaustive := os.Getenv("ZTSD_MIGRATE_EXHAUSTIVE") != ""
	for _, inPlace := range []bool{false, true} {
		t.Run(map[bool]string{false: "into", true: "in-place"}[inPlace], func(t *testing.T) {
			spans := workload.Spans(20, 400)
			ids := traceIDs(spans)
			ref := filepath.Join(t.TempDir(), "ref")
			writeDataDir(t, ref, spans, 2, lz4crc)
			os.Remove(filepath.Join(ref, lockFileName))
			want := readTraces(t, ref, ids)
			rng := rand.New(rand.NewPCG(20, 21))
			stepsSeen := map[string]bool{}
			// The steps of an uninterrupted run.
			var all []string
			{
				base := t.TempDir()
				src := filepath.Join(base, "src")
				copyTree(t, ref, src)
				opt := Options{Sources: []string{src}, Compression: ptr(chunk.Zlib), BatchBytes: 8 << 10, InPlace: inPlace,
					Hook: func(s string) error { all = append(all, s); return nil }}
				if !inPlace {
					opt.Target = filepath.Join(base, "dst")
				}
				if _, err := Run(context.Background(), opt); err != nil {
					t.Fatal(err)
				}
			}
			for n := 1; n <= len(all)+1; n++ {
				if !exhaustive && n <= len(all) {
					if n > 1 && all[n-1] == all[n-2] {
						continue // like the one before
					}
					switch all[n-1] {
					case StepStarted, StepRotated, StepAppended, StepCheckpoint:
						if inPlace {
							continue
						}
					}
				}
				base := t.TempDir()
				src := filepath.Join(base, "src")
				copyTree(t, ref, src)
				opt := Options{Sources: []string{src}, Compression: ptr(chunk.Zlib), BatchBytes: 8 << 10}
				final := src
				if inPlace {
					opt.InPlace = true
				} else {
					opt.Target = filepath.Join(base, "dst")
					final = opt.Target
				}
				hook, steps := crashAt(n)
				opt.Hook = hook
				_, err := Run(context.Background(), opt)
				if err == nil {
					if n != len(all)+1 {
						t.Fatalf("the run ended after %d steps, the uninterrupted one after %d", n-1, len(all))
					}
					t.Logf("%d steps %v; interrupted after %v", len(all), all, stepsSeen)
					break
				}
				if !errors.Is(err, errCrash) {
					t.Fatalf("crash at step %d: %v", n, err)
				}
				stepsSeen[(*steps)[n-1]] = true
				// Every other time, the resumed run crashes once more,
				// somewhere later.
				hook2, steps2 := crashAt(1 + rng.IntN(8))
				if n%2 == 0 && !exhaustive {
					hook2, steps2 = crashAt(0)
				}
				opt.Hook = hook2
				rep, err := Run(context.Background(), opt)
				if err != nil && !errors.Is(err, errCrash) {
					t.Fatalf("crash at step %d, resume crashing after %v: %v", n, *steps2, err)
				}
				if err != nil {
					opt.Hook = nil
					rep, err = Run(context.Background(), opt)
					if err != nil {
						t.Fatalf("crash at step %d (%s), then %v: resume: %v", n, (*steps)[n-1], *steps2, err)
					}
				}
				if !rep.Resumed && !rep.AlreadyComplete {
					t.Fatalf("crash at step %d: the re-run did not resume", n)
				}
				if rep.SpansWritten != int64(len(spans)) || rep.Verify.TargetPieces != int64(len(spans)) {
					t.Fatalf("crash at step %d (%s): wrote %d, target holds %d pieces, want %d", n, (*steps)[n-1], rep.SpansWritten, rep.Verify.TargetPieces, len(spans))
				}
				if got := countPieces(t, final); got != int64(len(spans)) {
					t.Fatalf("crash at step %d (%s): target indexes %d pieces, want %d", n, (*steps)[n-1], got, len(spans))
				}
				sameTraces(t, fmt.Sprintf("crash at step %d (%s)", n, (*steps)[n-1]), want, readTraces(t, final, ids), ids)
				for _, h := range dataHeaders(t, final) {
					if h.Compression != chunk.Zlib {
						t.Fatalf("crash at step %d: header %v", n, h)
					}
				}
				mustVerify(t, final)
				for _, p := range []string{src + newSuffix, src + oldSuffix, filepath.Join(final, stateDirName), filepath.Join(final, stateDeletingName)} {
					if exists(p) {
						t.Fatalf("crash at step %d: %s left behind", n, p)
					}
				}
			}
			for _, s := range []string{StepStarted, StepAppended, StepCheckpoint, StepRotated, StepCopied, StepVerified, StepReported, StepStateMarked} {
				if !stepsSeen[s] && (!inPlace || exhaustive) {
					t.Errorf("step %q never interrupted", s)
				}
			}
			if inPlace {
				for _, s := range []string{StepRenamedOld, StepRenamedNew, StepRemovedOld} {
					if !stepsSeen[s] {
						t.Errorf("step %q never interrupted", s)
					}
				}
			}
		})
	}
}

// TestResumeRefusesChanges: a resumed migration must have the options and
// sources it started with.
func TestResumeRefusesChanges(t *testing.T) {
	src, _ := sourceDir(t, 21, 500, 1)
	to := filepath.Join(t.TempDir(), "dst")
	hook, _ := crashAt(3)
	if _, err := Run(context.Background(), Options{Sources: []string{src}, Target: to, BatchBytes: 8 << 10, Hook: hook}); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Sources: []string{src}, Target: to, Compression: ptr(chunk.None)}); !errors.Is(err, ErrParamsChanged) {
		t.Fatalf("other compression: %v, want ErrParamsChanged", err)
	}
	// A daemon ran on the source meanwhile and added spans.
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Append(context.Background(), workload.Spans(99, 10)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Run(context.Background(), Options{Sources: []string{src}, Target: to}); !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("changed source: %v, want ErrSourceChanged", err)
	}
}

// TestVerifyCatchesDamage: verification fails when the target holds a
// piece the sources do not, and when a source no longer matches what was
// copied.
func TestVerifyCatchesDamage(t *testing.T) {
	t.Run("extra piece in target", func(t *testing.T) {
		src, _ := sourceDir(t, 22, 300, 1)
		to := filepath.Join(t.TempDir(), "dst")
		hook, steps := crashAt(0)
		opt := Options{Sources: []string{src}, Target: to, Hook: func(s string) error {
			hook(s)
			if s == StepCopied {
				return errCrash
			}
			return nil
		}}
		if _, err := Run(context.Background(), opt); !errors.Is(err, errCrash) {
			t.Fatalf("%v after %v", err, *steps)
		}
		o := storedir.DefaultOptions()
		o.Sync = storedir.SyncNone
		db, err := storedir.Open(context.Background(), to, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Append(context.Background(), workload.Spans(77, 1)); err != nil {
			t.Fatal(err)
		}
		db.Close()
		opt.Hook = nil
		rep, err := Run(context.Background(), opt)
		if !errors.Is(err, ErrVerifyFailed) || rep == nil || rep.Verify.OK || rep.Verify.ProblemsTotal != 2 {
			t.Fatalf("%v, %+v", err, rep)
		}
		if !exists(filepath.Join(to, stateDirName)) || exists(filepath.Join(to, reportFileName)) {
			t.Fatal("a failed verification must keep the state and write no report")
		}
	})
	t.Run("source changed in place", func(t *testing.T) {
		spans := workload.Spans(23, 200)
		src := filepath.Join(t.TempDir(), "src")
		writeDataDir(t, src, spans, 1, chunk.Options{}) // no compression, no checksums
		to := filepath.Join(t.TempDir(), "dst")
		opt := Options{Sources: []string{src}, Target: to, Hook: func(s string) error {
			if s == StepCopied {
				return errCrash
			}
			return nil
		}}
		if _, err := Run(context.Background(), opt); !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
		data := filepath.Join(src, "000000", dataFileName)
		b, _ := os.ReadFile(data)
		i := bytesIndex(b, []byte("checkout"))
		if i < 0 {
			t.Fatal("no string to change")
		}
		copy(b[i:], "checkouT")
		os.WriteFile(data, b, 0o640)
		opt.Hook = nil
		rep, err := Run(context.Background(), opt)
		if !errors.Is(err, ErrVerifyFailed) || rep == nil || rep.Verify.ProblemsTotal == 0 {
			t.Fatalf("%v, %+v", err, rep)
		}
	})
}

func bytesIndex(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}

// TestStreamedSpans: pieces of streamed spans (several chunk numbers,
// open records) are migrated piece by piece and read back assembled.
func TestStreamedSpans(t *testing.T) {
	var spans []*trace.Span
	for i := 0; i < 30; i++ {
		tid := trace.TraceID{0xab, byte(i), 1}
		for c := 0; c < 3; c++ {
			root := &trace.Record{Method: "Handler.serve", Open: c < 2, Calls: int64(c + 1)}
			if c > 0 {
				root.Children = []*trace.Record{{Method: fmt.Sprintf("Dao.query#%d", c), StartNS: int64(c) * 100, DurationNS: 50, Calls: 1}}
			}
			if c == 2 {
				root.DurationNS = 1000
			}
			sp := &trace.Span{TraceID: tid, SpanID: trace.SpanID(i + 1), Type: "http", StartNS: workload.Base + int64(i), ChunkNum: uint32(c), Root: root, Source: trace.SourceZorka}
			sp.Attrs.Set("piece", trace.Int(int64(c)))
			sp.FillSummary()
			spans = append(spans, sp)
		}
	}
	src := filepath.Join(t.TempDir(), "src")
	writeDataDir(t, src, spans, 2, lz4crc)
	to := filepath.Join(t.TempDir(), "dst")
	rep := migrateOK(t, Options{Sources: []string{src, src}, Target: to, Compression: ptr(chunk.Zlib)})
	if rep.SpansWritten != 90 || rep.Duplicates != 90 || rep.Verify.Traces != 30 {
		t.Fatalf("%+v", rep)
	}
	ids := traceIDs(spans)
	got := readTraces(t, to, ids)
	sameTraces(t, "streamed", readTraces(t, src, ids), got, ids)
	if r := got[ids[0]][0].Root; r.Open || len(r.Children) != 2 {
		t.Fatalf("assembled root: open %v, %d children", r.Open, len(r.Children))
	}
}

// copyTree copies the regular files and directories under from to to.
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}
