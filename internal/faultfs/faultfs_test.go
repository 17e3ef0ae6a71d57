package faultfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func open(t *testing.T, f *FS, name string) *file {
	t.Helper()
	h, err := f.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h.(*file)
}

func TestPassThrough(t *testing.T) {
	f := New(nil)
	p := filepath.Join(t.TempDir(), "a")
	h := open(t, f, p)
	if n, err := h.WriteAt([]byte("hello"), 0); n != 5 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := h.ReadAt(b, 0); err != nil || string(b) != "hello" {
		t.Fatalf("read %q %v", b, err)
	}
	if err := f.SyncDir(filepath.Dir(p)); err != nil {
		t.Fatal(err)
	}
	if f.Injected() != 0 || f.Mutations() != 4 { // open, write, sync, syncdir
		t.Fatalf("injected %d, mutations %d", f.Injected(), f.Mutations())
	}
}

func TestRules(t *testing.T) {
	f := New(nil)
	dir := t.TempDir()
	a, b := open(t, f, filepath.Join(dir, "a.zts")), open(t, f, filepath.Join(dir, "b"))
	remove := f.Inject(Rule{Op: OpWrite, PathContains: ".zts", After: 1, Times: 2, Err: syscall.ENOSPC})
	if _, err := a.WriteAt([]byte("1"), 0); err != nil {
		t.Fatalf("first write (After 1): %v", err)
	}
	for i := 0; i < 2; i++ {
		if _, err := a.WriteAt([]byte("2"), 1); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write %d: want ENOSPC, got %v", i, err)
		}
	}
	if _, err := a.WriteAt([]byte("3"), 1); err != nil {
		t.Fatalf("after Times: %v", err)
	}
	if _, err := b.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("other path: %v", err)
	}
	remove()
	f.Inject(Rule{Op: OpSync})
	if err := a.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: want EIO, got %v", err)
	}
	f.Inject(Rule{Op: OpRead, Err: syscall.EIO})
	if _, err := a.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read: %v", err)
	}
	if f.Injected() != 4 {
		t.Fatalf("injected %d, want 4", f.Injected())
	}
	f.Clear()
	if err := a.Sync(); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}

func TestShortWrite(t *testing.T) {
	f := New(nil)
	p := filepath.Join(t.TempDir(), "a")
	h := open(t, f, p)
	f.Inject(Rule{Op: OpWrite, ShortWrite: true, Times: 1})
	n, err := h.WriteAt([]byte("abcdefgh"), 0)
	if n != 4 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("short write: %d %v", n, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "abcd" {
		t.Fatalf("file holds %q", b)
	}
}

func TestLimitSpace(t *testing.T) {
	f := New(nil)
	p := filepath.Join(t.TempDir(), "a")
	h := open(t, f, p)
	f.LimitSpace(10)
	if _, err := h.WriteAt([]byte("12345678"), 0); err != nil {
		t.Fatal(err)
	}
	// Overwriting does not take space; growing by 6 when 2 are free
	// writes 2 and fails.
	n, err := h.WriteAt([]byte("abcdefgh"), 4)
	if n != 6 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("growing write: %d %v", n, err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, []byte("1234abcdef")) {
		t.Fatalf("file holds %q", b)
	}
	if f.Free() != 0 {
		t.Fatalf("free %d", f.Free())
	}
	if err := h.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if f.Free() != 6 {
		t.Fatalf("truncate freed %d, want 6", f.Free())
	}
	f.AddSpace(100)
	if _, err := h.WriteAt(make([]byte, 50), 4); err != nil {
		t.Fatal(err)
	}
	if f.Free() != 56 {
		t.Fatalf("free %d, want 56", f.Free())
	}
	f.Unlimit()
	if _, err := h.WriteAt(make([]byte, 1000), 0); err != nil {
		t.Fatal(err)
	}
}

func TestCrashAt(t *testing.T) {
	f := New(nil)
	p := filepath.Join(t.TempDir(), "a")
	var crashedAt []string
	f.CrashAt(3, func(op Op, path string) { crashedAt = append(crashedAt, op.String()) })
	h := open(t, f, p)        // 1: open
	h.WriteAt([]byte("x"), 0) // 2: write
	h.ReadAt(make([]byte, 1), 0)
	h.Sync() // 3: sync → crash
	h.Sync()
	if len(crashedAt) != 1 || crashedAt[0] != "sync" {
		t.Fatalf("crash hook calls: %v", crashedAt)
	}
}
