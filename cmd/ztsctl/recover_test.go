package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/recovery"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// offlineStore writes spans into a fresh data directory and closes it.
func offlineStore(t *testing.T, spans []*trace.Span) string {
	t.Helper()
	dir := t.TempDir()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.ChunkTargetSize = 4 << 10
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(spans); i += 50 {
		if err := db.Append(context.Background(), spans[i:min(i+50, len(spans))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func ctl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestVerifyRecoverCLI: verify names a flipped bit and a torn tail and
// exits 3; recover --json reports and repairs them; verify then names only
// the damaged chunk in the middle, which recover leaves in place.
func TestVerifyRecoverCLI(t *testing.T) {
	dir := offlineStore(t, workload.Spans(5, 1000))
	store := filepath.Join(dir, storedir.StoreName(0))
	data := filepath.Join(store, recovery.DataFile)

	out, errOut, code := ctl(t, "verify", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "verify: OK") {
		t.Fatalf("verify of a clean store: exit %d\n%s%s", code, out, errOut)
	}
	fi, _ := os.Stat(data)
	os.Truncate(data, fi.Size()-5)
	f, _ := os.OpenFile(data, os.O_RDWR, 0)
	f.WriteAt([]byte{0xff}, 2000)
	f.Close()

	out, errOut, code = ctl(t, "verify", "--data-dir", dir)
	if code != exitFailure || !strings.Contains(out, "PROBLEM chunk") || !strings.Contains(out, "PROBLEM tail") ||
		!strings.Contains(errOut, "problems found") {
		t.Fatalf("verify of a damaged store: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = ctl(t, "verify", "--store", store, "--json")
	var vr recovery.VerifyReport
	if code != exitFailure || json.Unmarshal([]byte(out), &vr) != nil || vr.OK || len(vr.Problems) < 2 {
		t.Fatalf("verify --json: exit %d\n%s", code, out)
	}

	out, errOut, code = ctl(t, "recover", "--data-dir", dir, "--dry-run")
	if code != 0 || !strings.Contains(out, "would cut") || !strings.Contains(out, "dry run") {
		t.Fatalf("recover --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = ctl(t, "recover", "--data-dir", dir, "--json")
	var rr recovery.Report
	if code != 0 || json.Unmarshal([]byte(out), &rr) != nil {
		t.Fatalf("recover --json: exit %d\n%s%s", code, out, errOut)
	}
	if rr.ChunksBad != 2 || rr.BytesMovedAside == 0 || rr.Traces == 0 || len(rr.Stores) != 1 || !rr.Stores[0].IndexesRebuilt {
		t.Fatalf("recover report: %s", out)
	}
	for _, k := range []string{`"chunks_ok"`, `"bad_regions"`, `"bytes_moved_aside"`, `"traces_indexed"`, `"seconds"`, `"mb_per_s"`} {
		if !strings.Contains(out, k) {
			t.Errorf("recover --json lacks %s", k)
		}
	}
	out, _, code = ctl(t, "verify", "--data-dir", dir)
	if code != exitFailure || strings.Contains(out, "PROBLEM tail") || !strings.Contains(out, "PROBLEM chunk") {
		t.Fatalf("verify after recover: exit %d\n%s", code, out)
	}
	out, _, code = ctl(t, "recover", "--store", store)
	if code != 0 || !strings.Contains(out, "recovered 1 stores") {
		t.Fatalf("recover --store: exit %d\n%s", code, out)
	}
}

func TestOfflineCommandUsage(t *testing.T) {
	dir := offlineStore(t, workload.Spans(6, 10))
	store := filepath.Join(dir, storedir.StoreName(0))
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"recover", "--data-dir", dir, "--store", store}, exitUsage, "mutually exclusive"},
		{[]string{"verify", "--store", dir}, exitUsage, "not a store directory"},
		{[]string{"verify", "--data-dir", store}, exitUsage, "is a store directory"},
		{[]string{"recover", "--data-dir", filepath.Join(dir, "nope")}, exitNotFound, "no such file"},
		{[]string{"verify", "extra"}, exitUsage, "takes 0 argument"},
	} {
		_, errOut, code := ctl(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, %q; want exit %d with %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
	// A running daemon (here: an open DB) holds the lock.
	o := storedir.DefaultOptions()
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, errOut, code := ctl(t, "recover", "--data-dir", dir)
	if code != exitFailure || !strings.Contains(errOut, "locked") || !strings.Contains(errOut, "stop the daemon") {
		t.Fatalf("recover next to a daemon: exit %d %q", code, errOut)
	}
	out, _, code := ctl(t, "verify", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "indexes NOT checked") {
		t.Fatalf("verify next to a daemon: exit %d\n%s", code, out)
	}
}
