package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

// fillFileSystem writes a file until the file system is full, as another
// process would.
func fillFileSystem(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := len(buf) / 2; n > 0; n /= 2 { // the last blocks too
		f.Write(buf[:n])
	}
}

// stopDeadline is well inside systemd's default stop timeout (90 s).
const stopDeadline = 20 * time.Second

// TestFullDiskStopAndStart fills the daemon's file system to 100% from
// another "process" while it holds unflushed index data, then stops it
// with SIGTERM and starts it again on the still-full disk. Before, SIGTERM
// hung for minutes in Pebble's flush, the start panicked ("pebble:
// MANIFEST flush failed … no space left on device") and every 503 logged
// at ERROR. Now the stop finishes within the deadline, the start serves
// reads read-only and says why, writes answer 503 disk_full "read-only
// since start", the 503s log rate-limited, and once space is freed a
// restart serves and takes writes with nothing lost.
func TestFullDiskStopAndStart(t *testing.T) {
	mnt := mountTmpfs(t, "48m")
	if mnt == "" {
		t.Skip("cannot mount a tmpfs here")
	}
	d := daemontest.New(t, "")
	d.DataDir = filepath.Join(mnt, "data")
	d.WriteConfig("sync = \"batch\"\n[store]\nchunk_target_size = \"32KiB\"")
	d.Start()
	spans := workload.Spans(404, 6000)
	for i := 0; i < len(spans); i += 200 {
		if err := d.Client.Put(context.Background(), spans[i:i+200]...); err != nil {
			t.Fatal(err)
		}
	}
	// A clean stop flushes the indexes; the spans written after the next
	// start stay in Pebble's memtables (no WAL) when the disk fills.
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.Start()
	unflushed := workload.Spans(405, 300)
	if err := d.Client.Put(context.Background(), unflushed...); err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(mnt, "ballast")
	fillFileSystem(t, ballast)
	time.Sleep(200 * time.Millisecond) // past the daemon's free-space cache
	// Writes on the full disk: 503, logged rate-limited.
	for i := 0; i < 50; i++ {
		err := d.Client.Put(context.Background(), workload.Spans(uint64(5000+i), 5)...)
		if !isDiskFull(err) {
			t.Fatalf("write on a full disk: %v", err)
		}
	}
	if n := strings.Count(d.Stderr(), "level=ERROR"); n > 2 {
		t.Fatalf("%d ERROR lines for 50 disk-full answers; want them rate-limited:\n%s", n, lastBytes(d.Stderr(), 2000))
	}
	t0 := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- d.Signal(syscall.SIGTERM) }()
	select {
	case err := <-stopped:
		t.Logf("SIGTERM on a full disk: stopped in %v (%v)", time.Since(t0).Round(time.Millisecond), err)
	case <-time.After(stopDeadline):
		d.Cmd.Process.Kill()
		t.Fatalf("SIGTERM on a full disk: still running after %v:\n%s", stopDeadline, lastBytes(d.Stderr(), 3000))
	}

	// Start on the full disk: read-only, saying why; it serves every
	// span (the store whose index on disk lags is indexed in memory).
	d.Start()
	got := storedSpans(t, d.Client)
	for _, sp := range append(append([]*trace.Span(nil), spans...), unflushed...) {
		if got[refOf(sp)] == nil {
			t.Fatalf("read-only start on a full disk does not serve every span (%d served)", len(got))
		}
	}
	err := d.Client.Put(context.Background(), workload.Spans(6000, 5)...)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 503 || ae.Code != "disk_full" || !strings.Contains(ae.Message, "read-only since start") {
		t.Fatalf("write after a start on a full disk: %v", err)
	}
	h, err := d.Client.HealthStatus(context.Background())
	if err != nil || h.Status != "degraded" || !strings.Contains(h.ReadOnly, "free") {
		t.Fatalf("/healthz on a read-only start: %+v %v", h, err)
	}
	if !strings.Contains(d.Stderr(), "read-only") {
		t.Fatalf("the start does not say it is read-only:\n%s", lastBytes(d.Stderr(), 2000))
	}
	t0 = time.Now()
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM of the read-only daemon: %v", err)
	}
	t.Logf("SIGTERM of the read-only daemon: %v", time.Since(t0).Round(time.Millisecond))

	// Space freed: a restart takes writes again, nothing was lost.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	d.Start()
	if err := d.Client.Put(context.Background(), workload.Spans(7000, 5)...); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	if got := storedSpans(t, d.Client); len(got) != len(spans)+len(unflushed)+5 {
		t.Fatalf("after freeing space: %d spans, want %d", len(got), len(spans)+len(unflushed)+5)
	}
	d.Signal(syscall.SIGTERM)
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
