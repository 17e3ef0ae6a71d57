package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/objstore/objstoretest"
)

// fakeTarget records what discovery told it.
type fakeTarget struct {
	mu      sync.Mutex
	serving map[StoreKey]string // generation
	calls   []string
	fail    map[StoreKey]bool
}

func newFakeTarget() *fakeTarget {
	return &fakeTarget{serving: map[StoreKey]string{}, fail: map[StoreKey]bool{}}
}

func (t *fakeTarget) ServeRemote(_ context.Context, _ objstore.Bucket, m *objstore.Manifest) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := StoreKey{m.Node, m.Store}
	t.calls = append(t.calls, "serve "+k.String()+" "+m.Generation)
	if t.fail[k] {
		return fmt.Errorf("injected failure serving %s", k)
	}
	t.serving[k] = m.Generation
	return nil
}

func (t *fakeTarget) DropRemote(node string, id uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := StoreKey{node, id}
	t.calls = append(t.calls, "drop "+k.String())
	delete(t.serving, k)
	return nil
}

func (t *fakeTarget) takeCalls() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls
	t.calls = nil
	return c
}

func manifestBytes(t *testing.T, node string, id uint32, gen string) []byte {
	t.Helper()
	m := objstore.Manifest{Version: objstore.ManifestVersion, Node: node, Store: id, Generation: gen,
		Uploaded: time.Unix(1764100000, 0).UTC(), Spans: 10, Chunks: 1,
		Files: []objstore.ManifestFile{{Path: "traces.zts", Size: 3, SHA256: strings.Repeat("ab", 32)}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func putStore(t *testing.T, b *objstoretest.Bucket, prefix, node string, id uint32, gen string) {
	b.Set(objstore.FileKey(prefix, node, id, gen, "traces.zts"), []byte("abc"))
	b.Set(objstore.ManifestKey(prefix, node, id), manifestBytes(t, node, id, gen))
}

func TestParseManifestKey(t *testing.T) {
	for _, c := range []struct {
		prefix, key string
		want        StoreKey
		ok          bool
	}{
		{"", "a/000001/manifest.json", StoreKey{"a", 1}, true},
		{"fleet/ztsd", "fleet/ztsd/web-1/00ff0a/manifest.json", StoreKey{"web-1", 0xff0a}, true},
		{"fleet/ztsd/", "fleet/ztsd/web-1/00ff0a/manifest.json", StoreKey{"web-1", 0xff0a}, true},
		{"fleet", "other/a/000001/manifest.json", StoreKey{}, false},
		{"", "a/000001/g1/manifest.json", StoreKey{}, false}, // a file of a generation named so
		{"", "a/00001/manifest.json", StoreKey{}, false},
		{"", "a/00000G/manifest.json", StoreKey{}, false},
		{"", "a/00000A/manifest.json", StoreKey{}, false},
		{"", "/000001/manifest.json", StoreKey{}, false},
		{"", "a/000001/manifest.jsonx", StoreKey{}, false},
	} {
		got, ok := ParseManifestKey(c.prefix, c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseManifestKey(%q, %q) = %v %v, want %v %v", c.prefix, c.key, got, ok, c.want, c.ok)
		}
	}
}

// TestScanFollowsTheBucket: new stores are served, a newer generation
// replaces the old one (never both), a vanished manifest drops the store,
// objects without a manifest are never served, a manifest that does not
// parse or names another store is ignored while the old generation stays.
func TestScanFollowsTheBucket(t *testing.T) {
	ctx := context.Background()
	b := objstoretest.New()
	const prefix = "fleet"
	putStore(t, b, prefix, "a", 1, "g1")
	putStore(t, b, prefix, "a", 2, "g1")
	putStore(t, b, prefix, "b", 1, "g1")
	b.Set(objstore.FileKey(prefix, "b", 2, "g1", "traces.zts"), []byte("upload in progress, no manifest"))
	b.Set("elsewhere/x/000001/manifest.json", manifestBytes(t, "x", 1, "g1"))
	tgt := newFakeTarget()
	d := New(tgt, Options{Bucket: b, Prefix: prefix})

	ch, err := d.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tgt.takeCalls()); got != "[serve a/000001 g1 serve a/000002 g1 serve b/000001 g1]" {
		t.Fatalf("first scan: %s", got)
	}
	if ch.Manifests != 3 || len(ch.Added) != 3 || d.Served() != 3 {
		t.Fatalf("first scan: %+v, served %d", ch, d.Served())
	}

	// Nothing changed: nothing is read or served again.
	if _, err := d.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if c := tgt.takeCalls(); len(c) != 0 {
		t.Fatalf("unchanged bucket: %v", c)
	}

	// A repaired store re-uploaded as g2; a store removed; b/000002 done.
	putStore(t, b, prefix, "a", 2, "g2")
	b.Delete(ctx, objstore.ManifestKey(prefix, "a", 1))
	b.Set(objstore.ManifestKey(prefix, "b", 2), manifestBytes(t, "b", 2, "g1"))
	ch, err = d.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tgt.takeCalls()); got != "[serve a/000002 g2 serve b/000002 g1 drop a/000001]" {
		t.Fatalf("second scan: %s", got)
	}
	if fmt.Sprint(ch.Added, ch.Replaced, ch.Dropped) != "[b/000002] [a/000002] [a/000001]" {
		t.Fatalf("second scan: %+v", ch)
	}
	if fmt.Sprint(tgt.serving) != "map[a/000002:g2 b/000001:g1 b/000002:g1]" {
		t.Fatalf("serving %v", tgt.serving)
	}

	// A damaged manifest, and one naming another store: ignored (logged
	// once), the generation served before stays.
	b.Set(objstore.ManifestKey(prefix, "a", 2), []byte(`{"version":1,"node":"a"`))
	b.Set(objstore.ManifestKey(prefix, "b", 7), manifestBytes(t, "b", 8, "g1"))
	for i := 0; i < 2; i++ {
		ch, err = d.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c := tgt.takeCalls(); len(c) != 0 || ch.Failed != 2 {
			t.Fatalf("bad manifests, scan %d: calls %v, %+v", i, c, ch)
		}
	}
	if tgt.serving[StoreKey{"a", 2}] != "g2" || d.Served() != 3 {
		t.Fatalf("a bad manifest changed what is served: %v", tgt.serving)
	}

	// A failed listing drops nothing.
	b.SetListErr(fmt.Errorf("injected: 503 Slow Down"))
	if _, err := d.Scan(ctx); err == nil || len(tgt.takeCalls()) != 0 {
		t.Fatalf("failed listing: err %v", err)
	}
	b.SetListErr(nil)
}

// TestScanRetriesFailedServe: a store the target could not serve is asked
// for again at the next scan.
func TestScanRetriesFailedServe(t *testing.T) {
	ctx := context.Background()
	b := objstoretest.New()
	putStore(t, b, "", "a", 1, "g1")
	tgt := newFakeTarget()
	tgt.fail[StoreKey{"a", 1}] = true
	d := New(tgt, Options{Bucket: b})
	ch, err := d.Scan(ctx)
	if err == nil || ch.Failed != 1 || d.Served() != 0 {
		t.Fatalf("failing target: %+v, %v", ch, err)
	}
	tgt.fail[StoreKey{"a", 1}] = false
	if ch, err := d.Scan(ctx); err != nil || len(ch.Added) != 1 || d.Served() != 1 {
		t.Fatalf("retry: %+v, %v", ch, err)
	}
}

// TestScanOneNodeSkipsLocal: an ingesting daemon lists its own node and
// serves only the uploaded stores it no longer holds locally; when a
// local copy is removed, the next scan serves the store.
func TestScanOneNodeSkipsLocal(t *testing.T) {
	ctx := context.Background()
	b := objstoretest.New()
	for id := uint32(0); id < 4; id++ {
		putStore(t, b, "p", "a", id, "g1")
	}
	putStore(t, b, "p", "ab", 9, "g1") // another node whose name extends a's
	putStore(t, b, "p", "b", 0, "g1")
	local := map[uint32]bool{2: true, 3: true}
	var mu sync.Mutex
	tgt := newFakeTarget()
	d := New(tgt, Options{Bucket: b, Prefix: "p", Node: "a", Skip: func(k StoreKey) bool {
		mu.Lock()
		defer mu.Unlock()
		return local[k.ID]
	}})
	if _, err := d.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tgt.takeCalls()); got != "[serve a/000000 g1 serve a/000001 g1]" {
		t.Fatalf("own node: %s", got)
	}
	mu.Lock()
	delete(local, 2)
	mu.Unlock()
	if _, err := d.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tgt.takeCalls()); got != "[serve a/000002 g1]" {
		t.Fatalf("after the local copy of 2 went: %s", got)
	}
}

// TestRunScansEveryInterval: Run picks up a store uploaded after it
// started, within an interval.
func TestRunScansEveryInterval(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := objstoretest.New()
	tgt := newFakeTarget()
	d := New(tgt, Options{Bucket: b, Interval: 20 * time.Millisecond})
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	putStore(t, b, "", "n", 5, "g1")
	deadline := time.Now().Add(10 * time.Second)
	for d.Served() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not serve a store uploaded after it started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

// FuzzParseManifestKey: any key either parses to a store whose manifest
// key is the input again, or is refused; never a panic.
func FuzzParseManifestKey(f *testing.F) {
	for _, k := range []string{"a/000001/manifest.json", "p/q/web-1/00ff0a/manifest.json", "a/000001/g/manifest.json",
		"/000001/manifest.json", "a/0000001/manifest.json", "", "manifest.json", "a//000001/manifest.json"} {
		f.Add("p/q", k)
		f.Add("", k)
	}
	f.Fuzz(func(t *testing.T, prefix, key string) {
		k, ok := ParseManifestKey(prefix, key)
		if !ok {
			return
		}
		if strings.Contains(k.Node, "/") || k.Node == "" {
			t.Fatalf("ParseManifestKey(%q, %q) = node %q", prefix, key, k.Node)
		}
		p := strings.TrimSuffix(prefix, "/")
		if got := objstore.ManifestKey(p, k.Node, k.ID); got != key && !strings.HasPrefix(prefix, "/") && !strings.Contains(prefix, "//") {
			t.Fatalf("ParseManifestKey(%q, %q) = %v, whose key is %q", prefix, key, k, got)
		}
	})
}
