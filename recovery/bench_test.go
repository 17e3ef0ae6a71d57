package recovery

import (
	"context"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
)

// writeLargeStore appends workload spans through storedir to the first
// store of dir (creating it when needed) until its data file holds at
// least bytes, generating the spans in batches so that memory stays
// bounded. It returns the number of spans written.
func writeLargeStore(tb testing.TB, dir string, bytes int64) int64 {
	tb.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.MaxStoreSize = bytes + 256<<20 // one store
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		tb.Fatal(err)
	}
	data := filepath.Join(dir, storedir.StoreName(0), DataFile)
	var n int64
	// Seeds continue after what an earlier run wrote, so no span repeats.
	for seed := uint64(fileSize(data)) << 8; fileSize(data) < bytes; seed++ {
		spans := workload.Spans(seed, 20_000)
		for i := 0; i < len(spans); i += 1000 {
			if err := db.Append(context.Background(), spans[i:i+1000]); err != nil {
				tb.Fatal(err)
			}
		}
		n += int64(len(spans))
	}
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// BenchmarkRecoverStore rebuilds both indexes of a store of about 16 MiB
// of data (SetBytes: the data file), from a data file whose indexes were
// deleted.
func BenchmarkRecoverStore(b *testing.B) {
	src := b.TempDir()
	writeLargeStore(b, src, 16<<20)
	store := filepath.Join(src, storedir.StoreName(0))
	size := fileSize(filepath.Join(store, DataFile))
	b.SetBytes(size)
	b.ResetTimer()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		os.RemoveAll(filepath.Join(store, MetaDir))
		os.RemoveAll(filepath.Join(store, TextDir))
		c0 := processCPU()
		b.StartTimer()
		if _, err := RecoverStore(context.Background(), store, Options{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += processCPU() - c0
		b.StartTimer()
	}
	// CPU time (every goroutine, Pebble's compactions included) per MB
	// of data file: what the rebuild costs, whatever else runs on the
	// machine.
	b.ReportMetric(cpu.Seconds()*1e3/float64(b.N)/(float64(size)/1e6), "cpu-ms/MB")
}

// processCPU is the user and system CPU time the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerifyStore checks a store of about 16 MiB of data.
func BenchmarkVerifyStore(b *testing.B) {
	src := b.TempDir()
	writeLargeStore(b, src, 16<<20)
	store := filepath.Join(src, storedir.StoreName(0))
	b.SetBytes(fileSize(filepath.Join(store, DataFile)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := VerifyStore(context.Background(), store, Options{})
		if err != nil || !rep.OK {
			b.Fatalf("%v %+v", err, rep)
		}
	}
}

// TestRecoverySpeed measures the recovery speed the issue asks for: it
// writes a store of ZTSD_RECOVERY_GIB GiB (at least 1) into
// ZTSD_RECOVERY_DIR (reused when it already holds one), deletes both
// indexes, recovers, and reports MB/s next to the sequential read speed of
// the same disk measured with dd and direct I/O. It runs only when
// ZTSD_RECOVERY_DIR is set:
//
//	ZTSD_RECOVERY_DIR=/var/tmp/ztsd-speed go test -run TestRecoverySpeed -v -timeout 2h ./recovery/
func TestRecoverySpeed(t *testing.T) {
	dir := os.Getenv("ZTSD_RECOVERY_DIR")
	if dir == "" {
		t.Skip("set ZTSD_RECOVERY_DIR to measure recovery speed on a store of at least 1 GiB")
	}
	gib := 1.0
	if s := os.Getenv("ZTSD_RECOVERY_GIB"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 1 {
			t.Fatalf("ZTSD_RECOVERY_GIB=%q: want a number ≥ 1", s)
		}
		gib = v
	}
	want := int64(gib * (1 << 30))
	store := filepath.Join(dir, storedir.StoreName(0))
	data := filepath.Join(store, DataFile)
	if fileSize(data) < want {
		t0 := time.Now()
		n := writeLargeStore(t, dir, want)
		t.Logf("wrote %d spans, %d bytes of data file in %v", n, fileSize(data), time.Since(t0))
	}
	size := fileSize(data)
	ddMBps := ddReadSpeed(t, data)
	os.RemoveAll(filepath.Join(store, MetaDir))
	os.RemoveAll(filepath.Join(store, TextDir))
	// Drop the page cache so recovery reads from the disk like dd did.
	dropCaches(t)
	rep, err := RecoverStore(context.Background(), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Stores[0]
	t.Logf("recovery: %d bytes (%.2f GiB), %d chunks, %d spans, %d traces in %.1f s: %.1f MB/s; dd direct read of the same file: %.1f MB/s; ratio %.0f%%",
		size, float64(size)/(1<<30), s.ChunksOK, s.Spans, s.Traces, s.Seconds, s.MBPerS, ddMBps, 100*s.MBPerS/ddMBps)
	dropCaches(t)
	vr, err := VerifyStore(context.Background(), store, Options{})
	if err != nil || !vr.OK {
		t.Fatalf("verify: %v %+v", err, vr.Problems)
	}
	t.Logf("verify: %.1f s: %.1f MB/s", vr.Seconds, vr.MBPerS)
}

var ddRate = regexp.MustCompile(`([0-9.]+) ([kMG]?B)/s`)

// ddReadSpeed reads path with dd and direct I/O and returns MB/s.
func ddReadSpeed(t *testing.T, path string) float64 {
	out, err := exec.Command("dd", "if="+path, "of=/dev/null", "bs=4M", "iflag=direct").CombinedOutput()
	if err != nil {
		t.Fatalf("dd: %v\n%s", err, out)
	}
	m := ddRate.FindSubmatch(out)
	if m == nil {
		t.Fatalf("dd output: %s", out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	switch string(m[2]) {
	case "kB":
		v /= 1000
	case "GB":
		v *= 1000
	case "B":
		v /= 1e6
	}
	t.Logf("dd: %s", out)
	return v
}

func dropCaches(t *testing.T) {
	exec.Command("sync").Run()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		t.Logf("cannot drop the page cache (%v): the recovery reads may be cached", err)
	}
}
