package main

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
)

// TestRecoverKilledAtRandomMoments runs `ztsctl recover` on a damaged data
// directory (both indexes deleted, a torn tail) and kills it with SIGKILL
// at random moments, several times in a row; recover then runs to the end,
// verify is clean, and the daemon serves every span but those of the torn
// chunk.
func TestRecoverKilledAtRandomMoments(t *testing.T) {
	d := daemontest.New(t, "")
	bin := daemontest.Binaries(t)
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.MaxStoreSize = 4 << 20
	o.ChunkTargetSize = 32 << 10
	db, err := storedir.Open(context.Background(), d.DataDir, o)
	if err != nil {
		t.Fatal(err)
	}
	spans := workload.Spans(41, 40_000)
	l := newSpanLedger()
	for i := 0; i < len(spans)-10; i += 500 {
		if err := db.Append(context.Background(), spans[i:min(i+500, len(spans)-10)]); err != nil {
			t.Fatal(err)
		}
	}
	// The last request (one chunk) is torn: its spans are the ones
	// recovery may lose.
	tail := spans[len(spans)-10:]
	if err := db.Append(context.Background(), tail); err != nil {
		t.Fatal(err)
	}
	stores := db.Stores()
	db.Close()
	lastStore := filepath.Join(d.DataDir, stores[len(stores)-1].ID, "traces.zts")
	df, err := chunk.Open(lastStore)
	if err != nil {
		t.Fatal(err)
	}
	var lastOff int64
	for sc := df.Scanner(); sc.Next(); {
		lastOff, _ = sc.Chunk()
	}
	df.Close()
	for _, sp := range spans[:len(spans)-10] {
		l.sent[refOf(sp)], l.acked[refOf(sp)] = sp, sp
	}
	for _, sp := range tail {
		l.sent[refOf(sp)] = sp
	}
	if err := os.Truncate(lastStore, lastOff+100); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(d.DataDir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(d.DataDir, e.Name(), "meta"))
		os.RemoveAll(filepath.Join(d.DataDir, e.Name(), "text"))
	}

	recover := func() *exec.Cmd {
		return exec.Command(filepath.Join(bin, "ztsctl"), "recover", "--data-dir", d.DataDir)
	}
	// How long a whole run takes, on a copy.
	probe := t.TempDir()
	copyDir(t, d.DataDir, probe)
	t0 := time.Now()
	if out, err := exec.Command(filepath.Join(bin, "ztsctl"), "recover", "--data-dir", probe).CombinedOutput(); err != nil {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	full := time.Since(t0)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	for i := 0; i < 5; i++ {
		cmd := recover()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(full))))
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	out, err := recover().CombinedOutput()
	if err != nil {
		t.Fatalf("recover after the kills: %v\n%s", err, out)
	}
	t.Logf("the last recover:\n%s", out)
	out, err = exec.Command(filepath.Join(bin, "ztsctl"), "verify", "--data-dir", d.DataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("verify after the kills: %v\n%s", err, out)
	}
	d.Start()
	stored := l.check(t, d, 100, true)
	if stored != len(spans)-10 {
		t.Fatalf("%d spans stored, want %d (all but the torn request)", stored, len(spans)-10)
	}
	t.Logf("a whole recover took %v; after 5 kills and a last run all %d spans are served", full, stored)
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if e.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		if !e.Type().IsRegular() {
			return nil
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
