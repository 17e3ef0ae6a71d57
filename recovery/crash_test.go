package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/recovery/indexswap"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// crashEnv tells the helper process where to recover and at which step to
// kill itself: "DIR|N".
const crashEnv = "ZTSD_RECOVERY_CRASH_AT"

// TestRecoverCrashHelper is not a test: it is the process that
// TestRecoverCrashAtEveryStep kills with SIGKILL in the middle of recovery.
func TestRecoverCrashHelper(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("helper process of TestRecoverCrashAtEveryStep")
	}
	dir, nstr, _ := strings.Cut(spec, "|")
	n, _ := strconv.Atoi(nstr)
	count := 0
	_, err := RecoverDataDir(context.Background(), dir, Options{Hook: func(step string) error {
		count++
		if count == n {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}})
	fmt.Printf("recovery finished after %d steps: %v\n", count, err)
}

// crashFixture is a data directory with a sealed store and an open one,
// damaged so that recovery goes through every kind of step: a deletion
// leftover, garbage after the sealed store's last chunk (cut, re-sealed),
// and in the open store a flipped header flag (repaired), a torn last
// chunk (cut) and a deleted text index.
type crashFixture struct {
	dir     string
	spans   []*trace.Span
	lost    map[spanKey]bool // the spans of the torn chunk
	sealed  string
	current string
}

func buildCrashFixture(t *testing.T) *crashFixture {
	t.Helper()
	dir := t.TempDir()
	o := testStoreOptions()
	o.MaxStoreSize = 36 << 10 // two stores of 700 spans (zstd chunks)
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	spans := workload.Spans(7, 700)
	for i := 0; i < len(spans); i += 50 {
		if err := db.Append(context.Background(), spans[i:min(i+50, len(spans))]); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(db.Stores()); got != 2 {
		t.Fatalf("want 2 stores, got %d", got)
	}
	db.Close()
	cf := &crashFixture{dir: dir, spans: spans, lost: map[spanKey]bool{},
		sealed: filepath.Join(dir, storedir.StoreName(0)), current: filepath.Join(dir, storedir.StoreName(1))}
	appendBytes(t, filepath.Join(cf.sealed, DataFile), []byte(strings.Repeat("garbage!", 12)))
	data := filepath.Join(cf.current, DataFile)
	chunks, _ := scanFixture(t, data)
	last := chunks[len(chunks)-1]
	for _, k := range last.spans {
		cf.lost[k] = true
	}
	if err := os.Truncate(data, last.off+30); err != nil {
		t.Fatal(err)
	}
	flipBit(t, data, 7, 4) // the CRC-32 flag
	os.RemoveAll(filepath.Join(cf.current, TextDir))
	os.MkdirAll(filepath.Join(dir, ".deleting-0000ff", "meta"), 0o750)
	return cf
}

func (cf *crashFixture) clone(t *testing.T) *crashFixture {
	c := *cf
	c.dir = t.TempDir()
	copyTree(t, cf.dir, c.dir)
	c.sealed, c.current = filepath.Join(c.dir, storedir.StoreName(0)), filepath.Join(c.dir, storedir.StoreName(1))
	return &c
}

// check opens the recovered directory and checks every span but the lost
// ones is readable, exactly as written.
func (cf *crashFixture) check(t *testing.T) {
	t.Helper()
	f := &fixture{dir: cf.dir, spans: cf.spans}
	got := f.readable(t)
	for _, sp := range cf.spans {
		k := spanKey{sp.TraceID, sp.SpanID}
		if got[k] == cf.lost[k] {
			t.Fatalf("span %s/%s: readable %v, lost %v", sp.TraceID, sp.SpanID, got[k], cf.lost[k])
		}
	}
}

// TestRecoverCrashAtEveryStep kills a recovery process (SIGKILL) after each
// of its durable steps in turn, then runs recovery again (or, in the second
// half, opens the data directory as the daemon does) and checks that the
// data directory converges: verify is clean and every span but those of
// the torn chunk is readable, exactly as written.
func TestRecoverCrashAtEveryStep(t *testing.T) {
	base := buildCrashFixture(t)
	var steps []string
	probe := base.clone(t)
	if _, err := RecoverDataDir(context.Background(), probe.dir, Options{Hook: func(s string) error {
		steps = append(steps, s)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{StepDeletingRemoved, StepHeaderRepaired, StepIndexesBuilt, StepTailCut, StepMasterFixed,
		StepSwapPrefix + indexswap.StepMarkerWritten, StepPropsWritten} {
		if !strings.Contains(strings.Join(steps, "\n"), want) {
			t.Fatalf("recovery of the crash fixture never reaches %q (steps %q)", want, steps)
		}
	}
	t.Logf("%d durable steps: %q", len(steps), steps)
	probe.check(t)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		for _, reopen := range []string{"recover", "daemon"} {
			t.Run(fmt.Sprintf("%02d %s then %s", i+1, st, reopen), func(t *testing.T) {
				t.Parallel()
				cf := base.clone(t)
				cmd := exec.Command(exe, "-test.run=^TestRecoverCrashHelper$", "-test.count=1")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d", crashEnv, cf.dir, i+1))
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the helper was not killed at step %d (%v):\n%s", i+1, err, out)
				}
				if reopen == "daemon" {
					// What storedir does when it opens a store.
					for _, s := range []string{cf.sealed, cf.current} {
						if _, err := indexswap.FinishInterrupted(s); err != nil {
							t.Fatal(err)
						}
					}
					db, err := storedir.Open(context.Background(), cf.dir, testStoreOptions())
					if err != nil {
						t.Fatalf("the daemon's open after the crash: %v", err)
					}
					bad := db.Degraded()
					db.Close()
					if len(bad) > 0 {
						// Before the header is repaired the daemon
						// quarantines the store (and cuts nothing); the
						// operator runs recover.
						if len(bad) != 1 || bad[0].State != storedir.StateQuarantined || !strings.Contains(bad[0].Reason, "recover") {
							t.Fatalf("the daemon's open after the crash: %+v", bad)
						}
						if _, err := RecoverDataDir(context.Background(), cf.dir, Options{}); err != nil {
							t.Fatalf("recovery after the daemon refused: %v", err)
						}
					}
					cf.check(t)
					return
				}
				if _, err := RecoverDataDir(context.Background(), cf.dir, Options{}); err != nil {
					t.Fatalf("recovery after the crash: %v", err)
				}
				rep, err := VerifyDataDir(context.Background(), cf.dir, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if !rep.OK {
					var b strings.Builder
					rep.WriteText(&b)
					t.Fatalf("verify after crash and recovery:\n%s", b.String())
				}
				cf.check(t)
			})
		}
	}
}
