package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/migrate"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// migrateDataDir writes spans into a fresh data directory (nstores
// stores) and closes it.
func migrateDataDir(t testing.TB, dir string, spans []*trace.Span, nstores int) {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.ChunkTargetSize = 8 << 10
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	per := (len(spans) + nstores - 1) / nstores
	for s := 0; s < nstores; s++ {
		if s > 0 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		part := spans[min(s*per, len(spans)):min((s+1)*per, len(spans))]
		for i := 0; i < len(part); i += 200 {
			if err := db.Append(context.Background(), part[i:min(i+200, len(part))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func migrateCtl(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// readAllTraces opens dir and reads every trace of ids, keyed by id, as
// their Trace JSON (roots, one per line).
func readAllTraces(t testing.TB, dir string, ids map[trace.TraceID]bool) map[trace.TraceID]string {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[trace.TraceID]string{}
	for id := range ids {
		roots, err := db.GetTrace(context.Background(), id)
		if err != nil {
			continue
		}
		var b strings.Builder
		for _, r := range roots {
			j, err := r.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			b.Write(j)
			b.WriteByte('\n')
		}
		out[id] = b.String()
	}
	return out
}

func idSet(spans []*trace.Span) map[trace.TraceID]bool {
	ids := map[trace.TraceID]bool{}
	for _, sp := range spans {
		ids[sp.TraceID] = true
	}
	return ids
}

func sameTraceJSON(t testing.TB, what string, want, got map[trace.TraceID]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d traces, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("%s: trace %s differs:\n got %s\nwant %s", what, id, got[id], w)
		}
	}
}

// TestMigrateCLI: LZ4 → zlib → LZ4 through the command, with --json;
// `ztsctl verify` passes on both results; traces equal the original.
func TestMigrateCLI(t *testing.T) {
	spans := workload.Spans(51, 2000)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	migrateDataDir(t, src, spans, 2)
	ids := idSet(spans)
	want := readAllTraces(t, src, ids)
	from := src
	for _, comp := range []string{"zlib", "lz4"} {
		to := filepath.Join(base, comp)
		out, errOut, code := migrateCtl("migrate", "--from", from, "--to", to, "--compression", comp, "--checksums", "on", "--json")
		if code != 0 {
			t.Fatalf("migrate to %s: exit %d\n%s%s", comp, code, out, errOut)
		}
		var rep migrate.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("--json output: %v\n%s", err, out)
		}
		if !rep.Verify.OK || rep.SpansWritten != int64(len(spans)) || rep.Compression != comp || !rep.Checksums || rep.TargetStores != 2 {
			t.Fatalf("report: %s", out)
		}
		vout, verr, vcode := migrateCtl("verify", "--data-dir", to)
		if vcode != 0 || !strings.Contains(vout, "verify: OK") {
			t.Fatalf("ztsctl verify %s: exit %d\n%s%s", to, vcode, vout, verr)
		}
		sameTraceJSON(t, comp, want, readAllTraces(t, to, ids))
		from = to
	}
	// Text output, merging a directory with itself: nothing changes.
	self := filepath.Join(base, "self")
	out, errOut, code := migrateCtl("migrate", "--from", src, "--from", src, "--to", self)
	if code != 0 || !strings.Contains(out, "migrate: OK") || !strings.Contains(out, fmt.Sprintf("skipped %d duplicates", len(spans))) {
		t.Fatalf("self-merge: exit %d\n%s%s", code, out, errOut)
	}
	sameTraceJSON(t, "self-merge", want, readAllTraces(t, self, ids))
	// Re-running a finished migration is a no-op.
	out, _, code = migrateCtl("migrate", "--from", src, "--from", src, "--to", self)
	if code != 0 || !strings.Contains(out, "already completed") {
		t.Fatalf("re-run: exit %d\n%s", code, out)
	}
}

// TestMigrateCLIErrors: usage errors exit 2, a missing source 1, a source
// held by a daemon 3 (and nothing is written).
func TestMigrateCLIErrors(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	migrateDataDir(t, src, workload.Spans(52, 50), 1)
	to := filepath.Join(base, "dst")
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"migrate", "--to", to}, 2, "needs --from"},
		{[]string{"migrate", "--from", src}, 2, "exactly one of"},
		{[]string{"migrate", "--from", src, "--to", to, "--in-place"}, 2, "exactly one of"},
		{[]string{"migrate", "--from", src, "--to", to, "--compression", "brotli"}, 2, "--compression"},
		{[]string{"migrate", "--from", src, "--to", to, "--checksums", "maybe"}, 2, "--checksums"},
		{[]string{"migrate", "--from", src, "--to", to, "--drop-attr", "novalue"}, 2, "--drop-attr"},
		{[]string{"migrate", "--from", src, "--to", to, "--since", "yesterday"}, 2, "--since"},
		{[]string{"migrate", "--from", src, "--to", to, "--since", "2026-01-02T00:00:00Z", "--until", "2026-01-01T00:00:00Z"}, 2, "not after"},
		{[]string{"migrate", "--from", src, "--to", src}, 2, "overlaps"},
		{[]string{"migrate", "--from", filepath.Join(base, "nope"), "--to", to}, 1, "no such file"},
		{[]string{"migrate", "--from", src, "--to", to, "extra"}, 2, "argument"},
	}
	for _, c := range cases {
		out, errOut, code := migrateCtl(c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%q: exit %d, stderr %q (stdout %q); want %d and %q", c.args, code, errOut, out, c.code, c.msg)
		}
	}
	o := storedir.DefaultOptions()
	db, err := storedir.Open(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := migrateCtl("migrate", "--from", src, "--to", to)
	db.Close()
	if code != 3 || !strings.Contains(errOut, "locked") {
		t.Fatalf("locked source: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(to); err == nil {
		t.Fatal("a refused migration created its target")
	}
}

// TestMigrateMergeDaemons: two daemons write different spans of the same
// traces at the same time; after they stop, migrating both directories
// into one gives every trace whole, equal to all its spans stored in one
// directory.
func TestMigrateMergeDaemons(t *testing.T) {
	spans := workload.Spans(53, 6000)
	cfg := "sync = \"batch\"\n[store]\nmax_store_size = \"64KiB\"\nchunk_target_size = \"16KiB\"\n"
	d1, d2 := daemontest.New(t, cfg), daemontest.New(t, cfg)
	d1.Start()
	d2.Start()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, d := range []*daemontest.Daemon{d1, d2} {
		var mine []*trace.Span
		for j, sp := range spans {
			if j%2 == i {
				mine = append(mine, sp)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < len(mine); k += 100 {
				if err := d.Client.PutCBOR(context.Background(), mine[k:min(k+100, len(mine))]...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, d := range []*daemontest.Daemon{d1, d2} {
		if err := d.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("daemon exit: %v\n%s", err, d.Stderr())
		}
	}
	base := t.TempDir()
	merged := filepath.Join(base, "merged")
	out, errOut, code := migrateCtl("migrate", "--from", d1.DataDir, "--from", d2.DataDir, "--to", merged, "--json")
	if code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	var rep migrate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.SpansWritten != int64(len(spans)) || rep.Duplicates != 0 || rep.SourceStores < 4 {
		t.Fatalf("wrote %d spans (%d duplicates) from %d stores, want %d from several", rep.SpansWritten, rep.Duplicates, rep.SourceStores, len(spans))
	}
	whole := filepath.Join(base, "whole")
	migrateDataDir(t, whole, spans, 1)
	ids := idSet(spans)
	sameTraceJSON(t, "merged daemons", readAllTraces(t, whole, ids), readAllTraces(t, merged, ids))
	if vout, verr, vcode := migrateCtl("verify", "--data-dir", merged); vcode != 0 {
		t.Fatalf("verify: exit %d\n%s%s", vcode, vout, verr)
	}
}

// TestMigrateKill runs the ztsctl binary and kill -9s it at random moments,
// re-running it each time; the result equals an uninterrupted run's.
// ZTSD_MIGRATE_KILLS sets the number of kills (default 4).
func TestMigrateKill(t *testing.T) {
	kills := 4
	if s := os.Getenv("ZTSD_MIGRATE_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("ZTSD_MIGRATE_KILLS=%q", s)
		}
		kills = n
	}
	bin := filepath.Join(daemontest.Binaries(t), "ztsctl")
	spans := workload.Spans(54, 12000)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	migrateDataDir(t, src, spans, 3)
	args := func(to string) []string {
		return []string{"migrate", "--from", src, "--to", to, "--compression", "zlib", "--batch-bytes", "32768",
			"--drop-attr", "service.name=auth", "--since", strconv.FormatInt(workload.Base+int64(2*24*time.Hour), 10)}
	}
	// The uninterrupted run, timed.
	ref := filepath.Join(base, "ref")
	t0 := time.Now()
	if out, err := exec.Command(bin, args(ref)...).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	took := time.Since(t0)
	ids := idSet(spans)
	want := readAllTraces(t, ref, ids)
	if len(want) == 0 || len(want) == len(ids) {
		t.Fatalf("the filters kept %d of %d traces", len(want), len(ids))
	}
	rng := rand.New(rand.NewPCG(54, uint64(time.Now().UnixNano())))
	killed := 0
	for episode := 0; killed < kills; episode++ {
		if episode > 4*kills+4 {
			t.Fatalf("only %d kills landed in %d episodes", killed, episode)
		}
		// Each episode kills a fresh migration up to three times, then
		// lets it finish.
		to := filepath.Join(base, fmt.Sprintf("killed-%d", episode))
		for attempt := 0; ; attempt++ {
			cmd := exec.Command(bin, args(to)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			if attempt < 3 && killed < kills {
				delay := time.Duration(rng.Int64N(int64(took) * 7 / 10))
				select {
				case err = <-done:
				case <-time.After(delay):
					cmd.Process.Signal(syscall.SIGKILL)
					<-done
					killed++
					t.Logf("episode %d: killed after %v", episode, delay)
					continue
				}
			} else {
				err = <-done
			}
			if err != nil {
				t.Fatalf("episode %d run %d: %v\n%s", episode, attempt, err, out.String())
			}
			break
		}
		sameTraceJSON(t, fmt.Sprintf("episode %d", episode), want, readAllTraces(t, to, ids))
		checkMigrated(t, to)
	}
}

// checkMigrated runs `ztsctl verify` on a migrated directory and checks
// that the migration left no state behind.
func checkMigrated(t *testing.T, to string) {
	t.Helper()
	if vout, verr, vcode := migrateCtl("verify", "--data-dir", to); vcode != 0 {
		t.Fatalf("verify: exit %d\n%s%s", vcode, vout, verr)
	}
	for _, leftover := range []string{".migrate", ".migrate.deleting"} {
		if _, err := os.Stat(filepath.Join(to, leftover)); err == nil {
			t.Fatalf("%s left behind", leftover)
		}
	}
}
