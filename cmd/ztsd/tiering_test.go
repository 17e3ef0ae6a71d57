package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/tiering"
	"github.com/ztsd/ztsd/trace"
)

// tieringConfig is a daemon config with small stores (many seal quickly)
// uploading to srv's bucket as node.
func tieringConfig(srv *s3test.Server, node, extra string) string {
	return fmt.Sprintf(`sync = "batch"
[store]
max_store_size = "32KiB"
chunk_target_size = "16KiB"
[object_store]
endpoint = %q
bucket = %q
prefix = "pfx"
path_style = true
node = %q
%s
`, srv.Endpoint, srv.BucketName, node, extra)
}

// startWithBucket starts d with the bucket's credentials in its
// environment (the SDK's standard chain), as systemd's EnvironmentFile=
// would.
func startWithBucket(t *testing.T, d *daemontest.Daemon, srv *s3test.Server) {
	cmd := exec.Command(filepath.Join(daemontest.Binaries(t), "ztsd"), "--config", d.Config)
	cmd.Env = append(os.Environ(), srv.Env()...)
	d.StartCmd(cmd)
}

// sealedIDs lists the sealed stores the daemon serves from its data
// directory.
func sealedIDs(t *testing.T, d *daemontest.Daemon) []uint32 {
	c := d.Client
	t.Helper()
	infos, err := c.Stores(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for _, in := range infos {
		if in.State != "sealed" || in.Reason != "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d.DataDir, in.ID, storedir.DataFile)); err == nil {
			id, _ := storedir.ParseStoreName(in.ID)
			ids = append(ids, id)
		}
	}
	return ids
}

// waitUploaded waits until every sealed local store of the daemon has its
// upload marker, and returns the bucket's audited manifests.
func waitUploaded(t *testing.T, d *daemontest.Daemon, b objstore.Bucket, node string) map[uint32]*objstore.Manifest {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		missing := 0
		for _, id := range sealedIDs(t, d) {
			if _, err := os.Stat(filepath.Join(d.DataDir, storedir.StoreName(id), tiering.MarkerFile)); err != nil {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sealed stores not uploaded after 60s:\n%s", missing, d.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s3test.Audit(t, b, "pfx", node)
}

// TestDaemonUploadsSealedStores: a daemon with [object_store] uploads
// every store it seals, with manifests matching the local stores; its
// metrics count them; SIGTERM stops it cleanly; the credentials it got
// from its environment appear nowhere in its log.
func TestDaemonUploadsSealedStores(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	d := daemontest.New(t, tieringConfig(srv, "n1", "local_max_stores = 3"))
	startWithBucket(t, d, srv)
	var sent []*trace.Span
	for i := range 30 {
		spans := workload.Spans(uint64(i)+1, 200)
		sent = append(sent, spans...)
		if err := d.Client.Put(context.Background(), spans...); err != nil {
			t.Fatal(err)
		}
	}
	got := waitUploaded(t, d, b, "n1")
	// local_max_stores = 3: the daemon serves the oldest from the bucket.
	deadline := time.Now().Add(30 * time.Second)
	for localStoreCount(t, d.DataDir) > 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d local stores after 30s, local_max_stores is 3\n%s", localStoreCount(t, d.DataDir), d.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	infos, err := d.Client.Stores(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sealed := 0
	for _, in := range infos {
		id, _ := storedir.ParseStoreName(in.ID)
		m := got[id]
		if in.State != "sealed" {
			if m != nil {
				t.Fatalf("open store %s is in the bucket", in.ID)
			}
			continue
		}
		sealed++
		if m == nil || m.Spans != in.Spans || m.FirstNS != in.FirstNS || m.LastNS != in.LastNS || m.Chunks != in.Chunks {
			t.Fatalf("store %s: manifest %+v, daemon says %+v", in.ID, m, in)
		}
	}
	if sealed < 5 || len(got) != sealed {
		t.Fatalf("%d sealed stores, %d in the bucket", sealed, len(got))
	}
	// Every span is still read by id, local or remote.
	for i := 0; i < len(sent); i += 97 {
		sp, err := d.Client.GetSpan(context.Background(), sent[i].TraceID, sent[i].SpanID)
		if err != nil || sp.StartNS != sent[i].StartNS {
			t.Fatalf("span %d (%s/%s) after its local copy went: %v", i, sent[i].TraceID, sent[i].SpanID, err)
		}
	}
	// local_max_stores changes on SIGHUP: 1 leaves only the open store.
	d.WriteConfig(tieringConfig(srv, "n1", "local_max_stores = 1"))
	d.Signal(syscall.SIGHUP)
	deadline = time.Now().Add(30 * time.Second)
	for localStoreCount(t, d.DataDir) > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d local stores 30s after SIGHUP set local_max_stores = 1\n%s", localStoreCount(t, d.DataDir), d.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < len(sent); i += 131 {
		if _, err := d.Client.GetSpan(context.Background(), sent[i].TraceID, sent[i].SpanID); err != nil {
			t.Fatalf("span %d after SIGHUP: %v", i, err)
		}
	}
	metrics, err := d.Client.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v := metricValue(metrics, "ztsd_tiering_uploaded_stores_total"); v != float64(len(got)) {
		t.Fatalf("ztsd_tiering_uploaded_stores_total %v, want %d", v, len(got))
	}
	// [retention] with a bucket counts local and uploaded stores together:
	// max_stores = 3 keeps the open store and the two newest uploads.
	d.WriteConfig(tieringConfig(srv, "n1", "local_max_stores = 1") + "[retention]\nmax_stores = 3\n")
	d.Signal(syscall.SIGHUP)
	deadline = time.Now().Add(30 * time.Second)
	for {
		manifests := 0
		prefixes := map[string]bool{} // stores with any object left
		b.List(context.Background(), "pfx/n1/", func(o objstore.Object) error {
			if strings.HasSuffix(o.Key, "/manifest.json") {
				manifests++
			}
			prefixes[strings.Split(o.Key, "/")[2]] = true
			return nil
		})
		infos, err := d.Client.Stores(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if manifests == 2 && len(prefixes) == 2 && len(infos) == 3 {
			left := s3test.Audit(t, b, "pfx", "n1")
			newest := uint32(0)
			for id := range got {
				newest = max(newest, id)
			}
			if left[newest] == nil || left[newest-1] == nil {
				t.Fatalf("retention kept %v, not the two newest uploads", left)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("[retention] max_stores = 3: %d uploads and %d stores served after 30s\n%s", manifests, len(infos), d.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
	}
	log := d.Stderr()
	if strings.Contains(log, srv.SecretKey) || strings.Contains(log, srv.AccessKey) {
		t.Fatal("the daemon logged the bucket's credentials")
	}
	if !strings.Contains(log, "uploading sealed stores") || !strings.Contains(log, "store uploaded") {
		t.Fatalf("no upload in the log:\n%s", log)
	}
}

// localStoreCount counts the store directories in a data directory.
func localStoreCount(t *testing.T, dataDir string) int {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, ok := storedir.ParseStoreName(e.Name()); ok && e.IsDir() {
			n++
		}
	}
	return n
}

func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return -1
}

// checkNoStoreLost records the daemon's sealed stores in seen and checks
// that every store ever seen is still in the data directory or has its
// manifest in the bucket.
func checkNoStoreLost(t *testing.T, d *daemontest.Daemon, b objstore.Bucket, seen map[uint32]bool) {
	t.Helper()
	for _, id := range sealedIDs(t, d) {
		seen[id] = true
	}
	for id := range seen {
		if _, err := os.Stat(filepath.Join(d.DataDir, storedir.StoreName(id), storedir.DataFile)); err == nil {
			continue
		}
		if _, err := b.Head(context.Background(), objstore.ManifestKey("pfx", "n1", id)); err != nil {
			t.Fatalf("store %s is neither local nor in the bucket: %v", storedir.StoreName(id), err)
		}
	}
}

// tieringCrashPoints is how many kill -9 cycles TestTieringCrashLoop runs:
// 5 in make test, ZTSD_TIERING_CRASHES when set (make soak: 30).
func tieringCrashPoints(t *testing.T) int {
	if s := os.Getenv("ZTSD_TIERING_CRASHES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("ZTSD_TIERING_CRASHES=%q: want a positive integer", s)
		}
		return n
	}
	return 5
}

// TestTieringCrashLoop kills a real daemon with SIGKILL at random moments
// while it writes, seals and uploads stores, and restarts it: at the end
// every sealed store is in the bucket exactly once (one manifest, its
// files matching, no garbage generations left), each upload matches the
// local data file, and every acknowledged span is readable.
func TestTieringCrashLoop(t *testing.T) {
	iters := tieringCrashPoints(t)
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	d := daemontest.New(t, tieringConfig(srv, "n1", "local_max_stores = 2"))
	l := newSpanLedger()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 17))
	t.Logf("seed %d", seed)
	// Every store seen sealed is, at every restart, in the data directory
	// or verified in the bucket: no local copy went before its upload.
	seen := map[uint32]bool{}
	// Uploads a restart found interrupted: adopted (the manifest was
	// written, the marker not) or restarted (garbage deleted).
	adopted, restarted := 0, 0
	count := func() {
		log := d.Stderr()
		adopted += strings.Count(log, "store found uploaded by an earlier run")
		restarted += strings.Count(log, "deleted objects of earlier upload attempts")
	}
	for it := range iters {
		if it > 0 {
			count()
		}
		startWithBucket(t, d, srv)
		if it > 0 {
			l.check(t, d, 20, true)
			checkNoStoreLost(t, d, b, seen)
		}
		// Seal a few stores first, so that uploads run when the kill
		// comes (during the writes that follow, at a random moment).
		spans := workload.Spans(seed+uint64(it), 600)
		for i := 0; i < len(spans); i += 60 {
			if err := l.put(d.Client, spans[i:i+60]); err != nil {
				t.Fatal(err)
			}
		}
		writeUntilKilled(t, d, l, rng, it, 3)
	}
	count()
	startWithBucket(t, d, srv)
	got := waitUploaded(t, d, b, "n1")
	count()
	checkNoStoreLost(t, d, b, seen)
	sealed := sealedIDs(t, d)
	if len(got) < len(sealed) || len(got) < 2 {
		infos, _ := d.Client.Stores(context.Background())
		t.Fatalf("%d local sealed stores, %d uploaded; %d acknowledged; stores %+v", len(sealed), len(got), len(l.acked), infos)
	}
	for _, id := range sealed {
		m := got[id]
		if m == nil {
			t.Fatalf("store %d not uploaded", id)
		}
		data, _ := m.File(storedir.DataFile)
		fi, err := os.Stat(filepath.Join(d.DataDir, storedir.StoreName(id), storedir.DataFile))
		if err != nil || fi.Size() != data.Size {
			t.Fatalf("store %d: local data file %v (%v), uploaded %d bytes", id, fi, err, data.Size)
		}
	}
	stored := l.check(t, d, 200, true)
	t.Logf("%d kill -9 points: %d stores uploaded, %d spans acknowledged, %d stored; after restarts %d interrupted uploads adopted, %d redone",
		iters, len(got), len(l.acked), stored, adopted, restarted)
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
	}
}

// TestDaemonUploadsThroughFaults: a daemon whose bucket endpoint is a
// proxy injecting 500s, slow answers and connection resets, with
// local_max_stores = 2: every sealed store ends up in the bucket exactly
// once with its files intact, no store is ever neither local nor uploaded,
// and every acknowledged span is read back (local or remote).
func TestDaemonUploadsThroughFaults(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	proxy := s3test.NewFaultProxy(t, srv, seed)
	cfg := tieringConfig(srv, "n1", "local_max_stores = 2\ndiscover_interval = \"1s\"")
	cfg = strings.Replace(cfg, fmt.Sprintf("endpoint = %q", srv.Endpoint), fmt.Sprintf("endpoint = %q", proxy.URL), 1)
	d := daemontest.New(t, cfg)
	startWithBucket(t, d, srv)
	l := newSpanLedger()
	seen := map[uint32]bool{}
	for i := range 20 {
		spans := workload.Spans(seed+uint64(i), 150)
		if err := l.put(d.Client, spans); err != nil {
			t.Fatal(err)
		}
		checkNoStoreLost(t, d, b, seen)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pending := 0
		for _, id := range sealedIDs(t, d) {
			if _, err := os.Stat(filepath.Join(d.DataDir, storedir.StoreName(id), tiering.MarkerFile)); err != nil {
				pending++
			}
		}
		if pending == 0 && localStoreCount(t, d.DataDir) <= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %d stores not uploaded, %d local\n%s", pending, localStoreCount(t, d.DataDir), d.Stderr())
		}
		checkNoStoreLost(t, d, b, seen)
		time.Sleep(50 * time.Millisecond)
	}
	checkNoStoreLost(t, d, b, seen)
	// A restart without faults sweeps what a failed delete left. (Reads
	// of remote stores go through the proxy too, and may fail while it
	// injects faults: spans are checked after.)
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
	}
	proxy.SetFaults(false)
	startWithBucket(t, d, srv)
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(d.Stderr(), "uploading sealed stores") || metricValue(mustMetrics(t, d), "ztsd_tiering_pending_stores") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no pass after restart:\n%s", d.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the sweep follows the first pass
	got := s3test.Audit(t, b, "pfx", "n1")
	if len(got) < len(seen) {
		t.Fatalf("%d stores in the bucket, %d seen sealed", len(got), len(seen))
	}
	l.check(t, d, 100, true)
	t.Logf("%d stores uploaded through %d 500s, %d 500s after the request, %d slow answers, %d resets",
		len(got), proxy.Failed.Load(), proxy.FailedAfter.Load(), proxy.Slow.Load(), proxy.Resets.Load())
}

func mustMetrics(t *testing.T, d *daemontest.Daemon) string {
	m, err := d.Client.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTieringKillAtUploadSteps kills a real daemon (SIGKILL) at chosen
// steps of an upload, seen from a proxy in front of the S3 server: during
// the PUT of a data file (its generation is garbage), and right after the
// manifest was stored but before the daemon heard back (no marker). After
// each restart the store is in the bucket exactly once: re-uploaded under
// a new generation with the garbage deleted, or its manifest adopted.
func TestTieringKillAtUploadSteps(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	proxy := s3test.NewFaultProxy(t, srv, 1)
	proxy.SetFaults(false)
	cfg := tieringConfig(srv, "n1", "")
	cfg = strings.Replace(cfg, fmt.Sprintf("endpoint = %q", srv.Endpoint), fmt.Sprintf("endpoint = %q", proxy.URL), 1)
	d := daemontest.New(t, cfg)
	l := newSpanLedger()
	var step atomic.Value
	step.Store("")
	killed := make(chan struct{}, 1)
	kill := func(want, method, path string) {
		if method == "PUT" && step.Load() == want && strings.HasSuffix(path, map[string]string{"data": "/traces.zts", "manifest": "/manifest.json"}[want]) {
			step.Store("")
			d.Cmd.Process.Signal(syscall.SIGKILL)
			killed <- struct{}{}
		}
	}
	proxy.Before = func(method, path string) { kill("data", method, path) }
	proxy.After = func(method, path string) { kill("manifest", method, path) }
	for i, point := range []string{"data", "manifest"} {
		startWithBucket(t, d, srv)
		if i == 1 {
			// The data file's PUT was cut: that store goes up again
			// under a new generation, the old one's objects deleted.
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(d.Stderr(), "deleted objects of earlier upload attempts") {
				if time.Now().After(deadline) {
					t.Fatalf("the interrupted generation was not deleted:\n%s", d.Stderr())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		step.Store(point)
		// 1,500 spans fill more than one 32 KiB store whatever the codec
		// (600 did with LZ4, not with zstd at ~45 B per span).
		spans := workload.Spans(uint64(1000+i), 1500)
		for j := 0; j < len(spans); j += 60 {
			if err := l.put(d.Client, spans[j:j+60]); err != nil {
				break // killed
			}
		}
		select {
		case <-killed:
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s PUT in 30s:\n%s", point, d.Stderr())
		}
		d.Signal(syscall.SIGKILL)
	}
	startWithBucket(t, d, srv)
	got := waitUploaded(t, d, b, "n1") // audits: one manifest per store, no garbage
	log := d.Stderr()
	for _, want := range []string{"store found uploaded by an earlier run"} {
		if !strings.Contains(log, want) {
			t.Errorf("after the kills the log lacks %q:\n%s", want, log)
		}
	}
	l.check(t, d, 50, true)
	t.Logf("%d stores uploaded after kills during a data file PUT and after a manifest PUT", len(got))
}
