package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/faultfs"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/recovery"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// mountTmpfs mounts a tmpfs of the given size at a new directory, or
// returns "" when this process may not mount.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("mount tmpfs: %v: %s", err, out)
		return ""
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// spanStream hands out batches of distinct workload spans, generating
// them a few thousand at a time.
type spanStream struct {
	seed uint64
	buf  []*trace.Span
}

func (s *spanStream) next(n int) []*trace.Span {
	if len(s.buf) < n {
		s.seed++
		s.buf = append(s.buf, workload.Spans(s.seed<<16, 5000)...)
	}
	b := s.buf[:n:n]
	s.buf = s.buf[n:]
	return b
}

// fillUntilFull puts batches until the daemon answers disk_full a few
// times; it checks the answers and that reads keep working meanwhile.
func fillUntilFull(t *testing.T, c *client.Client, l *spanLedger, spans *spanStream) {
	t.Helper()
	full := 0
	for i := 0; i < 100_000 && full < 5; i++ {
		err := l.put(c, spans.next(50))
		if err == nil {
			continue
		}
		var ae *client.APIError
		if !isDiskFull(err) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "no space left on device") {
			t.Fatalf("request %d on a full disk: want 503 disk_full saying \"no space left on device\", got %v", i, err)
		}
		full++
		if full == 1 {
			t.Logf("disk full after %d spans: %v", len(l.acked), err)
		}
		// Reads keep working on a full disk.
		for k := range l.acked {
			if _, err := c.GetSpan(context.Background(), k.trace, k.span); err != nil {
				t.Fatalf("read on a full disk: %v", err)
			}
			break
		}
		if _, err := c.SearchPage(context.Background(), client.Query{Spans: true, Limit: 10}, ""); err != nil {
			t.Fatalf("search on a full disk: %v", err)
		}
	}
	if full < 5 {
		t.Fatalf("the disk never filled (%d spans acknowledged)", len(l.acked))
	}
}

// TestDiskFullTmpfs runs the daemon on a 16 MiB tmpfs that fills: writes
// get 503 disk_full with a clear message, reads keep working, writes
// succeed again once space is freed, and after a restart every
// acknowledged span is readable and verify finds nothing wrong.
func TestDiskFullTmpfs(t *testing.T) {
	mnt := mountTmpfs(t, "8m")
	if mnt == "" {
		t.Skip("cannot mount a tmpfs here; TestDiskFullInjected covers disk-full through an injected ENOSPC")
	}
	// Ballast to delete later: "the operator frees space".
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.New(t, "")
	d.DataDir = filepath.Join(mnt, "data")
	// One store larger than the file system: it fills while appending.
	d.WriteConfig("sync = \"batch\"\n[store]\nmax_store_size = \"64MiB\"\nchunk_target_size = \"32KiB\"")
	d.Start()
	l := newSpanLedger()
	spans := &spanStream{seed: 31}
	fillUntilFull(t, d.Client, l, spans)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := l.put(d.Client, spans.next(50)); err != nil {
			t.Fatalf("request after space was freed: %v", err)
		}
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
	}
	d.Start()
	stored := l.check(t, d, 200, true)
	t.Logf("%d acknowledged, %d stored after the restart", len(l.acked), stored)
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := d.Ctl(nil, "verify", "--data-dir", d.DataDir)
	if code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
}

// TestDiskFullDuringRotation fills a tmpfs while the daemon rotates 4 MiB
// stores: sealing a store flushes its indexes, which must not hang on a
// full disk either — every request is answered (stored, or 503 disk_full)
// and writes succeed again once space is freed.
func TestDiskFullDuringRotation(t *testing.T) {
	mnt := mountTmpfs(t, "16m")
	if mnt == "" {
		t.Skip("cannot mount a tmpfs here")
	}
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.New(t, "")
	d.DataDir = filepath.Join(mnt, "data")
	d.WriteConfig("sync = \"batch\"\n[store]\nmax_store_size = \"4MiB\"\nchunk_target_size = \"32KiB\"")
	d.Start()
	l := newSpanLedger()
	spans := &spanStream{seed: 33}
	for i, full := 0, 0; i < 100_000 && full < 5; i++ {
		err := l.put(d.Client, spans.next(50))
		if errors.Is(err, errHung) {
			t.Fatalf("request %d hung on a full disk (%d spans acknowledged): sealing a store on rotation flushes its Pebble indexes, and Pebble retries a flush that fails with ENOSPC forever, holding the committer (storedir needs a free-space guard before appending/rotating): %v",
				i, len(l.acked), err)
		}
		if err != nil {
			if !isDiskFull(err) {
				t.Fatalf("request %d on a full disk: %v", i, err)
			}
			full++
		}
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := l.put(d.Client, spans.next(50)); err != nil {
			t.Fatalf("request after space was freed: %v", err)
		}
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	d.Start()
	l.check(t, d, 100, true)
}

// TestDiskFullInjectedThroughServer is the disk-full drill without a
// mount: the daemon's server and store run in this process on a data
// file system that injects ENOSPC once its simulated space is used up.
func TestDiskFullInjectedThroughServer(t *testing.T) {
	dir := t.TempDir()
	fsys := faultfs.New(nil)
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncBatch
	o.MaxStoreSize = 1 << 20
	o.ChunkTargetSize = 32 << 10
	o.FS = fsys
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(db, server.Options{Access: server.Access{Disabled: true}})
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ConnContext: server.ConnContext, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	c := client.New(sock)
	l := newSpanLedger()
	spans := &spanStream{seed: 32}
	fsys.LimitSpace(1536 << 10) // more than one store: rotation under pressure
	fillUntilFull(t, c, l, spans)
	fsys.AddSpace(64 << 20)
	for i := 0; i < 20; i++ {
		if err := l.put(c, spans.next(50)); err != nil {
			t.Fatalf("request after space was freed: %v", err)
		}
	}
	c.Close()
	hs.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	o.FS = nil
	db, err = storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for k := range l.acked {
		if _, err := db.GetSpan(context.Background(), k.trace, k.span); err != nil {
			t.Fatalf("acknowledged span %s/%s: %v", k.trace, k.span, err)
		}
	}
	db.Close()
	rep, err := recovery.VerifyDataDir(context.Background(), dir, recovery.Options{})
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v %+v", err, rep.Problems)
	}
	t.Logf("%d spans acknowledged around the full disk, all readable", len(l.acked))
}
