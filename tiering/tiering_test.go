package tiering

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/textindex"
	"github.com/ztsd/ztsd/trace"
)

// openDB opens a DB whose stores hold a few KiB each, and writes n sealed
// stores into it (plus the open one).
func openDB(t *testing.T, n int) *storedir.DB {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.MinFreeBytes = -1
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	writeStores(t, db, n, 1)
	return db
}

// writeStores appends spans and rotates n times.
func writeStores(t *testing.T, db *storedir.DB, n int, seed uint64) {
	t.Helper()
	for i := range n {
		if err := db.Append(context.Background(), workload.Spans(seed*1000+uint64(i), 20)); err != nil {
			t.Fatal(err)
		}
		if err := db.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
}

func newUploader(t *testing.T, db *storedir.DB, b objstore.Bucket, mod func(*Options)) *Uploader {
	t.Helper()
	opt := Options{Bucket: b, Prefix: "pfx", Node: "n1", BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Interval: 50 * time.Millisecond}
	if mod != nil {
		mod(&opt)
	}
	u, err := New(db, opt)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// bucketState audits the bucket (s3test.Audit) and checks each store's
// upload against its local data file while it is still there.
func bucketState(t *testing.T, b objstore.Bucket, dataDir string) map[uint32]*objstore.Manifest {
	t.Helper()
	out := s3test.Audit(t, b, "pfx", "n1")
	for id, m := range out {
		local := filepath.Join(dataDir, storedir.StoreName(id), storedir.DataFile)
		if _, err := os.Stat(local); err == nil {
			size, sum, err := hashFile(local)
			f, _ := m.File(storedir.DataFile)
			if err != nil || size != f.Size || hex.EncodeToString(sum) != f.SHA256 {
				t.Fatalf("store %d: the local data file (%d bytes) differs from the upload (%d)", id, size, f.Size)
			}
		}
	}
	return out
}

func TestUploadSealedStores(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	db := openDB(t, 4)
	u := newUploader(t, db, b, nil)
	ctx := context.Background()
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	got := bucketState(t, b, db.Dir())
	sealed := db.SealedStores()
	if len(sealed) != 4 || len(got) != 4 {
		t.Fatalf("%d sealed stores, %d manifests", len(sealed), len(got))
	}
	infos := map[uint32]storedir.Info{}
	for _, in := range db.LocalStores() {
		id, _ := storedir.ParseStoreName(in.ID)
		infos[id] = in
	}
	for _, id := range sealed {
		m := got[id]
		if m == nil {
			t.Fatalf("store %d not in the bucket", id)
		}
		in := infos[id]
		if m.Node != "n1" || m.Spans != in.Spans || m.Chunks != in.Chunks || m.FirstNS != in.FirstNS || m.LastNS != in.LastNS || m.MasterChecksum == "" {
			t.Fatalf("store %d: manifest %+v, store %+v", id, m, in)
		}
		var paths []string
		for _, f := range m.Files {
			paths = append(paths, f.Path)
		}
		joined := strings.Join(paths, " ")
		for _, want := range []string{"traces.zts", "config.props", "meta/", "text/", "MANIFEST-"} {
			if !strings.Contains(joined, want) {
				t.Fatalf("store %d: files %v lack %s", id, paths, want)
			}
		}
		mk, err := u.Marker(id)
		if err != nil || mk.Generation != m.Generation {
			t.Fatalf("store %d: marker %v, %v", id, mk, err)
		}
	}
	// The uploaded index directories open as indexes: download one store's
	// meta/ and text/ and check the watermark covers the data file.
	checkDownloadedIndex(t, b, got[sealed[0]])

	// A second pass uploads nothing again.
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	again := bucketState(t, b, db.Dir())
	for id, m := range got {
		if again[id].Generation != m.Generation {
			t.Fatalf("store %d uploaded again: %s then %s", id, m.Generation, again[id].Generation)
		}
	}
	if n := counter(u.m.stores); n != 4 {
		t.Fatalf("uploaded_stores_total %v, want 4", n)
	}
}

// TestUploadResumesAfterInterruption: an upload that died after its
// manifest (no marker) is adopted, not uploaded twice; objects of an
// attempt that died before its manifest are deleted; a manifest that does
// not match the store is replaced by a fresh upload.
func TestUploadResumesAfterInterruption(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	db := openDB(t, 3)
	u := newUploader(t, db, b, nil)
	ctx := context.Background()
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	before := bucketState(t, b, db.Dir())
	ids := db.SealedStores()

	// Store 0: the marker is lost (killed after the manifest was written).
	os.Remove(filepath.Join(db.Dir(), storedir.StoreName(ids[0]), MarkerFile))
	// Store 1: the same, and an earlier attempt left a partial generation.
	os.Remove(filepath.Join(db.Dir(), storedir.StoreName(ids[1]), MarkerFile))
	junk := objstore.FileKey("pfx", "n1", ids[1], "gdead", "traces.zts")
	if err := b.Put(ctx, junk, strings.NewReader("partial"), 7, nil); err != nil {
		t.Fatal(err)
	}
	// Store 2: the bucket's manifest lost a file (a tampered bucket).
	os.Remove(filepath.Join(db.Dir(), storedir.StoreName(ids[2]), MarkerFile))
	if err := b.Delete(ctx, objstore.FileKey("pfx", "n1", ids[2], before[ids[2]].Generation, "config.props")); err != nil {
		t.Fatal(err)
	}

	u2 := newUploader(t, db, b, nil)
	if got := u2.Pending(); len(got) != 3 {
		t.Fatalf("pending %v", got)
	}
	if err := u2.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	after := bucketState(t, b, db.Dir()) // fails on the junk object if it stayed
	if after[ids[0]].Generation != before[ids[0]].Generation || after[ids[1]].Generation != before[ids[1]].Generation {
		t.Fatal("a store whose manifest was in the bucket was uploaded again")
	}
	if after[ids[2]].Generation == before[ids[2]].Generation {
		t.Fatal("a store whose upload lost a file kept its manifest")
	}
	if counter(u2.m.adopted) != 2 || counter(u2.m.stores) != 1 {
		t.Fatalf("adopted %v, uploaded %v; want 2 and 1", counter(u2.m.adopted), counter(u2.m.stores))
	}
	if len(u2.Pending()) != 0 {
		t.Fatalf("still pending: %v", u2.Pending())
	}
}

// TestLocalLimitsDropOnlyVerified: local_max_stores drops the oldest local
// copies, only of stores whose upload is verified, and never while the
// bucket's manifest disagrees with the marker.
func TestLocalLimitsDropOnlyVerified(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	db := openDB(t, 5)
	ctx := context.Background()
	var mu sync.Mutex
	var dropped []uint32
	var u *Uploader
	u = newUploader(t, db, b, func(o *Options) {
		o.Local = Limits{MaxStores: 3}
		o.DropLocal = func(id uint32, m *objstore.Manifest) error {
			mk, err := u.Marker(id)
			if err != nil || mk.Generation != m.Generation {
				t.Errorf("store %d dropped without a verified upload: %v", id, err)
			}
			mu.Lock()
			dropped = append(dropped, id)
			mu.Unlock()
			return db.DeleteSealed(id)
		}
	})
	ids := db.SealedStores()
	// Nothing uploaded: nothing may be dropped.
	if err := u.ApplyLocalLimits(ctx); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 0 {
		t.Fatalf("dropped %v before any upload", dropped)
	}
	// Upload only the second-oldest and the newest: the oldest is skipped.
	for _, id := range []uint32{ids[1], ids[4]} {
		if _, err := u.Upload(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := u.ApplyLocalLimits(ctx); err != nil {
		t.Fatal(err)
	}
	// 6 local stores (5 sealed + the open one), limit 3: the verified
	// ones among the oldest go, the unverified stay.
	if len(dropped) != 2 || dropped[0] != ids[1] || dropped[1] != ids[4] {
		t.Fatalf("dropped %v, want %v", dropped, []uint32{ids[1], ids[4]})
	}
	// A marker whose generation the bucket no longer names is not trusted.
	m, err := u.Upload(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	other := *m
	other.Generation = "gother"
	if err := writeMarker(filepath.Join(db.Dir(), storedir.StoreName(ids[0]), MarkerFile), &other); err != nil {
		t.Fatal(err)
	}
	if err := u.ApplyLocalLimits(ctx); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 {
		t.Fatalf("dropped %v with a stale marker", dropped)
	}
	if _, err := u.Marker(ids[0]); err == nil {
		t.Fatal("the stale marker was kept")
	}
	// The full pass uploads every store again and then drops the oldest
	// (4 local stores, limit 3).
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 3 || dropped[2] != ids[0] {
		t.Fatalf("dropped %v", dropped)
	}
	if n := len(db.LocalStores()); n != 3 {
		t.Fatalf("%d local stores, want 3", n)
	}
}

// TestRetentionAppliesToBucket: with a bucket, [retention] counts the
// node's stores local and uploaded together and deletes the oldest from
// both, manifest first.
func TestRetentionAppliesToBucket(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	db := openDB(t, 5)
	ctx := context.Background()
	var forgot []uint32
	u := newUploader(t, db, b, func(o *Options) {
		o.Local = Limits{MaxStores: 2}
		o.DropLocal = func(id uint32, m *objstore.Manifest) error { return db.DeleteSealed(id) }
		o.ForgetRemote = func(id uint32) error { forgot = append(forgot, id); return nil }
	})
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	ids := db.SealedStores()
	if len(ids) != 1 {
		t.Fatalf("local sealed %v, want 1 (local_max_stores 2 with the open store)", ids)
	}
	all := bucketState(t, b, db.Dir())
	if len(all) != 5 {
		t.Fatalf("%d stores in the bucket", len(all))
	}
	// [retention] max_stores = 3 over the 6 stores (5 sealed, 1 open).
	u.SetLimits(Limits{MaxStores: 2}, Limits{MaxStores: 3})
	if err := u.ApplyRetention(ctx); err != nil {
		t.Fatal(err)
	}
	left := bucketState(t, b, db.Dir())
	if len(left) != 2 {
		t.Fatalf("%d stores left in the bucket, want 2", len(left))
	}
	for id := range all {
		_, kept := left[id]
		if kept != (id >= 3) {
			t.Fatalf("store %d kept=%v; the oldest three should go", id, kept)
		}
	}
	if len(forgot) != 3 {
		t.Fatalf("forgot %v remote stores, want the 3 oldest", forgot)
	}
	// No orphan objects of the deleted stores stay (bucketState checks the
	// rest); a store deleted from the bucket and served locally is gone too.
	var leftKeys int
	b.List(ctx, "pfx/n1/00000", func(o objstore.Object) error {
		if id, _ := storedir.ParseStoreName(strings.Split(o.Key, "/")[2]); id < 3 {
			leftKeys++
		}
		return nil
	})
	if leftKeys != 0 {
		t.Fatalf("%d objects of deleted stores are left", leftKeys)
	}
	u.SetLimits(Limits{MaxStores: 2}, Limits{MaxStores: 1})
	if err := u.ApplyRetention(ctx); err != nil {
		t.Fatal(err)
	}
	if len(bucketState(t, b, db.Dir())) != 0 || len(db.SealedStores()) != 0 {
		t.Fatalf("retention 1 left %d uploaded, %v local sealed", len(bucketState(t, b, db.Dir())), db.SealedStores())
	}
}

func TestUploaderRunStopsOnCancel(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	db := openDB(t, 2)
	u := newUploader(t, db, b, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(u.Pending()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	writeStores(t, db, 1, 7)
	u.Kick()
	for len(u.Pending()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(u.Pending()) > 0 {
		t.Fatalf("pending after 10s: %v", u.Pending())
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	if len(bucketState(t, b, db.Dir())) != 3 {
		t.Fatal("not every store uploaded")
	}
}

func counter(c interface{ Desc() *prometheus.Desc }) float64 {
	return testutil.ToFloat64(c.(prometheus.Collector))
}

// checkDownloadedIndex downloads the store's index directories and opens
// them: their watermarks cover the uploaded data file.
func checkDownloadedIndex(t *testing.T, b objstore.Bucket, m *objstore.Manifest) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Path, "meta/") && !strings.HasPrefix(f.Path, "text/") {
			continue
		}
		rc, _, err := b.Get(context.Background(), objstore.FileKey("pfx", m.Node, m.Store, m.Generation, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		os.MkdirAll(filepath.Dir(p), 0o755)
		out, _ := os.Create(p)
		io.Copy(out, rc)
		out.Close()
		rc.Close()
	}
	data, _ := m.File(storedir.DataFile)
	meta, err := index.OpenReadOnly(filepath.Join(dir, "meta"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	text, err := textindex.OpenReadOnly(filepath.Join(dir, "text"), textindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close()
	mw, _ := meta.Watermark()
	tw, _ := text.Watermark()
	if mw != data.Size || tw != data.Size || int64(meta.Stats().Spans) != m.Spans {
		t.Fatalf("downloaded index: watermarks %d/%d, spans %d; data file %d bytes, %d spans", mw, tw, meta.Stats().Spans, data.Size, m.Spans)
	}
}

// TestSweepDeletesUnnamedObjects: Sweep (run once per Run) deletes objects
// under the node's prefix that no manifest names — a generation a killed
// run left behind an uploaded store, and the objects of a store whose
// manifest is gone — and keeps everything a manifest names and anything
// that is not a store's.
func TestSweepDeletesUnnamedObjects(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	db := openDB(t, 2)
	u := newUploader(t, db, b, nil)
	ctx := context.Background()
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	ids := db.SealedStores()
	put := func(key string) {
		if err := b.Put(ctx, key, strings.NewReader("junk"), 4, nil); err != nil {
			t.Fatal(err)
		}
	}
	left := objstore.FileKey("pfx", "n1", ids[0], "gkilled", "traces.zts")
	orphan := objstore.FileKey("pfx", "n1", 0x77, "gorphan", "meta/000004.sst")
	other := "pfx/n1/notes.txt"
	otherNode := objstore.FileKey("pfx", "n2", ids[0], "gx", "traces.zts")
	for _, k := range []string{left, orphan, other, otherNode} {
		put(k)
	}
	// A store not in the data directory may be re-uploaded by `ztsctl
	// recover --remote` right now: its fresh objects stay.
	if err := newUploader(t, db, b, nil).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{left: false, orphan: true, other: true, otherNode: true} {
		_, err := b.Head(ctx, k)
		if exists := err == nil; exists != want {
			t.Errorf("%s: exists %v after the sweep, want %v (%v)", k, exists, want, err)
		}
	}
	later := newUploader(t, db, b, func(o *Options) { o.Now = func() time.Time { return time.Now().Add(SweepMinAge + time.Minute) } })
	if err := later.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{left: false, orphan: false, other: true, otherNode: true} {
		_, err := b.Head(ctx, k)
		if exists := err == nil; exists != want {
			t.Errorf("%s: exists %v after the sweep, want %v (%v)", k, exists, want, err)
		}
	}
	b.Delete(ctx, other)
	bucketState(t, b, db.Dir()) // every upload intact
}

// TestLocalLimitsBySizeAndAge: local_max_total_size and local_max_age act
// too, on verified uploads only, oldest first.
func TestLocalLimitsBySizeAndAge(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	db := openDB(t, 4)
	ctx := context.Background()
	var dropped []uint32
	now := time.Now()
	u := newUploader(t, db, b, func(o *Options) {
		o.DropLocal = func(id uint32, m *objstore.Manifest) error {
			dropped = append(dropped, id)
			return db.DeleteSealed(id)
		}
		o.Now = func() time.Time { return now }
	})
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 0 {
		t.Fatalf("dropped %v with no limit", dropped)
	}
	locals := db.LocalStores()
	var total int64
	for _, s := range locals {
		total += s.Bytes
	}
	// A total size that only the newest two stores and the open one fit in.
	keep := locals[len(locals)-1].Bytes + locals[len(locals)-2].Bytes + locals[len(locals)-3].Bytes
	u.SetLimits(Limits{MaxTotalSize: keep}, Limits{})
	if err := u.ApplyLocalLimits(ctx); err != nil {
		t.Fatal(err)
	}
	ids := []uint32{}
	for _, s := range locals[:2] {
		id, _ := storedir.ParseStoreName(s.ID)
		ids = append(ids, id)
	}
	if len(dropped) != 2 || dropped[0] != ids[0] || dropped[1] != ids[1] {
		t.Fatalf("size limit %d of %d: dropped %v, want %v", keep, total, dropped, ids)
	}
	// Age: every span of the workload is older than an hour from a clock
	// two days ahead; the sealed stores go, the open one stays.
	now = now.Add(48 * time.Hour)
	u.SetLimits(Limits{MaxAge: time.Hour}, Limits{})
	if err := u.ApplyLocalLimits(ctx); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 4 || len(db.SealedStores()) != 0 || len(db.LocalStores()) != 1 {
		t.Fatalf("age limit: dropped %v, %d local stores left", dropped, len(db.LocalStores()))
	}
}

// TestUploadedIndexesCoverDataFile: stores sealed by rotation in the
// middle of a group commit (their last chunks are indexed after the seal)
// are uploaded with indexes that cover the whole data file, never a
// checkpoint missing the tail.
func TestUploadedIndexesCoverDataFile(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.MinFreeBytes = -1
	o.MaxStoreSize = 32 << 10
	o.ChunkTargetSize = 16 << 10
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u := newUploader(t, db, b, nil)
	ctx := context.Background()
	for i := range 20 {
		if err := db.Append(ctx, workload.Spans(uint64(500+i), 150)); err != nil {
			t.Fatal(err)
		}
		// Upload at once, as the OnSealed kick does.
		for _, id := range u.Pending() {
			if _, err := u.Upload(ctx, id); err != nil && !errors.Is(err, storedir.ErrIndexBehind) {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(u.Pending()) > 0 {
		if err := u.Pass(ctx); err != nil && !errors.Is(err, storedir.ErrIndexBehind) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending %v", u.Pending())
		}
	}
	got := bucketState(t, b, db.Dir())
	if len(got) < 4 {
		t.Fatalf("%d stores uploaded", len(got))
	}
	for _, m := range got {
		checkDownloadedIndex(t, b, m)
	}
}

// TestSupersededAfterUploadIsUploadedAgain: a store whose spans get a newer
// version after its upload (storedir marks it superseded) is uploaded again
// under a new generation, so the bucket's copy carries the mark; the old
// generation is deleted and the store stays visible once.
func TestSupersededAfterUploadIsUploadedAgain(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.MinFreeBytes = -1
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	spans := workload.Spans(77, 20)
	if err := db.Append(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if err := db.Rotate(); err != nil {
		t.Fatal(err)
	}
	u := newUploader(t, db, b, nil)
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	id := db.SealedStores()[0]
	before := bucketState(t, b, db.Dir())[id]
	if _, ok := before.File("superseded"); ok {
		t.Fatal("a fresh store uploaded as superseded")
	}
	// A newer version of one span: the sealed store is marked.
	newer := *spans[0]
	newer.DurationNS += 1000
	if err := db.Append(ctx, []*trace.Span{&newer}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(db.Dir(), storedir.StoreName(id), "superseded")); err != nil {
		t.Fatalf("storedir did not mark the store: %v", err)
	}
	if p := u.Pending(); len(p) != 1 || p[0] != id {
		t.Fatalf("pending %v, want the superseded store %d", p, id)
	}
	if err := u.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	after := bucketState(t, b, db.Dir())[id]
	if after.Generation == before.Generation {
		t.Fatal("not uploaded again")
	}
	if _, ok := after.File("superseded"); !ok {
		t.Fatal("the new upload lacks the superseded mark")
	}
	if len(u.Pending()) != 0 {
		t.Fatalf("still pending: %v", u.Pending())
	}
}
