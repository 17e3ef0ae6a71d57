package main

// The acceptance test of "several nodes, one bucket" (issue 17): two
// ingesting daemons and one query daemon on one machine, one bucket on a
// real S3 server (versitygw, internal/s3test).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/bucketadmin"
	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// EnvBucketSoak sets the spans each ingesting daemon of
// TestTwoNodesOneBucket writes (make soak); the default keeps it within
// make test's time.
const EnvBucketSoak = "ZTSD_BUCKET_SOAK_SPANS"

const bucketPrefix = "fleet"

// bucketConfig is a daemon's config over the server's bucket.
func bucketConfig(srv *s3test.Server, extra, node string) string {
	return fmt.Sprintf(`%s
[store]
max_store_size = "16KiB"
max_store_age = "2s"
chunk_target_size = "4KiB"
[object_store]
endpoint = %q
bucket = %q
prefix = %q
path_style = true
node = %q
local_max_stores = 2
discover_interval = "1s"
`, extra, srv.Endpoint, srv.BucketName, bucketPrefix, node)
}

// startWithEnv starts d with the credentials in its environment, as an
// operator's systemd EnvironmentFile would.
func startWithEnv(t *testing.T, d *daemontest.Daemon, env []string, args ...string) {
	cmd := exec.Command(filepath.Join(daemontest.Binaries(t), "ztsd"), append([]string{"--config", d.Config}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	d.StartCmd(cmd)
}

// manifestsOf counts the stores of node in the bucket.
func manifestsOf(t *testing.T, b objstore.Bucket, node string) int {
	t.Helper()
	stores, err := bucketadmin.ListStores(context.Background(), b, bucketPrefix, node)
	if err != nil {
		t.Fatal(err)
	}
	return len(stores)
}

// localStoreDirs counts the store directories in a data directory.
func localStoreDirs(t *testing.T, dataDir string) int {
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

// remoteReads are a daemon's ztsd_remote_* counters.
type remoteReads struct{ gets, index, chunk float64 }

func (r remoteReads) bytes() float64 { return r.index + r.chunk }

func remoteCounters(t *testing.T, d *daemontest.Daemon) remoteReads {
	t.Helper()
	text, err := d.Client.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var r remoteReads
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "ztsd_remote_gets_total":
			r.gets = v
		case `ztsd_remote_downloaded_bytes_total{kind="index"}`:
			r.index = v
		case `ztsd_remote_downloaded_bytes_total{kind="chunk"}`:
			r.chunk = v
		}
	}
	return r
}

// flatten lists a trace's spans (roots and their child spans).
func flatten(roots []*trace.Span) []*trace.Span {
	var out []*trace.Span
	var walk func([]*trace.Span)
	walk = func(ss []*trace.Span) {
		for _, s := range ss {
			out = append(out, s)
			walk(s.Children)
		}
	}
	walk(roots)
	return out
}

// checkTraces reads every trace of spans by id from c and compares it,
// span by span, with what was written.
func checkTraces(t *testing.T, who string, c *client.Client, spans []*trace.Span) {
	t.Helper()
	byTrace := map[trace.TraceID][]*trace.Span{}
	var ids []trace.TraceID
	for _, sp := range spans {
		if byTrace[sp.TraceID] == nil {
			ids = append(ids, sp.TraceID)
		}
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	ctx := context.Background()
	for _, id := range ids {
		roots, err := c.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s: get trace %s: %v", who, id, err)
		}
		got := flatten(roots)
		want := byTrace[id]
		if len(got) != len(want) {
			t.Fatalf("%s: trace %s has %d spans, %d were written", who, id, len(got), len(want))
		}
		sort.Slice(got, func(i, j int) bool { return got[i].SpanID < got[j].SpanID })
		sort.Slice(want, func(i, j int) bool { return want[i].SpanID < want[j].SpanID })
		for i := range want {
			w, g := *want[i], *got[i]
			w.Children, g.Children = nil, nil
			if !g.Equal(&w) {
				t.Fatalf("%s: span %s/%s differs: %s", who, id, w.SpanID, trace.Diff(&w, &g))
			}
		}
	}
}

// TestTwoNodesOneBucket: nodes a and b write through their own daemons
// and seal at least 10 stores each; every sealed store is uploaded and
// its local copy removed down to local_max_stores; then every span is
// read by id and found by search (equal to a brute-force filter) from its
// own node and from the query node, which serves both nodes' stores and
// refuses writes; ztsctl verify --remote --deep passes.
func TestTwoNodesOneBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw and three daemons")
	}
	perNode := 4000
	if s := os.Getenv(EnvBucketSoak); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of spans", EnvBucketSoak, s)
		}
		perNode = n
	}
	daemontest.Binaries(t) // built before the clock starts
	t0 := time.Now()
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	env := srv.Env()

	nodes := map[string]*daemontest.Daemon{}
	spans := map[string][]*trace.Span{}
	for i, node := range []string{"a", "b"} {
		d := daemontest.New(t, bucketConfig(srv, "", node))
		startWithEnv(t, d, env)
		nodes[node] = d
		spans[node] = workload.Spans(uint64(170+i), perNode)
	}
	// The query node starts before anything is uploaded: it finds the
	// stores by listing manifests every discover_interval.
	// Its index cache goes where object_store.cache_dir says.
	cacheDir := filepath.Join(t.TempDir(), "index-cache")
	q := daemontest.New(t, bucketConfig(srv, "", "")+fmt.Sprintf("cache_dir = %q\n", cacheDir))
	startWithEnv(t, q, env, "--query")

	// Write through both ingesting daemons at once.
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for node, d := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client.New(d.Socket)
			defer c.Close()
			ss := spans[node]
			for i := 0; i < len(ss); i += 50 {
				if err := c.Put(context.Background(), ss[i:min(i+50, len(ss))]...); err != nil {
					errc <- fmt.Errorf("node %s, put of spans %d..: %w", node, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// The store taking writes is not in the bucket until it is sealed:
	// once it is older than max_store_age, one more request seals it (a
	// rotation happens on a write) and stays, alone, in the new one. Each
	// node is checked against all it acknowledged, the query node against
	// the rest.
	time.Sleep(2100 * time.Millisecond)
	sentinel := map[string][]*trace.Span{}
	for i, node := range []string{"a", "b"} {
		sentinel[node] = workload.Spans(uint64(180+i), 1)
		if err := nodes[node].Client.Put(context.Background(), sentinel[node]...); err != nil {
			t.Fatal(err)
		}
	}
	tWritten := time.Since(t0)

	// Wait until every sealed store is in the bucket and the local copies
	// are down to local_max_stores (+ the store taking writes).
	sealed := map[string]int{}
	deadline := time.Now().Add(90*time.Second + time.Duration(perNode)*2*time.Millisecond)
	for node, d := range nodes {
		for {
			infos, err := d.Client.Stores(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, st := range infos {
				if st.State == "sealed" {
					ids[st.ID] = true
				}
			}
			sealed[node] = len(ids)
			up, local := manifestsOf(t, b, node), localStoreDirs(t, d.DataDir)
			if sealed[node] >= 10 && up >= sealed[node] && local <= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s: %d sealed stores, %d in the bucket, %d local store directories (want >= 10, all, <= 3)\n%s",
					node, sealed[node], up, local, d.Stderr())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	tUploaded := time.Since(t0)
	total := manifestsOf(t, b, "a") + manifestsOf(t, b, "b")
	for {
		h, err := q.Client.HealthStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !h.QueryOnly {
			t.Fatalf("the query node's /healthz does not say query_only: %+v", h)
		}
		if h.RemoteStores != nil && *h.RemoteStores == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("query node serves %v remote stores, the bucket has %d\n%s", h.RemoteStores, total, q.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	tDiscovered := time.Since(t0)

	// Every span, by id and by search: each node's own from its daemon,
	// all of them from the query node.
	all := append(append([]*trace.Span(nil), spans["a"]...), spans["b"]...)
	for node, d := range nodes {
		acked := append(append([]*trace.Span(nil), spans[node]...), sentinel[node]...)
		checkTraces(t, "node "+node, d.Client, acked)
		checkSearchesMatch(t, d.Client, acked)
	}
	// The query node reads every trace twice (cold: indexes not cached
	// yet; warm), then searches; its ztsd_remote_* counters say what each
	// cost in round trips and bytes.
	traces := map[trace.TraceID]bool{}
	for _, sp := range all {
		traces[sp.TraceID] = true
	}
	m0 := remoteCounters(t, q)
	checkTraces(t, "query node", q.Client, all)
	m1 := remoteCounters(t, q)
	checkTraces(t, "query node", q.Client, all)
	m2 := remoteCounters(t, q)
	checkSearchesMatch(t, q.Client, all)
	m3 := remoteCounters(t, q)
	// The searches downloaded index files into cache_dir, not the data dir.
	var cached int
	filepath.WalkDir(cacheDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".sst") {
			cached++
		}
		return nil
	})
	if cached == 0 {
		t.Fatalf("no index file in cache_dir %s after %d searches", cacheDir, len(workload.Filters(all)))
	}
	tRead := time.Since(t0)
	nf := float64(len(traces))
	t.Logf("query node, %d traces by id, cold: %.2f GETs and %.0f bytes per trace (index %d, chunk %d bytes in all); warm: %.2f GETs and %.0f bytes per trace; %d searches: %.0f GETs, %.0f bytes",
		len(traces), (m1.gets-m0.gets)/nf, (m1.bytes()-m0.bytes())/nf, int64(m1.index-m0.index), int64(m1.chunk-m0.chunk),
		(m2.gets-m1.gets)/nf, (m2.bytes()-m1.bytes())/nf, len(workload.Filters(all)), m3.gets-m2.gets, m3.bytes()-m2.bytes())

	// The query node refuses writes, saying where they go.
	err := q.Client.Put(context.Background(), workload.Spans(9, 1)...)
	if err == nil || !strings.Contains(err.Error(), "writes go to an ingesting node") {
		t.Fatalf("a write to the query node: %v", err)
	}
	if n := localStoreDirs(t, q.DataDir); n != 0 {
		t.Fatalf("the query node made %d local stores", n)
	}

	// Every store in the bucket verifies, downloaded and checked.
	ctl := exec.Command(filepath.Join(daemontest.Binaries(t), "ztsctl"), "verify", "--remote", "--deep", "--config", q.Config,
		"--temp-dir", t.TempDir())
	ctl.Env = append(os.Environ(), env...)
	out, err := ctl.CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("verify --remote: OK: %d stores", total)) {
		t.Fatalf("ztsctl verify --remote --deep: %v\n%s", err, out)
	}
	// ztsctl stores on the query node names every store node/id, in the
	// bucket.
	listing, errOut, code := q.Ctl(nil, "stores")
	if code != 0 || !strings.Contains(listing, "a/000000  sealed  bucket") || !strings.Contains(listing, "b/000000  sealed  bucket") {
		t.Fatalf("ztsctl stores on the query node: exit %d %s\n%s", code, errOut, listing)
	}
	// A store removed from the bucket (as [retention] does: the manifest
	// first) stops being served by the query node at its next scan.
	gone := bucketadmin.StoreRef("b", 0)
	if err := b.Delete(context.Background(), objstore.ManifestKey(bucketPrefix, gone.Node, gone.ID)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		h, err := q.Client.HealthStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h.RemoteStores != nil && *h.RemoteStores == total-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the query node still serves %v stores after b/000000's manifest was deleted (%d before)", h.RemoteStores, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Node a restarted: its stores whose local copy is gone are served
	// from the bucket again from the start.
	if err := nodes["a"].Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("node a after SIGTERM: %v", err)
	}
	startWithEnv(t, nodes["a"], env)
	checkTraces(t, "node a after a restart", nodes["a"].Client, append(append([]*trace.Span(nil), spans["a"]...), sentinel["a"]...))

	t.Logf("%d spans per node; stores sealed: a %d, b %d; bucket: %d stores; written %v, uploaded %v, discovered %v, all read and searched %v, verified %v",
		perNode, sealed["a"], sealed["b"], total, tWritten.Round(time.Millisecond), tUploaded.Round(time.Millisecond),
		tDiscovered.Round(time.Millisecond), tRead.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
}
