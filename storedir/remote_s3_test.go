package storedir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/trace"
)

// TestRemoteS3 runs remote stores against a real S3 server (versitygw):
// stores written locally, uploaded, switched to their bucket copies
// (DropLocalCopy) answer every get and search as the brute-force filter of
// what was written; so do they after a restart with a cache bound smaller
// than one store's indexes (evicted after every request); a flipped byte
// in a remote data file is a warning naming node/store; a missing index
// object fails the request naming its key.
func TestRemoteS3(t *testing.T) {
	srv := s3test.Start(t)
	f := newRemoteFixtureIn(t, srv.Bucket(t), false)
	db := openTestDB(t, f.dir, f.options(0))
	for i, m := range f.ms {
		if err := db.DropLocalCopy(uint32(i), m); err != nil {
			t.Fatalf("drop local copy %d: %v", i, err)
		}
	}
	checkGets(t, db, f.spans, 5)
	checkSearches(t, db, f.spans)
	if st := db.RemoteStats(); st.Cached != 3 || st.CacheMisses != 3 {
		t.Fatalf("remote stats: %+v", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart with a tiny cache: the daemon serves its uploads again.
	db = openTestDB(t, f.dir, f.options(1))
	for _, m := range f.ms {
		if err := db.ServeRemote(context.Background(), f.bucket, m); err != nil {
			t.Fatal(err)
		}
	}
	checkGets(t, db, f.spans, 23)
	checkSearches(t, db, f.spans)
	if st := db.RemoteStats(); st.CacheEvictions == 0 || st.CacheBytes != 0 {
		t.Fatalf("tiny cache: %+v", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// A flipped byte in store 1's data file, in the server's backend.
	db = openTestDB(t, f.dir, f.options(0))
	defer db.Close()
	for _, m := range f.ms {
		if err := db.ServeRemote(context.Background(), f.bucket, m); err != nil {
			t.Fatal(err)
		}
	}
	dataKey := objstore.FileKey("pre", "web-1", 1, f.ms[1].Generation, dataFile)
	backend := filepath.Join(srv.Root, srv.BucketName, filepath.FromSlash(dataKey))
	victim := chunkAt(t, backend, 2)
	flipBit(t, backend, victim.off+chunkPayloadOffset(victim), 0x40)
	_, warns, err := db.GetTraceWithWarnings(context.Background(), victim.spans[0].TraceID)
	if err != nil {
		t.Fatalf("get of a trace in a damaged remote chunk: %v", err)
	}
	if len(warns) != 1 || warns[0].Store != "web-1/000001" || warns[0].Offset != victim.off {
		t.Fatalf("warnings %+v, want web-1/000001 at %d", warns, victim.off)
	}

	// A missing index object of store 2 (not cached yet).
	var missing string
	for _, mf := range f.ms[2].Files {
		if strings.HasPrefix(mf.Path, "text/") && strings.HasSuffix(mf.Path, ".sst") {
			missing = objstore.FileKey("pre", "web-1", 2, f.ms[2].Generation, mf.Path)
		}
	}
	if err := f.bucket.Delete(context.Background(), missing); err != nil {
		t.Fatal(err)
	}
	_, err = db.Search(context.Background(), Query{Limit: 10, Text: "deadlock"})
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing index object: %v, want an error naming %s", err, missing)
	}
}

// chunkAt returns chunk i of the data file at path (a copy of a remote
// one, read in the server's backend).
func chunkAt(t *testing.T, path string, i int) storedChunk {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), dataFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		t.Fatal(err)
	}
	chunks := scanStoredChunks(t, tmp)
	if i >= len(chunks) {
		t.Fatalf("%s has %d chunks", path, len(chunks))
	}
	return chunks[i]
}

// TestRemoteMeasure measures remote reads against a real S3 server for
// the note (ZTSD_REMOTE_MEASURE=1 go test -v -run TestRemoteMeasure
// ./storedir/): trace-by-id latency for a remote store with a cold cache
// (nothing downloaded: trace filter, indexes, chunk) and a warm one (only
// the chunk), with the GETs and bytes each costs; search latency over 100
// remote stores, cold and warm, and the bytes a query downloads.
func TestRemoteMeasure(t *testing.T) {
	if os.Getenv("ZTSD_REMOTE_MEASURE") == "" {
		t.Skip("set ZTSD_REMOTE_MEASURE=1 to measure remote reads")
	}
	srv := s3test.Start(t)
	b := srv.Bucket(t)
	ctx := context.Background()

	// One store of 50,000 spans.
	bigDir := t.TempDir()
	db := openTestDB(t, bigDir, DefaultOptions())
	big := genWorkload(1, 50000)
	appendAll(t, db, big, 500)
	if err := db.Rotate(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	bigM := uploadStoreDir(t, b, "pre", "big", filepath.Join(bigDir, StoreName(0)), false)
	var bigBytes int64
	parts := map[string]int64{}
	for _, mf := range bigM.Files {
		bigBytes += mf.Size
		parts[strings.SplitN(mf.Path, "/", 2)[0]] += mf.Size
	}
	t.Logf("big store: %d spans, %d files, %d bytes uploaded: %v", len(big), len(bigM.Files), bigBytes, parts)

	queryDB := func(cache int64) *DB {
		o := DefaultOptions()
		o.QueryOnly = true
		o.Remote = RemoteOptions{Prefix: "pre", CacheMaxSize: cache}
		return openTestDB(t, t.TempDir(), o)
	}
	type cost struct {
		d           time.Duration
		gets, bytes int64
	}
	measure := func(db *DB, f func()) cost {
		before := db.RemoteStats()
		t0 := time.Now()
		f()
		d := time.Since(t0)
		after := db.RemoteStats()
		return cost{d, after.GETs - before.GETs, after.IndexBytes + after.ChunkBytes - before.IndexBytes - before.ChunkBytes}
	}
	summary := func(name string, cs []cost) {
		sort.Slice(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
		var gets, bytes int64
		for _, c := range cs {
			gets += c.gets
			bytes += c.bytes
		}
		n := int64(len(cs))
		t.Logf("%-44s n=%3d p50 %8.2f ms  p90 %8.2f ms  max %8.2f ms  GETs/op %.1f  bytes/op %d", name, n,
			ms(cs[len(cs)/2].d), ms(cs[len(cs)*9/10].d), ms(cs[len(cs)-1].d), float64(gets)/float64(n), bytes/n)
	}
	get := func(db *DB, i int) {
		if _, err := db.GetTrace(ctx, big[i].TraceID); err != nil {
			t.Fatal(err)
		}
	}
	// Cold: a fresh DB each time (nothing cached; ServeRemote read the
	// data file's header before the clock starts).
	var cold []cost
	for k := 0; k < 10; k++ {
		db := queryDB(0)
		if err := db.ServeRemote(ctx, b, bigM); err != nil {
			t.Fatal(err)
		}
		cold = append(cold, measure(db, func() { get(db, (k*7919)%len(big)) }))
		db.Close()
	}
	summary("get by id, cold (filter+indexes+chunk)", cold)
	// Warm: indexes cached; each get reads chunks not read before.
	db = queryDB(0)
	defer db.Close()
	if err := db.ServeRemote(ctx, b, bigM); err != nil {
		t.Fatal(err)
	}
	get(db, 0)
	var warm, hot []cost
	for k := 1; k <= 200; k++ {
		i := (k * 104729) % len(big)
		db.cache = newChunkCache(256) // the chunk is fetched, not found in memory
		warm = append(warm, measure(db, func() { get(db, i) }))
		hot = append(hot, measure(db, func() { get(db, i) }))
	}
	summary("get by id, warm (indexes cached, chunk fetched)", warm)
	summary("get by id, hot (chunk in memory)", hot)
	absent := []cost{}
	for k := 0; k < 100; k++ {
		id := big[k].TraceID
		id[0] ^= 0xff
		absent = append(absent, measure(db, func() { db.GetTrace(ctx, id) }))
	}
	summary("get by id of an absent trace, warm", absent)

	// 100 small stores, one day each.
	var ms100 []*objstore.Manifest
	var all []*trace.Span
	smallDir := t.TempDir()
	sdb := openTestDB(t, smallDir, DefaultOptions())
	for i := 0; i < 100; i++ {
		sp := genWorkload(uint64(1000+i), 300)
		for _, s := range sp {
			s.StartNS = workload.Base + int64(i)*int64(24*time.Hour) + (s.StartNS-workload.Base)/20
		}
		appendAll(t, sdb, sp, 300)
		all = append(all, sp...)
		if err := sdb.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	sdb.Close()
	for i := uint32(0); i < 100; i++ {
		ms100 = append(ms100, uploadStoreDir(t, b, "pre", "small", filepath.Join(smallDir, StoreName(i)), false))
	}
	db100 := queryDB(0)
	defer db100.Close()
	for _, m := range ms100 {
		if err := db100.ServeRemote(ctx, b, m); err != nil {
			t.Fatal(err)
		}
	}
	q := Query{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("payment")}}, Limit: 100}
	search := func(db *DB, q Query) func() {
		return func() {
			if _, err := db.Search(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	summary("search 100 stores, cold (100 stores' indexes)", []cost{measure(db100, search(db100, q))})
	var warmS []cost
	for k := 0; k < 20; k++ {
		db100.cache = newChunkCache(256)
		warmS = append(warmS, measure(db100, search(db100, q)))
	}
	summary("search 100 stores, warm (chunks fetched)", warmS)
	var hotS []cost
	for k := 0; k < 20; k++ {
		hotS = append(hotS, measure(db100, search(db100, q)))
	}
	summary("search 100 stores, hot", hotS)
	tq := Query{Text: "deadlock detected 7", Limit: 100}
	summary("text search 100 stores, warm indexes", []cost{measure(db100, search(db100, tq))})
	// A day's range on a cold node: only the stores of that day are fetched.
	dbDay := queryDB(0)
	defer dbDay.Close()
	for _, m := range ms100 {
		if err := dbDay.ServeRemote(ctx, b, m); err != nil {
			t.Fatal(err)
		}
	}
	dq := q
	dq.SinceNS = workload.Base + 50*int64(24*time.Hour)
	dq.UntilNS = dq.SinceNS + int64(24*time.Hour)
	summary("search one day of 100 stores, cold", []cost{measure(dbDay, search(dbDay, dq))})
	var byID []cost
	for k := 0; k < 100; k++ {
		sp := all[(k*7919)%len(all)]
		byID = append(byID, measure(dbDay, func() {
			if _, err := dbDay.GetTrace(ctx, sp.TraceID); err != nil {
				t.Fatal(err)
			}
		}))
	}
	summary("get by id over 100 stores (filters, first use)", byID)
	st := dbDay.RemoteStats()
	t.Logf("day node: %+v", st)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
