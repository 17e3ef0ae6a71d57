package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/bucketadmin"
	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// sealedDataDir writes spans into a fresh data directory, sealing a store
// every perStore spans.
func sealedDataDir(t *testing.T, spans []*trace.Span, perStore int) string {
	t.Helper()
	dir := t.TempDir()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.ChunkTargetSize = 4 << 10
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
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
	return dir
}

// remoteFixture: a versitygw with node a's 3 stores and node b's 1 under
// prefix "fleet", and a ztsd.toml naming the bucket; the credentials are
// in the environment, as for an operator.
func remoteFixture(t *testing.T) (srv *s3test.Server, b objstore.Bucket, cfgPath string, spans []*trace.Span) {
	srv = s3test.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b = srv.Bucket(t)
	spansA, spansB := workload.Spans(21, 600), workload.Spans(22, 200)
	for node, set := range map[string]struct {
		spans  []*trace.Span
		stores int
	}{"a": {spansA, 3}, "b": {spansB, 1}} {
		dir := sealedDataDir(t, set.spans, 200)
		for id := 0; id < set.stores; id++ {
			if _, err := bucketadmin.Upload(context.Background(), b, "fleet", node, uint32(id), filepath.Join(dir, storedir.StoreName(uint32(id))),
				bucketadmin.UploadOptions{Spans: 200}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfgPath = filepath.Join(t.TempDir(), "ztsd.toml")
	cfg := "[object_store]\nendpoint = \"" + srv.Endpoint + "\"\nbucket = \"" + srv.BucketName + "\"\nprefix = \"fleet\"\npath_style = true\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, b, cfgPath, append(spansA, spansB...)
}

// TestRemoteVerifyRecoverMigrate runs ztsctl verify --remote, recover
// --remote and migrate --from-bucket against a real S3 server.
func TestRemoteVerifyRecoverMigrate(t *testing.T) {
	srv, b, cfg, spans := remoteFixture(t)
	ctx := context.Background()
	tmp := t.TempDir()

	out, errOut, code := ctl(t, "verify", "--remote", "--config", cfg)
	if code != 0 || !strings.Contains(out, "verify --remote: OK: 4 stores") {
		t.Fatalf("verify --remote: exit %d\n%s%s", code, out, errOut)
	}
	// The same with flags only.
	out, errOut, code = ctl(t, "verify", "--remote", "--endpoint", srv.Endpoint, "--bucket", srv.BucketName, "--prefix", "fleet", "--path-style",
		"--deep", "--node", "a", "--temp-dir", tmp)
	if code != 0 || !strings.Contains(out, "verify --remote: OK: 3 stores") || !strings.Contains(out, "downloaded and verified") {
		t.Fatalf("verify --remote --deep --node a: exit %d\n%s%s", code, out, errOut)
	}

	// Damage a/000001's indexes in the bucket: the text index's objects
	// go, one meta/ object gets other bytes of the same size.
	m, err := bucketadmin.ReadManifest(ctx, b, "fleet", mustRef(t, "a/000001"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		key := objstore.FileKey("fleet", "a", 1, m.Generation, f.Path)
		if strings.HasPrefix(f.Path, "text/") {
			if err := b.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, _, code = ctl(t, "verify", "--remote", "--config", cfg, "--store", "a/000001")
	if code != exitFailure || !strings.Contains(out, "PROBLEM text/") {
		t.Fatalf("verify --remote of a damaged store: exit %d\n%s", code, out)
	}
	out, errOut, code = ctl(t, "recover", "--remote", "a/000001", "--config", cfg, "--temp-dir", tmp)
	if code != 0 || !strings.Contains(out, "uploaded as generation") {
		t.Fatalf("recover --remote: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = ctl(t, "verify", "--remote", "--config", cfg, "--deep", "--temp-dir", tmp)
	if code != 0 || !strings.Contains(out, "verify --remote: OK: 4 stores") || strings.Contains(out, "note:") {
		t.Fatalf("verify --remote --deep after recover: exit %d\n%s%s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("downloads left in --temp-dir: %v", entries)
	}

	// Back into a local directory: every span of both nodes.
	to := filepath.Join(t.TempDir(), "restored")
	out, errOut, code = ctl(t, "migrate", "--from-bucket", "a", "--from-bucket", "b", "--config", cfg, "--to", to)
	if code != 0 {
		t.Fatalf("migrate --from-bucket: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(to + ".bucket-download"); !os.IsNotExist(err) {
		t.Fatalf("the download directory was not removed: %v", err)
	}
	o := storedir.DefaultOptions()
	db, err := storedir.Open(ctx, to, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, sp := range spans {
		got, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID)
		if err != nil {
			t.Fatalf("span %s/%s not migrated: %v", sp.TraceID, sp.SpanID, err)
		}
		w, g := *sp, *got
		w.Children, g.Children = nil, nil
		if !g.Equal(&w) {
			t.Fatalf("span %s/%s differs: %s", sp.TraceID, sp.SpanID, trace.Diff(&w, &g))
		}
	}
}

// TestRemoteCLIUsage: bad combinations are usage errors (exit 2), before
// any bucket is contacted; a store that is not there is exit 1.
func TestRemoteCLIUsage(t *testing.T) {
	for _, args := range [][]string{
		{"verify", "--deep"},
		{"verify", "--remote"}, // no bucket
		{"verify", "--remote", "--bucket", "x", "--data-dir", "/tmp"},
		{"verify", "--remote", "--bucket", "x", "--store", "000001"}, // no node
		{"verify", "--remote", "--bucket", "x", "--node", "a", "--store", "b/000001"},
		{"verify", "--remote", "--bucket", "x", "--endpoint", "ftp://h"},
		{"recover", "--remote", "000001", "--bucket", "x"},
		{"recover", "--bucket", "x"},
		{"recover", "--remote", "a/1", "--bucket", "x", "--store", "/tmp"},
		{"migrate", "--from-bucket", "a", "--in-place", "--bucket", "x"},
		{"migrate", "--from", "/tmp", "--to", "/tmp/x", "--bucket", "x"},
		{"migrate", "--from-bucket", "a", "--to", "/tmp/x"}, // no bucket
	} {
		if _, errOut, code := ctl(t, args...); code != exitUsage {
			t.Errorf("ztsctl %s: exit %d, want 2 (%s)", strings.Join(args, " "), code, errOut)
		}
	}
	_, _, cfg, _ := remoteFixture(t)
	if _, errOut, code := ctl(t, "verify", "--remote", "--config", cfg, "--store", "a/000009"); code != exitNotFound {
		t.Errorf("verify --remote of a missing store: exit %d (%s)", code, errOut)
	}
	if _, errOut, code := ctl(t, "recover", "--remote", "c/000000", "--config", cfg); code != exitNotFound {
		t.Errorf("recover --remote of a missing store: exit %d (%s)", code, errOut)
	}
	if _, errOut, code := ctl(t, "migrate", "--from-bucket", "c", "--config", cfg, "--to", filepath.Join(t.TempDir(), "x")); code != exitNotFound {
		t.Errorf("migrate --from-bucket of a node with no stores: exit %d (%s)", code, errOut)
	}
}

func mustRef(t *testing.T, s string) discovery.StoreKey {
	t.Helper()
	k, err := bucketadmin.ParseStoreRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
