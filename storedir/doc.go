// Package storedir owns the stores of a data directory: each store is one
// hex-named directory holding a data file (traces.zts, the source of truth),
// a metadata index (meta/) and a text index (text/); the DB is the set of
// them under one LOCK file, with one open store taking writes. The indexes
// of all local stores share one Pebble block cache of
// Options.IndexCacheBytes (config limits.index_cache_size), so the bloom
// filters and index blocks every lookup reads stay cached whichever store
// they belong to. Pebble reserves the indexes' memtables from that cache
// and never shrinks them, so a store sealed while the DB runs (by a
// rotation, or after a background catch-up or rebuild) has its indexes
// flushed and reopened in place in the background (releaseMemTables,
// kv.DB.Reopen), between the reads using them: the cache keeps room for
// the store taking writes and each sealed index keeps one small memtable,
// however many stores the DB seals before it restarts. Reopened, an index
// compacts the tables its writes left in L0 into the base level in the
// background (kv.OpenOptions.Settled; a sealed store's indexes open so at
// each start too), so a sealed store rests without L0 tables for its
// reads to check and merge.
//
// # Writes
//
// DB.Append validates a request's spans, encodes them into chunk payloads in
// the caller's goroutine (so encoding uses every core, and an invalid
// request fails on its own before it meets any other) and compresses them
// there, except a small request (a payload of at most ChunkTargetSize/16),
// and hands them to the single committer goroutine. The committer takes
// every request that is waiting as one group. It encodes the spans of
// each run of consecutive small requests of the group again, together,
// into shared chunks of up to ChunkTargetSize payload bytes, compressed
// once: many 1-span requests cost one chunk, one string table, one
// compression and one index location, not one each (a small request
// alone, or a run that does not encode together, is compressed by the
// committer as its own chunk; a large request keeps the chunks its caller
// encoded). Each chunk still carries its own
// string table, so a chunk decodes on its own whichever requests filled it.
// DB.AppendPayload is Append for spans decoded from a request body that is
// itself a chunk payload (a CBOR write): when the body is what the encoder
// would write in every way a reader relies on (trace.PayloadLayout's
// Storable) and every span of it is stored, the spans are not encoded
// again: a body of one large request's chunk is compressed as the chunk,
// cut into frames where the encoder would cut it; a small one is the
// request's payload as the caller's encoding would be (the chunk if the
// committer writes the request alone; a run of small requests is encoded
// together as always).
// Under sync=batch with no BatchMaxDelay, a group holding fewer requests
// than were recently in flight at once waits for the missing ones, at
// most about one recent fsync or twice the recent spread of the writers'
// arrivals (groupwait.go): two closed-loop writers then share each fsync
// instead of taking turns; a lone writer never waits.
// The committer writes the group's chunks, then makes them durable with
// one fsync for the whole group (sync=batch), one per request
// (sync=always) or none (sync=none) — an fdatasync: the data file is
// preallocated with zeros written up to 1 MiB ahead of its data
// (chunk.File, chunk.PreallocStep), so appends overwrite zeros already on
// disk without changing the file size or its extents and the sync has no
// metadata to record (about 30% cheaper per fsync on ext4 than an append,
// and ~20% cheaper than writing into fallocated, unwritten blocks) — hands
// them to the indexer goroutine and acknowledges each request at once; it
// does not wait for indexing, so the fsync of the next group overlaps the
// indexing of this one. A chunk written as several frames starts with an
// LZ4 lead frame listing them (chunk.EncodeFrames), so even its first
// read reads only the frames it decodes. Only when LZ4 cannot shrink the
// first piece is it a zstd frame, as every first frame was before; the
// committer keeps the layout of such a chunk (chunk.EncodedChunk.Layout)
// in the layout cache so that its first read needs no whole-chunk read
// either. A request fails if any chunk holding its spans could not be
// written, or if the group's fsync failed; a chunk shared with a failed
// request is still written for the others (at-least-once: spans of a
// failed request may be in the data file).
//
// The indexer (indexer.go) indexes the handed-off chunks in the order they
// were written — all of a hand-off's chunks of one store in one batch per
// index (IndexChunks), the text and metadata commits running in parallel —
// then releases the requests' pending slots (see Versions). Small
// hand-offs (the group commits of unbatched writers) are gathered first,
// up to 128 spans or 40 ms, and indexed in one batch per index (a batch of
// two spans costs over twice the CPU per span of one of 32); a read that
// waits for one of them, a rotation or Close ends the gathering at once.
// A store's indexer interns through one ChunkIndexer from group to group:
// the string → text id map of what it committed stays in memory (at most
// 262,144 strings or 16 MiB of them, then it starts afresh; forgotten when
// a text batch is not committed, and dropped at the seal), so a repeated
// string costs a map lookup, and the ids are still exactly those of
// IndexChunks. The text index keeps the trigram postings of its open block
// of ids in memory and writes each block's lists once, when the block is
// complete or the index is flushed (a seal or close flushes it), so a
// search verifies the open block's strings directly (textindex). The data file
// is its log: indexes have no WAL, and whatever they lack past their
// watermarks is re-indexed from the data file at the next open. Three
// numbered marks connect the two goroutines: queued (the last hand-off),
// acked (the last hand-off of the last acknowledged group, set before any
// of its requests is answered) and indexed. Read-your-writes: every read
// of the indexes — GetTrace, GetSpan, Search, TraceHead, the attribute
// listings, Stores' counters, and Append's duplicate check when a slot of
// its request is still pending — first waits (waitIndexed, until its
// context ends) for indexed to reach the acked mark it saw when it
// started, so a span acknowledged before the read is found by it; the
// wait is usually none or a fraction of a millisecond (the time to index
// what the indexer holds). Indexing only what
// an fsync made durable keeps every index entry that Pebble may flush (at
// any moment) pointing at durable data; the chunks of a store whose fsync
// failed are not indexed at all (the store takes no more writes; the next
// open fsyncs and re-indexes it). An indexing error is logged: the data
// is durable; the indexer indexes nothing more of that store (so its
// watermarks stay below what it missed), the committer rotates to a new
// store, and the next open re-indexes it from the watermarks; reads may
// miss its chunks past the failure until then. The indexer's queue holds at most
// indexQueueJobs hand-offs, or one gathering of small ones: when it is
// full the committer waits before it acknowledges (backpressure), so
// memory stays bounded and the indexing lag short. The committer queues a
// group's hand-off after answering its requests, and wakes the indexer
// only for the first job of a gathering and a full one.
// Before a rotation seals a store, the committer hands off what the group
// wrote to it so far and waits until the indexer has drained, so a sealed
// store's indexes, counters and master checksum cover its whole data
// file; an outside Rotate waits for the committer to be between groups.
// Close stops the committer, which closes the indexer's queue; the
// indexer indexes what is queued before the stores are flushed and
// closed. Under sync=none nothing is fsynced and the indexes may name
// chunks a power loss takes away (a crash of the process alone loses
// nothing: the page cache keeps the data file).
// The free-space check before each group reuses a statfs result for
// 100 ms and a quarter of the headroom it found.
//
// # Versions (idempotent writes)
//
// A span chunk is identified by its slot (trace id, span id, chunk number;
// the chunk number is 0 for a whole span). Before a request is encoded,
// Append looks each slot up in every store, newest first
// (checkVersions): the current version is the newest entry in data-file
// order (a later entry in a store, or any entry in a newer store). A span
// identical to the current version (the same chunk payload when encoded
// alone) is dropped from the request: it is durable and indexed already,
// so a retried request or a re-imported file adds nothing to the data
// files, the counters or the results (a retry that arrives while the
// original is acknowledged but not yet indexed finds its slots pending,
// waits for the indexer and is dropped the same way). A request holding several copies of a
// slot writes only its last one (the earlier ones would be superseded by
// it at once). A different span is a new version:
// it is appended, and the store holding the old one is first marked (the
// file "superseded" in the store directory, fsynced; it sits beside the
// indexes, so rebuilding them keeps it). Two requests that carry the same
// new slot at the same time cannot see each other in the indexes; the
// DB's pending set (each slot from its duplicate check until the indexer
// has indexed it) notices and marks the writable store instead. GetTrace
// and GetSpan read only the current version of each slot (the index keeps
// the latest entry of a store; stores are read newest first). Search skips
// a hit from a marked store whose slot has a newer entry (isSuperseded:
// one trace lookup in the store and in each newer store), so each slot is
// listed once, by its current version; unmarked stores, the common case,
// cost nothing extra. Each store keeps a Bloom filter of its trace ids
// (traceFilter: filled from the index in the background at open, then by
// the committer), so both checks skip the index lookup of a store that
// certainly does not hold the trace: a write of new traces pays a few
// hashes per store, not an index read per store. Old versions stay in their data files until
// retention removes the store, and still count in the stores' span
// counters.
//
// # Search
//
// DB.Search asks every store's metadata index for its newest hits (one per
// span, newest first; index.Index.Search) and merges them into pages of at
// most Query.Limit results, newest first; a cursor ("c1." + the position of
// the page's last result) continues after the page. In span mode every
// matching span is a result. In trace mode (the default of the API) every
// trace with a matching span is one result, represented by its newest
// matching span, whose position is the trace's position; following the
// cursors lists each trace exactly once over the whole walk of pages, in
// that order, even when the trace's spans are spread over several stores.
// A page after a cursor leaves out the traces an earlier page listed: the
// cursor's own trace and those with a matching span newer than the cursor
// in any store. It finds them from the trace's own index entries
// (index.Matcher, one per store for the page; decisions cached per page,
// bounded), never by walking the query's earlier matches, so a page costs
// what the hits it walks cost. Pages are computed from each request's
// snapshot: a trace that gains a newer matching span while a client pages
// moves to an earlier page and is not listed again.
//
// Stores are asked latest first, and a sealed store whose latest span
// start (its last.trace.ns) is older than limit+1 results already found is
// not asked at all: with stores in time order a page costs about one
// store's hits, not limit+1 hits of every store. Such a store's latest
// start bounds how far the page may walk, as a store with unread hits
// does. A store still taking writes or catching up is always asked. With
// Query.TraceHeads, each result's span count and root come from the
// entries the search already read in the hit's store
// (index.Index.SearchTraces) and a lookup in each other store whose trace
// filter does not rule the trace out; GetTrace skips such stores too.
//
// # Reads and buffer lifetimes
//
// A span is read through a view of its chunk (trace.ChunkView) kept in the
// chunk cache (cache.go): a local chunk stored as zstd frames is read and
// decompressed frame by frame (chunk.Frames: its string table's frame,
// then the frame of each span read), into payload buffers from a pool. A
// chunk whose first frame is an LZ4 lead frame (every chunk cut into
// frames since LZ4 lead frames) is read as its header and that frame,
// which lists the others, and then the frame of each span read, each
// frame checked by its own checksum. Of a chunk written before (zstd
// frames only), the first read reads the whole chunk and checks its CRC,
// and keeps the frame layout it learnt in the layout cache; a later read
// of it is then read frame by frame as above.
// Every string of a span read from a view points into the view's string
// table, so the buffers may be reused only when no span read from the
// view is in use. A view counts its holders (cachedView): the cache while
// it keeps it, and each read while it uses it. GetTrace, GetSpan and
// Search hand their spans to callers who may keep them: they pin the
// view, whose buffers are then never reused (the garbage collector frees
// them). ReadTrace (the get handler) calls the caller's function with the
// spans and lets go of its views when it returns: a view no read pinned
// gives its buffers back to the pool when its last holder lets go (at 10M
// spans, almost every get's view leaves the cache 256 gets later).
//
// # Damage
//
// A damaged chunk costs only its own spans. A read (Search, GetTrace,
// GetSpan) that meets a chunk whose checksum, framing or payload is bad
// skips it and names it in the answer's warnings (store, offset, error):
// a search page keeps walking past it, a trace answers the spans left. The
// DB logs each damaged chunk once, counts it (DamagedChunks, the
// ztsd_damaged_chunks_total metric) and does not read it again. An I/O
// error is not damage: the request fails.
//
// A store that does not open (a damaged ZTS0 header, config.props, Pebble
// MANIFEST/OPTIONS or table) costs only itself: Open takes it out of
// service and opens the others. When its data file is intact (a valid
// header that agrees with config.props, this format version), its indexes
// are deleted and rebuilt from the data file in the background (a
// damaged config.props is first rewritten from the header, the old bytes
// kept in config.props.damaged), and it is added to the served set — sealed
// if a newer store exists. Otherwise it stays quarantined until `ztsctl
// recover` (or `ztsctl migrate`) and a restart. Degraded lists such
// stores with the reason; Stores includes them. An index found damaged by a
// read (a Pebble table failing its checksum in a block Open never read)
// is handled the same way at run time: the read leaves that store out with
// a warning (offset 0: the store's indexes), and the store is taken out
// of the served set, rebuilt and served again.
//
// A store directory without traces.zts is deleted only when it is provably
// an interrupted creation (nothing but a config.props saying open with no
// chunks); otherwise it is renamed to <id>.orphaned-<unix time>, never
// deleted, and reported by Degraded at every start until the operator
// moves it.
//
// # Full disk
//
// Writes are refused (ENOSPC, 503 disk_full) while the file system has
// less than a reserve free (space.go). Open on a file system with almost
// nothing free opens read-only instead of letting Pebble fail (ReadOnly
// says why): reads serve every store (one whose indexes on disk lag is
// indexed in memory for the run), writes fail with "disk full: read-only
// since start". Close skips the index flush when the
// disk has no room and abandons a flush or Pebble close still running at
// its deadline (CloseTimeout): the indexes are rebuilt from the data file
// past their watermarks at the next start (readonly.go).
//
// # Restart: catching up
//
// Opening a store re-indexes the data file past its indexes' watermarks
// (catchUp). A lag of at most syncCatchUpBytes (2 MiB, a fraction of a
// second) is re-indexed before Open returns. A larger one — a kill -9
// after a long run whose index writes Pebble had not flushed, or deleted
// indexes — does not hold the start: the store serves at once what its
// indexes hold and is re-indexed in the background (catchup.go). While it
// catches up, reads that use it name it in their warnings ("catching up",
// the watermark and the bytes left), GET /healthz answers "catching_up"
// listing it, and it takes no writes: the first write creates a new store,
// whose reads wait for the indexer as always, so read-your-writes holds. It is marked superseded first (a retried write may store again a
// span its lagging part holds; search lists such a span once). When done
// it flushes its indexes (the work persists), becomes the current store
// again if no newer store was created, else is sealed (sealing waits for
// the torn-tail cut). A store being rebuilt out of service (quarantine)
// re-indexes fully before it serves again, as before.
//
// # Crash during re-indexing
//
// The re-indexing on open indexes runs of consecutive chunks (up to
// catchUpBatchSpans spans) with one IndexChunks call each, as the write
// path does a group commit's chunks. It (synchronous or in the background) flushes both
// indexes every 32 MiB of data file (a checkpoint of their watermarks), so
// a crash during it costs at most that much re-indexing again, not the
// whole replay.
//
// # Remote stores
//
// A sealed store uploaded to an S3-compatible bucket (package objstore:
// <prefix>/<node>/<store id>/<generation>/<file>, manifest.json last) can
// be served from there (remote.go). ServeRemote(ctx, bucket, manifest)
// adds one (idempotent per node and store id; another generation replaces
// the one served); DropRemote removes it; DropLocalCopy(id, manifest)
// switches a sealed local store to its uploaded copy (which must match
// the local data file's size and master checksum), then deletes the local
// directory as retention does (.deleting-<id> first). Stores lists remote
// stores with Location "remote", Node and Generation; answers and logs
// name them node/id ("web-1/00002a"), since ids collide across nodes.
// Options.QueryOnly opens no local store: Append fails with ErrQueryOnly.
//
// What stays in memory per remote store is its manifest (time range,
// counters, file list) and, once read, its tracefilter object. Reads see
// remote stores in the same newest-first snapshot as local ones: the store
// taking writes first, then local stores and this node's remote stores
// (RemoteOptions.Node) by id descending, the order versions rely on, with
// other nodes' stores merged in by their newest span.
//
// An upload made by CopySealed carries two objects for remote reading
// (remotefilter.go): tracefilter (a Bloom filter of the store's trace ids,
// its chunk bounds, and the first trace id of each block of tracedir) and
// tracedir (per trace id, the offsets of the chunks holding it, in 4 KiB
// blocks). A get-by-id of a remote store then needs no index: the filter
// rules the store out, or one ranged GET of a directory block (kept in a
// small LRU of blocks) names the chunks, and each chunk is one ranged GET
// of exactly its bytes (readChunk), whose spans of the trace become the
// index entries (the last one of each span chunk wins, as in the index).
// Cold, that is 3 GETs (tracefilter, block, chunk); warm, one per chunk.
// Without these objects a get downloads the store's indexes, and a chunk
// read fetches its header and a 64 KiB read-ahead (a larger chunk costs a
// second GET).
//
// Searches, attribute listings and Append's duplicate check use the
// indexes (meta/, text/): downloaded on first use into
// RemoteOptions.CacheDir/indexes, several stores at once, every file
// checked against the manifest's size and SHA-256, and opened read-only;
// the cache is emptied at Open. A search skips a remote store whose time
// range misses the query's; the duplicate check looks only at remote
// stores with a trace filter and never fails a write for a bucket error.
// A superseded span is marked in memory for a remote store; a search that
// leaves a remote store out by its time range does not see a newer
// version stored there.
//
// The cache is bounded by RemoteOptions.CacheMaxSize bytes, LRU over
// stores: when a reader releases its snapshot, the least recently used
// stores that no reader holds (their refs taken exclusively without
// waiting) have their Pebble handles closed and files deleted until the
// cache is within its bound. A request holds every store of its snapshot,
// so the cache exceeds the bound while requests that need more run, and
// shrinks when they end. A damaged remote chunk is a warning, as a local
// one; a missing or mismatching object fails the request with an error
// naming its key; a remote index found damaged leaves the store out of
// that answer and drops its cached copy. RemoteStats counts GETs, bytes
// downloaded (index, chunk), cache hits, misses, evictions and bytes (the
// ztsd_remote_* metrics).
//
// # Invariants
//
//   - Everything in meta/ and text/ is derived from traces.zts. Each index
//     records a watermark: the data-file offset up to which it is complete,
//     committed in the same Pebble batch as the entries it covers.
//   - Text ids are assigned in data-file order by one deterministic function
//     (internSpan), so rebuilding text/ alone yields the same ids meta/ uses.
//     If either index claims more than the data file holds (its watermark is
//     past the end), both are rebuilt from offset 0.
//   - Opening a store re-indexes from the lower watermark to the end of the
//     data file (in the background when that is more than a moment's work);
//     an index entry only ever names a whole chunk of the data file whose
//     checksum validated, made durable (the data file is fsynced before
//     the re-indexing, as the write path fsyncs before it indexes). A torn tail (an incomplete or corrupt last chunk that no
//     valid chunk follows) is cut, and the cut bytes are appended to
//     traces.zts.broken, never silently discarded. A zero tail (the
//     preallocated zeros after the last chunk, left by a crash) is the
//     end of the data: the next append goes at its start (chunk.File.SetEnd)
//     and nothing is cut; it does not count as index lag. Sealing and
//     closing a store truncate its data file to its last chunk. A bad chunk
//     in the middle is skipped and logged; `ztsctl verify` names it.
//   - Only the newest store is open for writes. Sealing flushes, fsyncs,
//     writes the master checksum and then state=sealed in config.props
//     (atomic replace). Retention renames a sealed store to .deleting-NNNNNN
//     before removing it; leftovers are removed at start-up.
package storedir
