package bucketadmin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/objstore/objstoretest"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// sealedStores writes n workload spans into a fresh data directory, in
// stores sealed every perStore spans, and returns the directory and the
// spans.
func sealedStores(t *testing.T, seed uint64, n, perStore int) (string, []*trace.Span) {
	t.Helper()
	dir := t.TempDir()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.ChunkTargetSize = 4 << 10
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	spans := workload.Spans(seed, n)
	for i := 0; i < len(spans); i += perStore {
		for j := i; j < min(i+perStore, len(spans)); j += 50 {
			if err := db.Append(context.Background(), spans[j:min(j+50, i+perStore, len(spans))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, spans
}

func storeDir(dataDir string, id uint32) string {
	return filepath.Join(dataDir, storedir.StoreName(id))
}

// TestUploadDownloadRoundTrip: a store uploaded and downloaded again is
// byte for byte the same; the manifest is written last and names every
// file; a re-run of Download fetches nothing.
func TestUploadDownloadRoundTrip(t *testing.T) {
	ctx := context.Background()
	dataDir, _ := sealedStores(t, 1, 400, 400)
	b := objstoretest.New()
	var keysBeforeManifest []string
	m, err := Upload(ctx, b, "fleet", "a", 0, storeDir(dataDir, 0), UploadOptions{Spans: 400, BeforeManifest: func() error {
		for _, k := range b.Keys() {
			keysBeforeManifest = append(keysBeforeManifest, k)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keysBeforeManifest {
		if strings.HasSuffix(k, objstore.ManifestName) {
			t.Fatalf("manifest %s written before the files were", k)
		}
	}
	if len(keysBeforeManifest) != len(m.Files) || m.Spans != 400 || m.Chunks == 0 || m.MasterChecksum == "00000000" {
		t.Fatalf("manifest %+v after %d objects", m, len(keysBeforeManifest))
	}
	for _, want := range []string{"traces.zts", "config.props"} {
		if _, ok := m.File(want); !ok {
			t.Fatalf("manifest names no %s: %+v", want, m.Files)
		}
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "LOCK") || strings.Contains(f.Path, "/LOCK") && !strings.HasPrefix(f.Path, "meta/") && !strings.HasPrefix(f.Path, "text/") {
			t.Fatalf("uploaded %s", f.Path)
		}
	}
	got, err := ReadManifest(ctx, b, "fleet", discovery.StoreKey{Node: "a", ID: 0})
	if err != nil || got.Generation != m.Generation {
		t.Fatalf("manifest read back: %+v, %v", got, err)
	}

	dst := filepath.Join(t.TempDir(), "000000")
	n, err := Download(ctx, b, "fleet", got, dst, DownloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range m.Files {
		total += f.Size
		want, _ := os.ReadFile(filepath.Join(storeDir(dataDir, 0), f.Path))
		have, err := os.ReadFile(filepath.Join(dst, f.Path))
		if err != nil || !bytes.Equal(want, have) {
			t.Fatalf("%s differs after the round trip (%v)", f.Path, err)
		}
	}
	if n != total {
		t.Fatalf("downloaded %d bytes, the store has %d", n, total)
	}
	if n, err := Download(ctx, b, "fleet", got, dst, DownloadOptions{}); err != nil || n != 0 {
		t.Fatalf("second Download fetched %d bytes (%v), want 0", n, err)
	}
}

// TestDownloadRefusesMismatch: a file whose bytes are not the manifest's
// is not put in place (unless KeepMismatched), and a manifest path that
// would leave the store directory is refused.
func TestDownloadRefusesMismatch(t *testing.T) {
	ctx := context.Background()
	dataDir, _ := sealedStores(t, 2, 200, 200)
	b := objstoretest.New()
	m, err := Upload(ctx, b, "", "a", 0, storeDir(dataDir, 0), UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := objstore.FileKey("", "a", 0, m.Generation, "traces.zts")
	data := append([]byte(nil), objectBytes(b, key)...)
	data[len(data)/2] ^= 0x40
	b.Set(key, data)

	dst := filepath.Join(t.TempDir(), "000000")
	_, err = Download(ctx, b, "", m, dst, DownloadOptions{})
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != "traces.zts" || !errors.Is(err, ErrMismatch) {
		t.Fatalf("flipped bit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "traces.zts")); !os.IsNotExist(err) {
		t.Fatalf("a mismatched file was put in place: %v", err)
	}
	if _, err := Download(ctx, b, "", m, dst, DownloadOptions{KeepMismatched: true}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("KeepMismatched: %v", err)
	}
	if have, _ := os.ReadFile(filepath.Join(dst, "traces.zts")); !bytes.Equal(have, data) {
		t.Fatal("KeepMismatched did not keep the bucket's bytes")
	}

	evil := *m
	evil.Files = []objstore.ManifestFile{{Path: "../escape", Size: 1, SHA256: strings.Repeat("00", 32)}}
	if _, err := Download(ctx, b, "", &evil, dst, DownloadOptions{}); err == nil || !strings.Contains(err.Error(), "not a plain relative path") {
		t.Fatalf("../escape: %v", err)
	}
}

func TestParseStoreRef(t *testing.T) {
	for in, want := range map[string]string{"web-1/000003": "web-1/000003", "a/ff": "a/0000ff", "a/A0": "a/0000a0"} {
		k, err := ParseStoreRef(in)
		if err != nil || k.String() != want {
			t.Errorf("ParseStoreRef(%q) = %v, %v; want %s", in, k, err, want)
		}
	}
	for _, bad := range []string{"", "a", "/000001", "a/", "a/00000g", "a/b/c", "a/123456789"} {
		if _, err := ParseStoreRef(bad); err == nil {
			t.Errorf("ParseStoreRef(%q) accepted", bad)
		}
	}
}

// uploadAll uploads every store of dataDir as node's.
func uploadAll(t *testing.T, b objstore.Bucket, prefix, node, dataDir string, stores int) []*objstore.Manifest {
	t.Helper()
	var ms []*objstore.Manifest
	for id := uint32(0); id < uint32(stores); id++ {
		m, err := Upload(context.Background(), b, prefix, node, id, storeDir(dataDir, id), UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

func problems(rep *VerifyReport) string {
	var s []string
	for _, st := range rep.Stores {
		for _, p := range st.Problems {
			s = append(s, st.Node+"/"+st.Store+": "+p)
		}
	}
	return strings.Join(s, "\n")
}

// TestVerify: a clean bucket passes, shallow and deep; a changed byte
// passes the shallow check (sizes) and fails the deep one naming the file;
// a missing object fails both; objects of an upload with no manifest and
// of a generation the manifest does not name are notes.
func TestVerify(t *testing.T) {
	ctx := context.Background()
	dirA, _ := sealedStores(t, 3, 600, 200)
	dirB, _ := sealedStores(t, 4, 200, 200)
	b := objstoretest.New()
	msA := uploadAll(t, b, "p", "a", dirA, 3)
	uploadAll(t, b, "p", "b", dirB, 1)
	for _, deep := range []bool{false, true} {
		rep, err := Verify(ctx, b, "bk", "p", VerifyOptions{Deep: deep, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || len(rep.Stores) != 4 || len(rep.Notes) != 0 {
			t.Fatalf("clean bucket, deep=%v: %s %+v", deep, problems(rep), rep.Notes)
		}
		if deep && (rep.Stores[0].Deep == nil || !rep.Stores[0].Deep.OK || rep.Stores[0].Deep.Stores[0].ChunksOK == 0) {
			t.Fatalf("deep verify did not verify the downloaded store: %+v", rep.Stores[0].Deep)
		}
	}

	// a/000001: one byte of the data file changed, size kept.
	key := objstore.FileKey("p", "a", 1, msA[1].Generation, "traces.zts")
	data := append([]byte(nil), objectBytes(b, key)...)
	data[len(data)/2] ^= 1
	b.Set(key, data)
	// a/000002: its config.props is gone.
	b.Delete(ctx, objstore.FileKey("p", "a", 2, msA[2].Generation, "config.props"))
	// b/000005: an upload that never wrote its manifest; a/000000: a
	// leftover generation.
	b.Set(objstore.FileKey("p", "b", 5, "g-abandoned", "traces.zts"), []byte("xyz"))
	b.Set(objstore.FileKey("p", "a", 0, "g-old", "traces.zts"), []byte("xy"))

	rep, err := Verify(ctx, b, "bk", "p", VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Problems != 1 || !strings.Contains(problems(rep), "a/000002: config.props: missing") {
		t.Fatalf("shallow: %s", problems(rep))
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "store b/000005 has 1 objects (3 bytes) and no manifest") {
		t.Fatalf("notes: %q", rep.Notes)
	}
	if n := rep.Stores[0].Notes; len(n) != 1 || !strings.Contains(n[0], "1 objects (2 bytes) of 1 generations the manifest does not name") {
		t.Fatalf("a/000000 notes: %q", n)
	}
	rep, err = Verify(ctx, b, "bk", "p", VerifyOptions{Deep: true, Node: "a", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := problems(rep)
	if rep.OK || len(rep.Stores) != 3 || !strings.Contains(p, "a/000001: traces.zts: object p/a/000001/"+msA[1].Generation+"/traces.zts has SHA-256") ||
		!strings.Contains(p, "a/000001: chunk") || !strings.Contains(p, "a/000002: config.props: missing") {
		t.Fatalf("deep:\n%s", p)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "verify --remote: ") || !strings.Contains(text.String(), "PROBLEM") {
		t.Fatalf("report text:\n%s", text.String())
	}

	// One store only; one that does not exist.
	one := discovery.StoreKey{Node: "b", ID: 0}
	if rep, err := Verify(ctx, b, "bk", "p", VerifyOptions{Store: &one}); err != nil || !rep.OK || len(rep.Stores) != 1 {
		t.Fatalf("--store b/000000: %v %+v", err, rep)
	}
	none := discovery.StoreKey{Node: "b", ID: 9}
	if _, err := Verify(ctx, b, "bk", "p", VerifyOptions{Store: &none}); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("--store b/000009: %v", err)
	}
}

// openCopy downloads a store and opens it as a data directory.
func openCopy(t *testing.T, b objstore.Bucket, prefix string, k discovery.StoreKey) *storedir.DB {
	t.Helper()
	m, err := ReadManifest(context.Background(), b, prefix, k)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	if _, err := Download(context.Background(), b, prefix, m, storeDir(dataDir, 0), DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), dataDir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestRecover: a store whose index objects are damaged or gone is
// downloaded, rebuilt and re-uploaded as a new generation; the new
// manifest replaces the old one, the old generation's objects are
// deleted, deep verify passes and every span is readable from the copy.
func TestRecover(t *testing.T) {
	ctx := context.Background()
	dataDir, spans := sealedStores(t, 5, 300, 300)
	b := objstoretest.New()
	m := uploadAll(t, b, "", "a", dataDir, 1)[0]
	k := discovery.StoreKey{Node: "a", ID: 0}
	var damagedSST bool
	for _, f := range m.Files {
		key := objstore.FileKey("", "a", 0, m.Generation, f.Path)
		switch {
		case strings.HasPrefix(f.Path, "text/"):
			b.Delete(ctx, key)
		case strings.HasPrefix(f.Path, "meta/") && strings.HasSuffix(f.Path, ".sst"):
			data := append([]byte(nil), objectBytes(b, key)...)
			for i := 0; i < len(data); i += 97 {
				data[i] ^= 0xff
			}
			b.Set(key, data)
			damagedSST = true
		}
	}
	if !damagedSST {
		t.Fatal("the store has no meta/*.sst to damage")
	}
	if rep, err := Verify(ctx, b, "bk", "", VerifyOptions{}); err != nil || rep.OK {
		t.Fatalf("before recover, verify passes: %v", err)
	}

	// A dry run changes nothing.
	before := b.Len()
	rep, err := Recover(ctx, b, "", k, RecoverOptions{DryRun: true, TempDir: t.TempDir()})
	if err != nil || rep.NewGeneration != "" || b.Len() != before {
		t.Fatalf("dry run: %+v, %v; %d objects, were %d", rep, err, b.Len(), before)
	}

	rep, err = Recover(ctx, b, "", k, RecoverOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NewGeneration == "" || rep.NewGeneration == m.Generation || len(rep.Mismatched) == 0 || rep.DeletedObjects == 0 {
		t.Fatalf("recover: %+v", rep)
	}
	nm, err := ReadManifest(ctx, b, "", k)
	if err != nil || nm.Generation != rep.NewGeneration || nm.Spans != 300 {
		t.Fatalf("manifest after recover: %+v, %v", nm, err)
	}
	for _, key := range b.Keys() {
		if strings.Contains(key, "/"+m.Generation+"/") {
			t.Fatalf("old generation object %s left", key)
		}
	}
	vr, err := Verify(ctx, b, "bk", "", VerifyOptions{Deep: true, TempDir: t.TempDir()})
	if err != nil || !vr.OK {
		t.Fatalf("deep verify after recover: %v\n%s", err, problems(vr))
	}
	db := openCopy(t, b, "", k)
	for _, sp := range spans {
		got, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID)
		if err != nil {
			t.Fatalf("span %s/%s after recover: %v", sp.TraceID, sp.SpanID, err)
		}
		w, g := *sp, *got
		w.Children, g.Children = nil, nil
		if d := trace.Diff(&w, &g); d != "" {
			t.Fatalf("span %s/%s differs: %s", sp.TraceID, sp.SpanID, d)
		}
	}
}

// TestRecoverCrashBeforeManifest: a recover that stops after uploading
// the new generation but before its manifest leaves the old generation
// visible and intact, and the new generation's objects are removed; one
// that finds the manifest replaced meanwhile replaces nothing.
func TestRecoverCrashBeforeManifest(t *testing.T) {
	ctx := context.Background()
	dataDir, _ := sealedStores(t, 6, 200, 200)
	b := objstoretest.New()
	m := uploadAll(t, b, "", "a", dataDir, 1)[0]
	k := discovery.StoreKey{Node: "a", ID: 0}
	crash := errors.New("injected crash before the manifest")
	_, err := Recover(ctx, b, "", k, RecoverOptions{TempDir: t.TempDir(), Upload: UploadOptions{BeforeManifest: func() error { return crash }}})
	if !errors.Is(err, crash) {
		t.Fatalf("crash point: %v", err)
	}
	if cur, err := ReadManifest(ctx, b, "", k); err != nil || cur.Generation != m.Generation {
		t.Fatalf("after the crash the manifest is %+v, %v", cur, err)
	}
	if b.Len() != len(m.Files)+1 {
		t.Fatalf("%d objects after the interrupted recover, want the old generation's %d and its manifest", b.Len(), len(m.Files))
	}

	// Someone replaced the manifest while recover worked.
	_, err = Recover(ctx, b, "", k, RecoverOptions{TempDir: t.TempDir(), Upload: UploadOptions{BeforeManifest: func() error {
		_, err := Upload(ctx, b, "", "a", 0, storeDir(dataDir, 0), UploadOptions{})
		return err
	}}})
	if !errors.Is(err, ErrStoreChanged) {
		t.Fatalf("concurrent replacement: %v", err)
	}
	if rep, err := Verify(ctx, b, "bk", "", VerifyOptions{Deep: true, TempDir: t.TempDir()}); err != nil || !rep.OK {
		t.Fatalf("after the refused replacement: %v %s", err, problems(rep))
	}
}

// TestStageResumes: Stage downloads only data files and config.props, one
// data directory per node; a re-run downloads the stores of its first
// run (not one uploaded since), fetching only what is missing; another
// node list is refused.
func TestStageResumes(t *testing.T) {
	ctx := context.Background()
	dataDir, _ := sealedStores(t, 7, 400, 200)
	b := objstoretest.New()
	uploadAll(t, b, "", "a", dataDir, 1)
	uploadAll(t, b, "", "b", dataDir, 2)
	stage := filepath.Join(t.TempDir(), "stage")
	dirs, err := Stage(ctx, b, "", []string{"b", "a"}, stage, StageOptions{Bucket: "bk"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(dirs, ",") != filepath.Join(stage, "b")+","+filepath.Join(stage, "a") {
		t.Fatalf("dirs %v", dirs)
	}
	var files []string
	filepath.WalkDir(stage, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(stage, p)
			files = append(files, rel)
		}
		return nil
	})
	if got := strings.Join(files, " "); got != "a/000000/config.props a/000000/traces.zts b/000000/config.props b/000000/traces.zts b/000001/config.props b/000001/traces.zts bucket-stage.json" {
		t.Fatalf("staged files: %s", got)
	}
	// Interrupted: a file missing. Meanwhile node a uploaded store 1.
	os.Remove(filepath.Join(stage, "b", "000001", "traces.zts"))
	uploadAll(t, b, "", "a", dataDir, 2)
	if _, err := Stage(ctx, b, "", []string{"b", "a"}, stage, StageOptions{Bucket: "bk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(stage, "b", "000001", "traces.zts")); err != nil {
		t.Fatalf("the missing file was not downloaded again: %v", err)
	}
	if _, err := os.Stat(filepath.Join(stage, "a", "000001")); !os.IsNotExist(err) {
		t.Fatalf("a re-run downloaded a store its first run did not plan: %v", err)
	}
	if _, err := Stage(ctx, b, "", []string{"a"}, stage, StageOptions{Bucket: "bk"}); !errors.Is(err, ErrStageChanged) {
		t.Fatalf("another node list: %v", err)
	}
	if _, err := Stage(ctx, b, "", []string{".."}, t.TempDir(), StageOptions{Bucket: "bk"}); err == nil {
		t.Fatal("node .. accepted")
	}
}

// TestVerifyDeepIndexLag: a store uploaded with its indexes behind its
// data file (which a local daemon would heal at open, but a bucket never
// does) fails verify --deep, and recover rebuilds its indexes.
func TestVerifyDeepIndexLag(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.ChunkTargetSize = 4 << 10
	spans := workload.Spans(8, 300)
	db, err := storedir.Open(ctx, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Append(ctx, spans[:150]); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Keep the indexes as they are now, covering the first 150 spans.
	early := t.TempDir()
	for _, ix := range []string{"meta", "text"} {
		if err := os.CopyFS(filepath.Join(early, ix), os.DirFS(filepath.Join(storeDir(dir, 0), ix))); err != nil {
			t.Fatal(err)
		}
	}
	if db, err = storedir.Open(ctx, dir, o); err != nil {
		t.Fatal(err)
	}
	if err := db.Append(ctx, spans[150:]); err != nil {
		t.Fatal(err)
	}
	if err := db.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ix := range []string{"meta", "text"} {
		os.RemoveAll(filepath.Join(storeDir(dir, 0), ix))
		if err := os.Rename(filepath.Join(early, ix), filepath.Join(storeDir(dir, 0), ix)); err != nil {
			t.Fatal(err)
		}
	}
	b := objstoretest.New()
	uploadAll(t, b, "", "a", dir, 1)
	rep, err := Verify(ctx, b, "bk", "", VerifyOptions{Deep: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(problems(rep), "a/000000: uploaded with its indexes behind its data file") {
		t.Fatalf("index lag in a bucket: %s", problems(rep))
	}
	if _, err := Recover(ctx, b, "", discovery.StoreKey{Node: "a", ID: 0}, RecoverOptions{TempDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(ctx, b, "bk", "", VerifyOptions{Deep: true, TempDir: t.TempDir()}); err != nil || !rep.OK {
		t.Fatalf("after recover: %v %s", err, problems(rep))
	}
}

// TestRecoverTornTailServedRemotely: a store whose data file in the
// bucket lost its end (a torn last chunk) is recovered remotely: the tail
// is cut (and kept in traces.zts.broken), the trace filter and trace
// directory are rebuilt for the new data file, and a query-only DB
// serving the new generation reads every span outside the cut chunk by
// id, with no error.
func TestRecoverTornTailServedRemotely(t *testing.T) {
	ctx := context.Background()
	dataDir, spans := sealedStores(t, 9, 300, 300)
	b := objstoretest.New()
	m := uploadAll(t, b, "", "a", dataDir, 1)[0]
	for _, want := range []string{storedir.TraceFilterFile, storedir.TraceDirFile} {
		if _, ok := m.File(want); !ok {
			t.Fatalf("upload has no %s: %+v", want, m.Files)
		}
	}
	key := objstore.FileKey("", "a", 0, m.Generation, "traces.zts")
	whole := objectBytes(b, key)
	b.Set(key, whole[:len(whole)-40])
	k := discovery.StoreKey{Node: "a", ID: 0}
	rep, err := Recover(ctx, b, "", k, RecoverOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recovery == nil || rep.Recovery.BytesMovedAside == 0 {
		t.Fatalf("no tail cut: %+v", rep.Recovery)
	}
	nm, err := ReadManifest(ctx, b, "", k)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := nm.File("traces.zts.broken"); !ok {
		t.Fatalf("the cut bytes were not kept: %+v", nm.Files)
	}

	o := storedir.DefaultOptions()
	o.QueryOnly = true
	o.Remote = storedir.RemoteOptions{CacheMaxSize: 1 << 20}
	db, err := storedir.Open(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.ServeRemote(ctx, b, nm); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, sp := range spans {
		got, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID)
		if errors.Is(err, storedir.ErrNotFound) {
			continue // in the cut chunk
		}
		if err != nil {
			t.Fatalf("span %s/%s from the recovered remote store: %v", sp.TraceID, sp.SpanID, err)
		}
		w, g := *sp, *got
		w.Children, g.Children = nil, nil
		if d := trace.Diff(&w, &g); d != "" {
			t.Fatalf("span %s/%s differs: %s", sp.TraceID, sp.SpanID, d)
		}
		found++
	}
	if int64(found) != rep.Recovery.Spans || found < len(spans)-60 {
		t.Fatalf("%d spans readable remotely, recovery indexed %d of %d", found, rep.Recovery.Spans, len(spans))
	}
}

// FuzzParseStoreRef: NODE/STOREID parses to a node without "/" and an id
// that prints back as the same number, or is refused; never a panic.
func FuzzParseStoreRef(f *testing.F) {
	for _, s := range []string{"web-1/000003", "a/ff", "a/A0", "", "a", "/1", "a/", "a/b/c", "a/123456789", "a/ffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseStoreRef(s)
		if err != nil {
			return
		}
		node, id, _ := strings.Cut(s, "/")
		if k.Node != node || strings.Contains(k.Node, "/") {
			t.Fatalf("ParseStoreRef(%q) = node %q", s, k.Node)
		}
		if back, err := ParseStoreRef(k.String()); err != nil || back != k || !strings.EqualFold(strings.TrimLeft(id, "0"), strings.TrimLeft(k.String()[len(node)+1:], "0")) {
			t.Fatalf("ParseStoreRef(%q) = %v, which does not round-trip (%v)", s, k, err)
		}
	})
}

// objectBytes is the bucket's own copy of the object at key (nil when absent).
func objectBytes(b *objstoretest.Bucket, key string) []byte {
	data, _ := b.Data(key)
	return data
}
