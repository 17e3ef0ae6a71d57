package tiering

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/objstore"
)

// TestUploadThroughFaults: uploads through a proxy injecting 500s (before
// and after the request took effect), slow answers and connection resets,
// with local_max_stores dropping local copies and stores sealed meanwhile:
// every store ends up in the bucket exactly once with files matching, no
// garbage is left, and no local copy is dropped before its upload is
// verified against the real bucket.
func TestUploadThroughFaults(t *testing.T) {
	srv := s3test.Start(t)
	direct := srv.Bucket(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	proxy := s3test.NewFaultProxy(t, srv, seed)
	faulty, err := objstore.NewS3(context.Background(), proxy.Config(), append(srv.Options(), objstore.WithMaxAttempts(2), objstore.WithMaxBackoff(20*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, 6)
	var mu sync.Mutex
	var dropped []uint32
	var u *Uploader
	u = newUploader(t, db, faulty, func(o *Options) {
		o.Local = Limits{MaxStores: 3}
		o.DropLocal = func(id uint32, m *objstore.Manifest) error {
			// Verified means: the marker, and the real bucket holding that
			// manifest with every file intact.
			mk, err := u.Marker(id)
			if err != nil || mk.Generation != m.Generation {
				t.Errorf("store %d dropped without its marker: %v", id, err)
			}
			if err := checkDirect(direct, id, m.Generation); err != nil {
				t.Errorf("store %d dropped while the bucket does not hold its upload: %v", id, err)
			}
			mu.Lock()
			dropped = append(dropped, id)
			mu.Unlock()
			return db.DeleteSealed(id)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	// More stores are sealed while uploads run.
	for i := range 3 {
		writeStores(t, db, 1, uint64(100+i))
		u.Kick()
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if len(u.Pending()) == 0 && len(db.LocalStores()) <= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: pending %v, %d local stores", u.Pending(), len(db.LocalStores()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// One more pass without faults removes garbage an injected error may
	// have left behind a verified upload (its deletion failed).
	proxy.SetFaults(false)
	cancel()
	<-done
	if err := u.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := bucketState(t, direct, db.Dir())
	if len(got) != 9 {
		t.Fatalf("%d stores in the bucket, want 9", len(got))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dropped) != 9-2 {
		t.Fatalf("dropped %d local copies, want 7 (3 local stores left with the open one)", len(dropped))
	}
	t.Logf("injected: %d 500s, %d 500s after the request, %d slow, %d resets; %d upload failures retried",
		proxy.Failed.Load(), proxy.FailedAfter.Load(), proxy.Slow.Load(), proxy.Resets.Load(), int(counter(u.m.failures)))
	if proxy.Failed.Load()+proxy.FailedAfter.Load()+proxy.Resets.Load() == 0 {
		t.Fatal("no fault was injected")
	}
}

// checkDirect reads store id's manifest from the real bucket and checks
// that it names generation gen and that every file is there with its
// size and SHA-256 (read back).
func checkDirect(b objstore.Bucket, id uint32, gen string) error {
	ctx := context.Background()
	key := objstore.ManifestKey("pfx", "n1", id)
	m, err := (&Uploader{opt: Options{Bucket: b}}).readManifest(ctx, key)
	if err != nil {
		return err
	}
	if m.Generation != gen {
		return fmt.Errorf("%s names generation %s, not %s", key, m.Generation, gen)
	}
	for _, f := range m.Files {
		rc, _, err := b.Get(ctx, objstore.FileKey("pfx", "n1", id, gen, f.Path))
		if err != nil {
			return err
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil || n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
			return fmt.Errorf("%s: %d bytes (%v), sha256 mismatch or short", f.Path, n, err)
		}
	}
	return nil
}
