package chunk_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/faultfs"
)

// TestPreallocateDiskFull: when the disk has no room for the preallocation
// step, an append that fits is still written (the file grows by the chunk
// alone); one that does not fit fails with ENOSPC and leaves the file as
// it was; once space is freed, appends preallocate again. A failing
// fallocate (EIO) falls back to a plain append too.
func TestPreallocateDiskFull(t *testing.T) {
	fsys := faultfs.New(nil)
	path := filepath.Join(t.TempDir(), "traces.zts")
	f, err := chunk.CreateFS(fsys, path, chunk.Options{Compression: chunk.Zstd, Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	payload := make([]byte, 3000) // incompressible: 400 of them pass PreallocStep
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	fileSize := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	fsys.LimitSpace(10 << 10) // room for a chunk, not for PreallocStep
	off, err := f.Append(payload)
	if err != nil {
		t.Fatalf("append with room for the chunk only: %v", err)
	}
	if fileSize() != f.Size() {
		t.Fatalf("file %d bytes, data %d: want no zero tail without room for one", fileSize(), f.Size())
	}
	fsys.LimitSpace(100) // no room for the chunk either
	before := f.Size()
	if _, err := f.Append(payload); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if f.Size() != before || fileSize() != before {
		t.Fatalf("after the failed append: Size %d, file %d, want %d", f.Size(), fileSize(), before)
	}
	if got, _, err := f.ReadChunk(off); err != nil || len(got) != len(payload) {
		t.Fatalf("earlier chunk after the failed append: %v", err)
	}
	fsys.Unlimit()
	if _, err := f.Append(payload); err != nil {
		t.Fatal(err)
	}
	if fileSize() <= f.Size() {
		t.Fatalf("file %d bytes, data %d: want a zero tail again once there is room", fileSize(), f.Size())
	}
	// A fallocate that fails otherwise: the append is written all the same.
	remove := fsys.Inject(faultfs.Rule{Op: faultfs.OpAllocate})
	defer remove()
	injected := fsys.Injected()
	for range 400 { // past the preallocated MiB
		if _, err := f.Append(payload); err != nil {
			t.Fatalf("append while fallocate fails: %v", err)
		}
	}
	if fsys.Injected() == injected {
		t.Fatal("no fallocate failed")
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	sc := f.Scanner()
	n := 0
	for sc.Next() {
		n++
	}
	if n != 402 || len(sc.BadRegions()) != 0 {
		t.Fatalf("scan: %d chunks, bad %v", n, sc.BadRegions())
	}
}
