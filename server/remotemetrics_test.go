package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// mapBucket is a minimal in-memory objstore.Bucket.
type mapBucket struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (b *mapBucket) Put(_ context.Context, key string, body io.ReadSeeker, _ int64, _ []byte) error {
	d, err := io.ReadAll(body)
	b.mu.Lock()
	b.objs[key] = d
	b.mu.Unlock()
	return err
}

func (b *mapBucket) obj(key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.objs[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	return d, nil
}

func (b *mapBucket) Get(_ context.Context, key string) (io.ReadCloser, objstore.Object, error) {
	d, err := b.obj(key)
	return io.NopCloser(bytes.NewReader(d)), objstore.Object{Key: key, Size: int64(len(d))}, err
}

func (b *mapBucket) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	d, err := b.obj(key)
	if err != nil {
		return nil, err
	}
	if off+n > int64(len(d)) {
		return nil, fmt.Errorf("%s: range past the end", key)
	}
	return d[off : off+n], nil
}

func (b *mapBucket) Head(_ context.Context, key string) (objstore.Object, error) {
	d, err := b.obj(key)
	return objstore.Object{Key: key, Size: int64(len(d))}, err
}

func (b *mapBucket) List(context.Context, string, func(objstore.Object) error) error { return nil }
func (b *mapBucket) Delete(context.Context, string) error                            { return nil }

// TestRemoteMetrics: a DB serving two nodes' stores with the same id
// exposes the ztsd_remote_* metrics and per-store metrics labelled
// node/id (no collision).
func TestRemoteMetrics(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(ctx, src, o)
	if err != nil {
		t.Fatal(err)
	}
	sp := &trace.Span{TraceID: trace.TraceID{9, 1}, SpanID: 7, Type: "http", StartNS: 1764000000000000000, DurationNS: 5}
	if err := db.Append(ctx, []*trace.Span{sp}); err != nil {
		t.Fatal(err)
	}
	if err := db.Rotate(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	store := filepath.Join(src, storedir.StoreName(0))
	tf, td, err := storedir.BuildTraceFilter(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	b := &mapBucket{objs: map[string][]byte{}}
	var ms []*objstore.Manifest
	for _, node := range []string{"a", "b"} {
		m := &objstore.Manifest{Version: objstore.ManifestVersion, Node: node, Generation: "g1", FirstNS: sp.StartNS, LastNS: sp.StartNS}
		put := func(rel string, data []byte) {
			sum := sha256.Sum256(data)
			b.Put(ctx, objstore.FileKey("p", node, 0, "g1", rel), bytes.NewReader(data), int64(len(data)), nil)
			m.Files = append(m.Files, objstore.ManifestFile{Path: rel, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
		}
		filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(store, p)
			data, err := os.ReadFile(p)
			put(filepath.ToSlash(rel), data)
			return err
		})
		put(storedir.TraceFilterFile, tf)
		put(storedir.TraceDirFile, td)
		ms = append(ms, m)
	}
	q := storedir.DefaultOptions()
	q.QueryOnly = true
	q.Remote = storedir.RemoteOptions{Prefix: "p"}
	qdb, err := storedir.Open(ctx, t.TempDir(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer qdb.Close()
	for _, m := range ms {
		if err := qdb.ServeRemote(ctx, b, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := qdb.GetTrace(ctx, sp.TraceID); err != nil {
		t.Fatal(err)
	}
	if _, err := qdb.Search(ctx, storedir.Query{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	NewMetrics(qdb).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("metrics: %d %s", rec.Code, rec.Body.String())
	}
	got := map[string]float64{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q", line)
		}
		got[line[:i]] = v
	}
	for _, want := range []string{"ztsd_remote_gets_total", `ztsd_remote_downloaded_bytes_total{kind="index"}`,
		`ztsd_remote_downloaded_bytes_total{kind="chunk"}`, `ztsd_remote_cache_requests_total{result="miss"}`, "ztsd_remote_cache_bytes",
		`ztsd_store_bytes{store="a/000000"}`, `ztsd_store_bytes{store="b/000000"}`} {
		if got[want] <= 0 {
			t.Errorf("%s = %v, want > 0", want, got[want])
		}
	}
	if got[`ztsd_remote_stores{state="served"}`] != 2 || got[`ztsd_remote_stores{state="cached"}`] != 2 {
		t.Errorf("remote stores: %v %v, want 2 and 2", got[`ztsd_remote_stores{state="served"}`], got[`ztsd_remote_stores{state="cached"}`])
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", rec.Body.String())
	}
}
