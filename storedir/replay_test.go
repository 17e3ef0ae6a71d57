package storedir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const replayCrashEnv = "ZTSD_TEST_REPLAY_CRASH" // "dir|kill at offset"

// ZTSD_REPLAY_SPANS (make soak) runs the replay crash test on that many
// spans with the production checkpoint interval, and logs the timings.
func replayTestSpans() int {
	if n, err := strconv.Atoi(os.Getenv("ZTSD_REPLAY_SPANS")); err == nil && n > 0 {
		return n
	}
	return 12000
}

func replayTestCheckpoint() int64 {
	if os.Getenv("ZTSD_REPLAY_SPANS") != "" {
		return replayCheckpointBytes
	}
	return 64 << 10
}

// replayLog records the "re-indexed data file tail" lines of an open.
type replayLog struct {
	countingHandler
	from, bytes int64
}

func (h *replayLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *replayLog) WithGroup(string) slog.Handler      { return h }

func (h *replayLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "re-indexed data file tail" {
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "from":
				h.from = a.Value.Int64()
			case "bytes":
				h.bytes = a.Value.Int64()
			}
			return true
		})
	}
	return h.countingHandler.Handle(ctx, r)
}

// TestReplayCrashHelper is the child of TestReplayCheckpointSurvivesCrash:
// it opens the data directory and is killed (SIGKILL, no flush, no close)
// once the replay has re-indexed past the given offset.
func TestReplayCrashHelper(t *testing.T) {
	v := os.Getenv(replayCrashEnv)
	if v == "" {
		t.Skip("run by TestReplayCheckpointSurvivesCrash")
	}
	dir, at, _ := strings.Cut(v, "|")
	killAt, _ := strconv.ParseInt(at, 10, 64)
	o := testOptions()
	o.MaxStoreSize = 64 << 20
	o.replayCheckpoint = replayTestCheckpoint()
	o.replayed = func(next int64) {
		if next >= killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	db, err := Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	// A large lag is re-indexed in the background: wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	db.waitCatchUp(ctx)
	t.Fatal("the replay never reached the kill offset")
}

// TestReplayCheckpointSurvivesCrash: the daemon crashes (SIGKILL) while it
// re-indexes a data file after an earlier crash; the next open re-indexes
// only what follows the last checkpoint, not the whole file again. Before,
// the replay's index writes stayed in Pebble's memtable (no WAL) until
// the store was closed, so every crash during a replay started it over.
func TestReplayCheckpointSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.MaxStoreSize = 64 << 20
	db := openTestDB(t, dir, o)
	spans := genWorkload(61, replayTestSpans())
	appendAll(t, db, spans, 200)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sd := filepath.Join(dir, StoreName(0))
	fi, err := os.Stat(filepath.Join(sd, dataFile))
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	if size < 512<<10 {
		t.Fatalf("data file of %d bytes: want a few MiB", size)
	}
	// The first crash: nothing of the indexes reached the disk.
	for _, d := range []string{metaDir, textDir} {
		if err := os.RemoveAll(filepath.Join(sd, d)); err != nil {
			t.Fatal(err)
		}
	}
	// The second crash, 3/4 through the replay.
	killAt := size * 3 / 4
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestReplayCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d", replayCrashEnv, dir, killAt))
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	firstReplay := time.Since(t0)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the helper was not killed during the replay (%v):\n%s", err, out)
	}
	logs := &replayLog{}
	o.Logger = slog.New(logs)
	t0 = time.Now()
	db = openTestDB(t, dir, o)
	defer db.Close()
	opened := time.Since(t0)
	if _, err := db.GetSpan(context.Background(), spans[0].TraceID, spans[0].SpanID); err != nil {
		t.Fatalf("first read after the restart: %v", err)
	}
	firstRead := time.Since(t0)
	if err := db.waitCatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d spans, data file %d bytes; the replay was killed at %d after %v; the next open returned in %v (first read answered at %v) and re-indexed %d bytes from %d in %v",
		len(spans), size, killAt, firstReplay.Round(time.Millisecond), opened.Round(time.Millisecond), firstRead.Round(time.Millisecond), logs.bytes, logs.from, time.Since(t0).Round(time.Millisecond))
	// A checkpoint every replayTestCheckpoint bytes: at most that much
	// (plus a chunk) before the kill is replayed again.
	if logs.from < killAt-replayTestCheckpoint()-(64<<10) {
		t.Fatalf("the replay after the second crash started at %d; the first reached %d with a checkpoint every %d bytes", logs.from, killAt, replayTestCheckpoint())
	}
	checkGets(t, db, spans, max(97, len(spans)/200))
}
