package tiering

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
)

// TestUploadThroughput measures the upload of one sealed store of
// ZTSD_UPLOAD_MEASURE_MIB MiB (data file, uncompressed chunks) to
// versitygw on loopback: the whole Upload (copy, SHA-256 of every file,
// PUT with the server's SHA-256 check, HEAD, manifest, marker) and, for
// comparison, a bare PUT of the data file with its SHA-256. Not part of
// make test; the note compares the result with the disk's sequential
// write speed (dd oflag=direct).
func TestUploadThroughput(t *testing.T) {
	mib, _ := strconv.Atoi(os.Getenv("ZTSD_UPLOAD_MEASURE_MIB"))
	if mib <= 0 {
		t.Skip("set ZTSD_UPLOAD_MEASURE_MIB to the store size to measure")
	}
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.MinFreeBytes = -1
	o.Chunk.Compression = chunk.None
	o.MaxStoreSize = int64(mib+64) << 20
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	t0 := time.Now()
	for seed := uint64(1); ; seed++ {
		if err := db.Append(ctx, workload.Spans(seed, 2000)); err != nil {
			t.Fatal(err)
		}
		if seed%20 == 0 {
			infos := db.LocalStores()
			if infos[len(infos)-1].Bytes >= int64(mib)<<20 {
				break
			}
		}
	}
	if err := db.Rotate(); err != nil {
		t.Fatal(err)
	}
	t.Logf("store written in %v", time.Since(t0).Round(time.Millisecond))
	u := newUploader(t, db, b, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	})
	id := db.SealedStores()[0]
	t1 := time.Now()
	m, err := u.Upload(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t1)
	var total int64
	for _, f := range m.Files {
		total += f.Size
	}
	data, _ := m.File(storedir.DataFile)
	t.Logf("Upload: %d files, %.1f MiB (data file %.1f MiB) in %v: %.1f MB/s", len(m.Files), float64(total)/(1<<20),
		float64(data.Size)/(1<<20), took.Round(time.Millisecond), float64(total)/1e6/took.Seconds())

	path := filepath.Join(db.Dir(), storedir.StoreName(id), storedir.DataFile)
	t2 := time.Now()
	size, sum, err := hashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hashTook := time.Since(t2)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t3 := time.Now()
	if err := b.Put(ctx, "bare/traces.zts", f, size, sum); err != nil {
		t.Fatal(err)
	}
	putTook := time.Since(t3)
	t.Logf("data file alone: SHA-256 %.1f MB/s; PUT with SHA-256 check %.1f MB/s (%v)", float64(size)/1e6/hashTook.Seconds(),
		float64(size)/1e6/putTook.Seconds(), putTook.Round(time.Millisecond))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
