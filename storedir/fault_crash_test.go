package storedir_test

import (
	"bufio"
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

	"github.com/ztsd/ztsd/internal/faultfs"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// storeCrashEnv tells the helper process where to write and before which
// mutating data-file operation to kill itself: "DIR|N".
const storeCrashEnv = "ZTSD_STOREDIR_CRASH_AT"

// crashWorkload: 1200 spans in requests of 25 into stores of 20 KiB, so
// that the run rotates (creates a store, seals the previous one) many times.
func crashWorkload() ([]*trace.Span, storedir.Options) {
	o := faultOptions(nil)
	o.MaxStoreSize = 20 << 10
	o.ChunkTargetSize = 4 << 10
	return workload.Spans(9, 1200), o
}

const crashBatch = 25

// runCrashWorkload writes the workload through fsys and appends the index
// of every acknowledged request to ackPath (no fsync needed: a killed
// process's writes stay in the page cache).
func runCrashWorkload(dir, ackPath string, fsys *faultfs.FS) error {
	spans, o := crashWorkload()
	o.FS = fsys
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		return err
	}
	ack, err := os.OpenFile(ackPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer ack.Close()
	for i := 0; i*crashBatch < len(spans); i++ {
		if err := db.Append(context.Background(), spans[i*crashBatch:(i+1)*crashBatch]); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		fmt.Fprintf(ack, "%d\n", i)
	}
	return db.Close()
}

// TestStoreCrashHelper is not a test: it is the process that
// TestCrashAtDataFileOperations kills.
func TestStoreCrashHelper(t *testing.T) {
	spec := os.Getenv(storeCrashEnv)
	if spec == "" {
		t.Skip("helper process of TestCrashAtDataFileOperations")
	}
	dir, nstr, _ := strings.Cut(spec, "|")
	n, _ := strconv.Atoi(nstr)
	fsys := faultfs.New(nil)
	fsys.CrashAt(n, func(faultfs.Op, string) {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	})
	if err := runCrashWorkload(dir, filepath.Join(dir, "acked"), fsys); err != nil {
		t.Fatal(err)
	}
}

// TestCrashAtDataFileOperations kills a writing process just before one of
// its data-file operations — creating a store's data file, appending,
// fsyncing, writing the master checksum while sealing, syncing a
// directory — for a spread of crash points including every one around
// rotation and sealing. After each crash, the data directory opens, every
// acknowledged span is readable exactly as sent, every stored span was
// sent, and verify finds nothing wrong.
func TestCrashAtDataFileOperations(t *testing.T) {
	probe := t.TempDir()
	fsys := faultfs.New(nil)
	type mutation struct {
		op   faultfs.Op
		path string
	}
	var muts []mutation
	fsys.Observe(func(n int, op faultfs.Op, path string) { muts = append(muts, mutation{op, path}) })
	if err := runCrashWorkload(probe, filepath.Join(probe, "acked"), fsys); err != nil {
		t.Fatal(err)
	}
	// Crash points: every operation that is not a plain append or fsync
	// of the current data file, with its neighbours, plus an even spread.
	pick := map[int]bool{}
	for i, m := range muts {
		if m.op != faultfs.OpWrite && m.op != faultfs.OpSync {
			for _, j := range []int{i - 1, i, i + 1} {
				if j >= 0 && j < len(muts) {
					pick[j+1] = true
				}
			}
		}
	}
	for i := 0; i < len(muts); i += max(1, len(muts)/12) {
		pick[i+1] = true
	}
	limit := 60
	if testing.Short() {
		limit = 15
	}
	var points []int
	for n := 1; n <= len(muts); n++ {
		if pick[n] {
			points = append(points, n)
		}
	}
	for len(points) > limit { // thin out evenly
		var thinned []int
		for i, p := range points {
			if i%2 == 0 {
				thinned = append(thinned, p)
			}
		}
		points = thinned
	}
	t.Logf("%d data-file operations in the workload; crashing before %d of them", len(muts), len(points))
	spans, _ := crashWorkload()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range points {
		m := muts[n-1]
		t.Run(fmt.Sprintf("%03d %s %s", n, m.op, filepath.Base(m.path)), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := exec.Command(exe, "-test.run=^TestStoreCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d", storeCrashEnv, dir, n))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the helper was not killed before operation %d (%v):\n%s", n, err, out)
			}
			l := newLedger()
			for _, sp := range spans {
				l.sent[key{sp.TraceID, sp.SpanID}] = sp
			}
			f, err := os.Open(filepath.Join(dir, "acked"))
			if err == nil {
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					i, _ := strconv.Atoi(sc.Text())
					l.acked = append(l.acked, spans[i*crashBatch:(i+1)*crashBatch]...)
				}
				f.Close()
			}
			os.Remove(filepath.Join(dir, "acked"))
			l.check(t, dir)
		})
	}
}
