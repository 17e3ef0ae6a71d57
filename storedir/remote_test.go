package storedir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/objstore/objstoretest"
	"github.com/ztsd/ztsd/trace"
)

// uploadStoreDir uploads the sealed store directory dir (no daemon holds
// it) under node with the layout of objstore, the tracefilter object
// included unless noFilter, and the manifest last. It mirrors what the
// tiering uploader does.
func uploadStoreDir(t testing.TB, b objstore.Bucket, prefix, node, dir string, noFilter bool) *objstore.Manifest {
	t.Helper()
	ctx := context.Background()
	id, ok := ParseStoreName(filepath.Base(dir))
	if !ok {
		t.Fatalf("%s is not a store directory", dir)
	}
	p, err := config.ReadPropsFile(filepath.Join(dir, propsFile))
	if err != nil {
		t.Fatal(err)
	}
	props, err := config.StorePropsFrom(p)
	if err != nil {
		t.Fatal(err)
	}
	if props.State != stateSealed {
		t.Fatalf("store %s is not sealed", dir)
	}
	gen := fmt.Sprintf("g%d", time.Now().UnixNano())
	m := &objstore.Manifest{Version: objstore.ManifestVersion, Node: node, Store: id, Generation: gen,
		Uploaded: time.Now().UTC(), FirstNS: props.FirstTraceNS, LastNS: props.LastTraceNS, Chunks: props.Chunks,
		MasterChecksum: fmt.Sprintf("%08x", props.MasterChecksum)}
	put := func(rel string, data []byte) {
		sum := sha256.Sum256(data)
		if err := b.Put(ctx, objstore.FileKey(prefix, node, id, gen, rel), bytes.NewReader(data), int64(len(data)), sum[:]); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, objstore.ManifestFile{Path: rel, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if rel == dataFile || rel == propsFile || rel == supersededFile || strings.HasPrefix(rel, metaDir+"/") || strings.HasPrefix(rel, textDir+"/") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			put(rel, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !noFilter {
		tf, td, err := BuildTraceFilter(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		put(TraceFilterFile, tf)
		put(TraceDirFile, td)
	}
	mj, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, objstore.ManifestKey(prefix, node, id), bytes.NewReader(mj), int64(len(mj)), nil); err != nil {
		t.Fatal(err)
	}
	back, err := objstore.ParseManifest("test", mj)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// remoteFixture: a data directory with stores 0..2 sealed and uploaded
// (node web-1) and store 3 open, and every span written.
type remoteFixture struct {
	dir    string
	bucket objstore.Bucket
	spans  []*trace.Span
	ms     []*objstore.Manifest
}

// mem is the fixture's bucket when it is a memBucket.
func (f *remoteFixture) mem() *objstoretest.Bucket { return f.bucket.(*objstoretest.Bucket) }

func newRemoteFixture(t *testing.T, noFilter bool) *remoteFixture {
	t.Helper()
	return newRemoteFixtureIn(t, objstoretest.New(), noFilter)
}

func newRemoteFixtureIn(t *testing.T, b objstore.Bucket, noFilter bool) *remoteFixture {
	t.Helper()
	f := &remoteFixture{dir: t.TempDir(), bucket: b}
	db := openTestDB(t, f.dir, DefaultOptions())
	for i := 0; i < 4; i++ {
		sp := genWorkload(uint64(700+i), 250)
		appendAll(t, db, sp, 50)
		f.spans = append(f.spans, sp...)
		if i < 3 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i := uint32(0); i < 3; i++ {
		f.ms = append(f.ms, uploadStoreDir(t, f.bucket, "pre", "web-1", filepath.Join(f.dir, StoreName(i)), noFilter))
	}
	return f
}

func (f *remoteFixture) options(cacheMax int64) Options {
	o := DefaultOptions()
	o.Remote = RemoteOptions{Bucket: f.bucket, Prefix: "pre", Node: "web-1", CacheMaxSize: cacheMax}
	return o
}

// TestRemoteDropLocalCopy: stores switched to their uploaded copies
// answer gets and searches exactly as the brute-force filter of what was
// written; the local directories are gone; Stores says where each lives.
func TestRemoteDropLocalCopy(t *testing.T) {
	f := newRemoteFixture(t, false)
	db := openTestDB(t, f.dir, f.options(0))
	defer db.Close()
	// This node's upload of a store still served locally is not served
	// beside it (every span would be listed twice).
	if err := db.ServeRemote(context.Background(), f.bucket, f.ms[0]); err != nil {
		t.Fatal(err)
	}
	if n, got := len(db.Stores()), searchAll(t, db, Query{Spans: true, Limit: 1000}); n != 4 || len(got) != len(f.spans) {
		t.Fatalf("own upload served beside its local copy: %d stores, %d spans of %d", n, len(got), len(f.spans))
	}
	for i, m := range f.ms {
		if err := db.DropLocalCopy(uint32(i), m); err != nil {
			t.Fatalf("drop local copy %d: %v", i, err)
		}
		if _, err := os.Stat(filepath.Join(f.dir, StoreName(uint32(i)))); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("store %d directory still there: %v", i, err)
		}
	}
	if err := db.DropLocalCopy(3, f.ms[0]); err == nil {
		t.Fatal("dropping the open store with another store's manifest succeeded")
	}
	infos := db.Stores()
	where := map[string]string{}
	for _, in := range infos {
		where[in.ID] = in.Location + "/" + in.Node
		if in.Location == "remote" && in.Generation == "" {
			t.Fatalf("remote store %s without generation", in.ID)
		}
	}
	if fmt.Sprint(where) != "map[000000:remote/web-1 000001:remote/web-1 000002:remote/web-1 000003:local/]" {
		t.Fatalf("stores: %v", where)
	}
	before := db.RemoteStats()
	// A trace in no store: the filters rule every remote store out.
	if _, err := db.GetTrace(context.Background(), trace.TraceID{1, 2, 3}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown trace: %v", err)
	}
	if st := db.RemoteStats(); st.IndexBytes-before.IndexBytes > 3*1<<20 || st.CacheMisses > 3 {
		t.Fatalf("unknown trace downloaded indexes: %+v", st)
	}
	checkGets(t, db, f.spans, 7)
	if st := db.RemoteStats(); st.CacheMisses != 0 {
		t.Fatalf("gets downloaded indexes (the trace directory answers them): %+v", st)
	}
	checkSearches(t, db, f.spans)
	st := db.RemoteStats()
	if st.Stores != 3 || st.Cached != 3 || st.CacheMisses != 3 || st.CacheHits == 0 || st.ChunkBytes == 0 || st.GETs == 0 {
		t.Fatalf("remote stats: %+v", st)
	}
	// Appending what a remote store holds adds nothing (its filter finds it).
	if err := db.Append(context.Background(), f.spans[:10]); err != nil {
		t.Fatal(err)
	}
	checkGets(t, db, f.spans[:10], 1)
	if got := searchAll(t, db, Query{Spans: true, Limit: 1000}); len(got) != len(f.spans) {
		t.Fatalf("span search after re-appending: %d spans, wrote %d", len(got), len(f.spans))
	}
	// Restart: the remote stores are served again once ServeRemote'd.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestDB(t, f.dir, f.options(0))
	for _, m := range f.ms {
		if err := db.ServeRemote(context.Background(), f.bucket, m); err != nil {
			t.Fatal(err)
		}
		if err := db.ServeRemote(context.Background(), f.bucket, m); err != nil { // idempotent
			t.Fatal(err)
		}
	}
	if n := len(db.Stores()); n != 4 {
		t.Fatalf("%d stores after restart", n)
	}
	checkGets(t, db, f.spans, 13)
}

// TestRemoteChunkReadIsOneGET: a warm get whose chunk is not in memory
// costs one ranged GET: with the tracefilter and tracedir objects (the
// directory block is kept from the first get) exactly the chunk; without
// them (indexes downloaded), the read-ahead, for a chunk that fits.
func TestRemoteChunkReadIsOneGET(t *testing.T) {
	for _, noFilter := range []bool{false, true} {
		f := newRemoteFixture(t, noFilter)
		o := f.options(0)
		o.QueryOnly = true
		db := openTestDB(t, t.TempDir(), o)
		for _, m := range f.ms {
			if err := db.ServeRemote(context.Background(), f.bucket, m); err != nil {
				t.Fatal(err)
			}
		}
		sp := f.spans[3] // in store 0
		if _, err := db.GetTrace(context.Background(), sp.TraceID); err != nil {
			t.Fatal(err)
		}
		// Warm: indexes cached; the chunk cache is dropped so the chunk is
		// fetched again.
		db.cache = newChunkCache(256)
		before := db.RemoteStats()
		if _, err := db.GetSpan(context.Background(), sp.TraceID, sp.SpanID); err != nil {
			t.Fatal(err)
		}
		after := db.RemoteStats()
		want := int64(1)
		if gets := after.GETs - before.GETs; gets != want {
			t.Fatalf("noFilter=%v: a warm get cost %d GETs, want %d", noFilter, gets, want)
		}
		if after.IndexBytes != before.IndexBytes {
			t.Fatalf("noFilter=%v: a warm get downloaded index bytes", noFilter)
		}
		db.Close()
	}
}

// TestRemoteTinyCacheEvicts: a cache bound smaller than one store's
// indexes still answers everything; the indexes are evicted after each
// request and downloaded again.
func TestRemoteTinyCacheEvicts(t *testing.T) {
	f := newRemoteFixture(t, false)
	db := openTestDB(t, f.dir, f.options(1))
	defer db.Close()
	for i, m := range f.ms {
		if err := db.DropLocalCopy(uint32(i), m); err != nil {
			t.Fatal(err)
		}
	}
	checkGets(t, db, f.spans, 29)
	for _, q := range searchQueries(f.spans)[:4] {
		searchAll(t, db, q)
	}
	st := db.RemoteStats()
	if st.CacheEvictions == 0 || st.CacheBytes != 0 || st.Cached != 0 {
		t.Fatalf("tiny cache: %+v", st)
	}
	checkSearches(t, db, f.spans)
	if st := db.RemoteStats(); st.CacheBytes != 0 {
		t.Fatalf("tiny cache holds %d bytes between requests", st.CacheBytes)
	}
}

// TestRemoteDamagedChunkWarns: a flipped byte in a remote data file costs
// its chunk (a warning naming node/store), not the request.
func TestRemoteDamagedChunkWarns(t *testing.T) {
	f := newRemoteFixture(t, false)
	o := f.options(0)
	o.QueryOnly = true
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	for _, m := range f.ms {
		if err := db.ServeRemote(context.Background(), f.bucket, m); err != nil {
			t.Fatal(err)
		}
	}
	chunks := scanStoredChunks(t, filepath.Join(f.dir, StoreName(1), dataFile))
	victim := chunks[len(chunks)/2]
	key := objstore.FileKey("pre", "web-1", 1, f.ms[1].Generation, dataFile)
	data, _ := f.mem().Data(key)
	data[victim.off+chunkPayloadOffset(victim)] ^= 0x40
	sp := victim.spans[0]
	_, warns, err := db.GetTraceWithWarnings(context.Background(), sp.TraceID)
	if err != nil {
		t.Fatalf("get of a trace in a damaged remote chunk failed: %v", err)
	}
	if len(warns) != 1 || warns[0].Store != "web-1/000001" || warns[0].Offset != victim.off {
		t.Fatalf("warnings %+v, want web-1/000001 at %d", warns, victim.off)
	}
	res, err := db.Search(context.Background(), Query{Spans: true, Limit: MaxSearchLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || res.Warnings[0].Store != "web-1/000001" {
		t.Fatalf("search warnings %+v", res.Warnings)
	}
	if want := len(f.spans) - 250 - len(victim.spans); len(res.Spans) != want { // store 3 (250 spans) is not uploaded
		t.Fatalf("search: %d spans, want %d", len(res.Spans), want)
	}
	if db.DamagedChunks() != 1 {
		t.Fatalf("damaged chunks %d", db.DamagedChunks())
	}
}

func chunkPayloadOffset(c storedChunk) int64 { return 16 + (c.next-c.off-16)/2 }

// TestRemoteMissingObject: an index object missing from the bucket fails
// the request with an error naming its key; a missing data file fails
// ServeRemote naming it.
func TestRemoteMissingObject(t *testing.T) {
	f := newRemoteFixture(t, false)
	o := f.options(0)
	o.QueryOnly = true
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	m := f.ms[0]
	var metaFile string
	for _, mf := range m.Files {
		if strings.HasPrefix(mf.Path, "meta/") && strings.HasSuffix(mf.Path, ".sst") {
			metaFile = mf.Path
		}
	}
	if metaFile == "" {
		t.Fatalf("no meta table in %+v", m.Files)
	}
	missing := objstore.FileKey("pre", "web-1", 0, m.Generation, metaFile)
	f.bucket.Delete(context.Background(), missing)
	if err := db.ServeRemote(context.Background(), f.bucket, m); err != nil {
		t.Fatal(err)
	}
	_, err := db.Search(context.Background(), Query{Limit: 10})
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing index object: %v, want an error naming %s", err, missing)
	}
	dirKey := objstore.FileKey("pre", "web-1", 0, m.Generation, TraceDirFile)
	f.bucket.Delete(context.Background(), dirKey)
	_, err = db.GetTrace(context.Background(), f.spans[0].TraceID)
	if err == nil || !strings.Contains(err.Error(), dirKey) || !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing trace directory: %v, want an error naming %s", err, dirKey)
	}
	dataKey := objstore.FileKey("pre", "web-1", 1, f.ms[1].Generation, dataFile)
	f.bucket.Delete(context.Background(), dataKey)
	if err := db.ServeRemote(context.Background(), f.bucket, f.ms[1]); err == nil || !strings.Contains(err.Error(), dataKey) {
		t.Fatalf("missing data file: %v, want an error naming %s", err, dataKey)
	}
}

// TestQueryOnlyTwoNodes: a query-only DB serves the stores of two nodes
// whose store ids collide, answers as the brute-force filter over both,
// and refuses writes.
func TestQueryOnlyTwoNodes(t *testing.T) {
	a := newRemoteFixture(t, false)
	b := &remoteFixture{dir: t.TempDir(), bucket: a.bucket}
	db2 := openTestDB(t, b.dir, DefaultOptions())
	for i := 0; i < 2; i++ {
		sp := genWorkload(uint64(900+i), 200)
		appendAll(t, db2, sp, 40)
		b.spans = append(b.spans, sp...)
		if err := db2.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	db2.Close()
	for i := uint32(0); i < 2; i++ {
		b.ms = append(b.ms, uploadStoreDir(t, a.bucket, "pre", "web-2", filepath.Join(b.dir, StoreName(i)), i == 1))
	}
	o := a.options(0)
	o.QueryOnly = true
	o.Remote.Node = ""
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	for _, m := range append(append([]*objstore.Manifest(nil), a.ms...), b.ms...) {
		if err := db.ServeRemote(context.Background(), a.bucket, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Append(context.Background(), b.spans[:1]); !errors.Is(err, ErrQueryOnly) || err.Error() != "query-only node: no local writes" {
		t.Fatalf("append on a query-only DB: %v", err)
	}
	if n := len(db.Stores()); n != 5 {
		t.Fatalf("%d stores, want 5", n)
	}
	all := append(append([]*trace.Span(nil), a.spans[:750]...), b.spans...) // a's store 3 was never uploaded
	checkGets(t, db, all, 11)
	checkSearches(t, db, all)
	// A newer generation replaces the old one; dropping removes the store.
	m2 := uploadStoreDir(t, a.bucket, "pre", "web-2", filepath.Join(b.dir, StoreName(0)), false)
	if err := db.ServeRemote(context.Background(), a.bucket, m2); err != nil {
		t.Fatal(err)
	}
	gens := map[string]bool{}
	for _, in := range db.Stores() {
		if in.Node == "web-2" {
			gens[in.Generation] = true
		}
	}
	if len(gens) != 2 || !gens[m2.Generation] || gens[b.ms[0].Generation] {
		t.Fatalf("generations after replacing: %v", gens)
	}
	if err := db.DropRemote("web-2", 1); err != nil {
		t.Fatal(err)
	}
	if n := len(db.Stores()); n != 4 {
		t.Fatalf("%d stores after a drop, want 4", n)
	}
	checkGets(t, db, all[:750], 17)
}

// TestTraceFilterFileRoundTrip: the encoded filter holds every trace of
// the store and its chunk bounds tile the data file.
func TestTraceFilterFileRoundTrip(t *testing.T) {
	data := t.TempDir()
	db := openTestDB(t, data, DefaultOptions())
	spans := genWorkload(77, 4000)
	appendAll(t, db, spans, 200)
	if err := db.Rotate(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	dir := filepath.Join(data, StoreName(0))
	b, td, err := BuildTraceFilter(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	filter, bounds, blocks, err := decodeTraceFilter(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range spans {
		if !filter.mayContain(sp.TraceID) {
			t.Fatalf("filter rules out trace %s of the store", sp.TraceID)
		}
	}
	chunks := scanStoredChunks(t, filepath.Join(dir, dataFile))
	// The directory lists, for every trace, exactly the chunks holding it.
	want := map[trace.TraceID][]int64{}
	for _, c := range chunks {
		for _, sp := range c.spans {
			if l := want[sp.TraceID]; len(l) == 0 || l[len(l)-1] != c.off {
				want[sp.TraceID] = append(l, c.off)
			}
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("%d directory blocks for %d traces", len(blocks), len(want))
	}
	for id, offs := range want {
		i := sort.Search(len(blocks), func(i int) bool { return bytes.Compare(blocks[i].first[:], id[:]) > 0 }) - 1
		got, err := lookupDirBlock(td[blocks[i].off:blocks[i].off+blocks[i].len], id)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(offs) {
			t.Fatalf("trace %s: directory says %v (%v), chunks %v", id, got, err, offs)
		}
	}
	if len(bounds) != len(chunks)+1 {
		t.Fatalf("%d bounds for %d chunks", len(bounds), len(chunks))
	}
	for i, c := range chunks {
		if bounds[i] != c.off || bounds[i+1] != c.next {
			t.Fatalf("chunk %d at [%d,%d), bounds say [%d,%d)", i, c.off, c.next, bounds[i], bounds[i+1])
		}
	}
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 1
		if _, _, _, err := decodeTraceFilter(bad); err == nil {
			t.Fatalf("a flipped bit at %d decodes", i)
		}
	}
}

func FuzzLookupDirBlock(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		lookupDirBlock(b, trace.TraceID{1})
		if len(b) > 4 { // with a valid checksum the entries are parsed
			body := b[:len(b)-4]
			lookupDirBlock(binary.BigEndian.AppendUint32(append([]byte(nil), body...), crc32.ChecksumIEEE(body)), trace.TraceID{1})
		}
	})
}

func FuzzDecodeTraceFilter(f *testing.F) {
	tf := newTraceFilter(10)
	tf.add(trace.TraceID{1})
	f.Add(encodeTraceFilter(tf, []int64{16, 100, 300}, []dirBlock{{first: trace.TraceID{1}, len: 40}, {first: trace.TraceID{2}, len: 9}}))
	f.Add([]byte("ZTF1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		filter, bounds, blocks, err := decodeTraceFilter(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeTraceFilter(filter, bounds, blocks), b) {
			t.Fatal("decoded filter does not encode back to its bytes")
		}
	})
}
