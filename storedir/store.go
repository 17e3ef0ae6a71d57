package storedir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble"
	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/recovery/indexswap"
	"github.com/ztsd/ztsd/textindex"
	"github.com/ztsd/ztsd/trace"
)

// FormatVersion is the store format this code writes (config.props
// format_version). Migration upgrades older ones.
const FormatVersion = 1

// File and directory names inside a store directory.
const (
	propsFile   = "config.props"
	dataFile    = "traces.zts"
	brokenFile  = "traces.zts.broken"
	metaDir     = "meta"
	textDir     = "text"
	storeDigits = 6
)

// StoreName returns the directory name of store id: six lower-case hex digits.
func StoreName(id uint32) string { return fmt.Sprintf("%06x", id) }

// ParseStoreName parses a store directory name; ok is false for anything else.
func ParseStoreName(name string) (uint32, bool) {
	if len(name) != storeDigits {
		return 0, false
	}
	for _, c := range name {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(name, 16, 32)
	return uint32(v), err == nil
}

// Store is one store directory, open.
type Store struct {
	id   uint32
	dir  string
	log  *slog.Logger
	data *chunk.File
	meta *index.Index
	text *textindex.Index
	// indexCache is the block cache meta and text are opened with (shared
	// by the DB's stores; nil: their own).
	indexCache *pebble.Cache
	// settleMinL0 is the least L0 an index settles at close (settleIndexes).
	settleMinL0 uint64
	// chunkIndexer indexes the chunks written to the store and those its
	// catch-up replays; it keeps the strings interned (released at seal).
	chunkIndexer ChunkIndexer

	// refs guards against closing a store (retention) while readers use it:
	// readers hold it shared, close takes it exclusively.
	refs sync.RWMutex
	// closed is set by close (refs held exclusively): the indexer, which
	// holds refs shared, skips jobs of a store closed meanwhile.
	closed bool

	mu      sync.Mutex // guards props and the counters below
	props   config.StoreProps
	firstNS int64
	lastNS  int64
	spans   int64
	chunks  int64
	// syncFailed is set when an fsync of the data file failed: what the
	// kernel dropped cannot be known, so the store takes no more writes
	// (the committer rotates to a new one).
	syncFailed bool
	// indexFailed is set by the indexer when indexing written chunks
	// failed: it indexes nothing more of the store, so that the
	// watermarks stay below the chunks it missed and the next open
	// re-indexes them, and the committer rotates to a new store.
	indexFailed atomic.Bool

	// superseded: some span chunk stored here has a newer version (the
	// supersededFile mark); supersedeMu serializes writing the mark.
	superseded  atomic.Bool
	supersedeMu sync.Mutex
	// readOnly: opened on a full disk (indexes read-only, no catch-up).
	readOnly bool
	// pulled: a read found an index damaged; the store is being taken out
	// of service (DB.indexDamaged), once.
	pulled atomic.Bool

	// filter rules trace ids out of the store (see traceFilter);
	// filterCancel (guarded by mu) stops the scan that fills it.
	filter       atomic.Pointer[traceFilter]
	filterCancel context.CancelFunc

	// catching: the indexes lag the data file and are being brought up to
	// it in the background (catchup.go); reads of the lagging part miss
	// and say so. catchUpCancel (guarded by mu) stops that work;
	// catchUpFailed (guarded by mu) says why it stopped short.
	catching      atomic.Bool
	catchUpCancel context.CancelFunc
	catchUpFailed string
	// memCancel (guarded by mu) stops the release of the indexes'
	// memtables after a seal (DB.releaseMemTables).
	memCancel context.CancelFunc

	// remote is set for a store read from a bucket (remote.go): data is
	// nil, meta and text are nil until its indexes are cached.
	remote *remoteStore
}

// ID is the store number.
func (s *Store) ID() uint32 { return s.id }

// Dir is the store directory.
func (s *Store) Dir() string { return s.dir }

// Sealed reports whether the store no longer takes writes.
func (s *Store) Sealed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.props.State == stateSealed
}

const (
	stateOpen   = "open"
	stateSealed = "sealed"
)

// storeOptions are the parts of Options a single store needs.
type storeOptions struct {
	fs     chunk.FS
	chunk  chunk.Options
	limits trace.Limits
	log    *slog.Logger
	now    func() time.Time
	// checkpoint is how many data-file bytes catchUp re-indexes between
	// flushes of the indexes (replayCheckpointBytes unless a test sets it).
	checkpoint int64
	// readOnly opens the store without writing anything (a full disk).
	readOnly bool
	// replayed, when set, is called after each chunk catchUp re-indexes
	// with the offset just past it (tests crash the process there).
	replayed func(next int64)
	// maxStoreSize sizes the trace filter of a store taking writes.
	maxStoreSize int64
	// syncCatchUp is the largest index lag openStore re-indexes before it
	// returns; a store lagging more opens at once and is caught up in the
	// background (syncCatchUpBytes unless a test sets it; negative: every
	// lag goes to the background).
	syncCatchUp int64
	// catchUpBatch is how many spans catchUp indexes per batch at most
	// (catchUpBatchSpans unless a test sets it).
	catchUpBatch int
	// indexCache is the block cache the store's indexes share with the
	// other stores' (nil: each index has its own).
	indexCache *pebble.Cache
	// settleMinL0 is the least L0 an index settles at close
	// (settleIndexMinL0 unless a test sets it).
	settleMinL0 uint64
}

func (o storeOptions) settleMinL0Bytes() uint64 {
	if o.settleMinL0 == 0 {
		return settleIndexMinL0
	}
	return o.settleMinL0
}

// replayCheckpointBytes is how much of the data file catchUp re-indexes
// between checkpoints: the indexes have no WAL, so without a flush a crash
// during the replay loses all of it and the next open replays it again.
// A flush every 32 MiB bounds what a second crash costs to about that much
// re-indexing (a fraction of a second) for a few flushes per GiB.
const replayCheckpointBytes = 32 << 20

// catchUpBatchSpans is how many spans catchUp indexes in one batch (one
// commit per index) at most, as `ztsctl recover` does.
const catchUpBatchSpans = 16 << 10

// createStore makes a new, empty store directory.
func createStore(dir string, id uint32, opt storeOptions) (*Store, error) {
	if err := os.Mkdir(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	// A store that could not be created whole (a full disk) is removed, so
	// that the next rotation can create it again under the same id.
	created := false
	defer func() {
		if !created {
			os.RemoveAll(dir)
		}
	}()
	props := config.StoreProps{
		FormatVersion: FormatVersion,
		Compression:   opt.chunk.Compression.String(),
		Checksums:     opt.chunk.Checksums,
		Created:       opt.now().UTC(),
		State:         stateOpen,
	}
	if err := config.WritePropsFileAtomic(filepath.Join(dir, propsFile), props.ToProps()); err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	data, err := chunk.CreateFS(opt.fs, filepath.Join(dir, dataFile), opt.chunk)
	if err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		data.Close()
		return nil, err
	}
	s := &Store{id: id, dir: dir, log: opt.log.With("store", StoreName(id)), data: data, props: props, indexCache: opt.indexCache,
		settleMinL0: opt.settleMinL0Bytes()}
	if err := s.openIndexes(false); err != nil {
		data.Close()
		return nil, err
	}
	f := newStoreFilter(0, false, opt.maxStoreSize)
	f.ready.Store(true) // empty: the committer adds every trace it indexes
	s.filter.Store(f)
	created = true
	return s, nil
}

// openStore opens an existing store directory, cuts a torn tail and brings
// both indexes up to the end of the data file.
func openStore(ctx context.Context, dir string, id uint32, opt storeOptions) (*Store, error) {
	log := opt.log.With("store", StoreName(id))
	// Finish (or discard) an index rebuild that `ztsctl recover` did not
	// complete, before the indexes are opened.
	if out, err := indexswap.FinishInterrupted(dir); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	} else if out != indexswap.Clean {
		log.Warn("finished an interrupted index rebuild", "outcome", out.String())
	}
	propsPath := filepath.Join(dir, propsFile)
	if removed, err := config.RemoveStaleTemps(propsPath); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	} else if len(removed) > 0 {
		log.Info("removed temp files of an interrupted config.props update", "files", removed)
	}
	var props config.StoreProps
	p, err := config.ReadPropsFile(propsPath)
	switch {
	case err == nil:
		props, err = config.StorePropsFrom(p)
		if err != nil {
			return nil, fmt.Errorf("store %s: %s: %w", dir, propsFile, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		// The data file is the source of truth; config.props is rebuilt.
		log.Warn("config.props missing; rebuilding it from the data file")
		props = config.StoreProps{FormatVersion: FormatVersion, State: stateOpen, Created: opt.now().UTC()}
	default:
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if props.FormatVersion > FormatVersion {
		return nil, fmt.Errorf("store %s: format version %d is newer than this ztsd supports (%d)", dir, props.FormatVersion, FormatVersion)
	}
	if props.FormatVersion < FormatVersion {
		return nil, fmt.Errorf("store %s: format version %d is older than %d: run `ztsctl migrate`", dir, props.FormatVersion, FormatVersion)
	}
	dataPath := filepath.Join(dir, dataFile)
	data, err := chunk.OpenFS(opt.fs, dataPath)
	if errors.Is(err, chunk.ErrTornHeader) && !opt.readOnly {
		// A crash while the file was being created: nothing in it can be
		// a chunk. Keep its bytes in .broken and start it afresh.
		var moved int64
		data, moved, err = chunk.ReinitializeFS(opt.fs, dataPath, opt.chunk, filepath.Join(dir, brokenFile))
		if err == nil {
			log.Warn("data file had a torn header; re-initialised it", "bytes_kept_in", brokenFile, "bytes", moved)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	// A header whose options disagree with config.props has a flipped bit:
	// read with the wrong options every chunk would look corrupt and be cut
	// as a torn tail. Refuse to open; `ztsctl recover` repairs the header.
	if c, perr := chunk.ParseCompression(props.Compression); perr == nil {
		if want := (chunk.Options{Compression: c, Checksums: props.Checksums}); data.Options() != want {
			data.Close()
			return nil, fmt.Errorf("store %s: the data file header says %v but config.props says %v: %w (run `ztsctl recover`)",
				dir, data.Options(), want, chunk.ErrBadHeader)
		}
	}
	s := &Store{id: id, dir: dir, log: log, data: data, props: props, indexCache: opt.indexCache, settleMinL0: opt.settleMinL0Bytes(),
		firstNS: props.FirstTraceNS, lastNS: props.LastTraceNS, chunks: props.Chunks, readOnly: opt.readOnly}
	if props.Compression == "" {
		s.props.Compression = data.Options().Compression.String()
		s.props.Checksums = data.Options().Checksums
	}
	s.loadSuperseded()
	if opt.readOnly {
		// A full disk: nothing may be written. Indexes on disk that cover
		// the data file are opened read-only; otherwise (an index the
		// daemon had not flushed when it stopped) both are built in
		// memory from the data file, for as long as this run lasts.
		if err := s.openIndexesReadOnly(); err == nil && s.indexesCover(data.Size()-data.ZeroTail()) {
			return s, nil
		} else if err == nil {
			s.meta.Close()
			s.text.Close()
		}
		start := time.Now()
		if err := s.openIndexesInMemory(); err != nil {
			data.Close()
			return nil, err
		}
		if err := s.catchUp(ctx, opt); err != nil {
			s.close()
			return nil, err
		}
		log.Warn("read-only start: the indexes on disk lag the data file; indexed it in memory for this run",
			"data_bytes", data.Size(), "took", time.Since(start).Round(time.Millisecond))
		return s, nil
	}
	// A sealed store's indexes take few writes more (a catch-up of what a
	// crash lost): they open Settled, as its seal reopened them.
	if err := s.openIndexes(s.Sealed()); err != nil {
		data.Close()
		return nil, err
	}
	if lag, err := s.indexLag(); err != nil {
		s.close()
		return nil, err
	} else if lag > opt.syncCatchUpLimit() {
		// Serve at once: the DB re-indexes the lag in the background
		// (startCatchUp). No trace filter until then: one that is not
		// ready rules nothing out.
		s.catching.Store(true)
		log.Info("the indexes lag the data file: serving now, re-indexing the rest in the background", "lag_bytes", lag)
		return s, nil
	}
	if err := s.catchUp(ctx, opt); err != nil {
		s.close()
		return nil, err
	}
	// Filled from the index by fillFilter; the committer adds from here on.
	s.filter.Store(newStoreFilter(s.meta.Stats().Traces, s.Sealed(), opt.maxStoreSize))
	return s, nil
}

// openIndexes opens the store's indexes, Settled (kv.OpenOptions.Settled)
// or for the writes of a store taking them or of a rebuild.
func (s *Store) openIndexes(settled bool) error {
	if s.readOnly {
		return s.openIndexesReadOnly()
	}
	var err error
	s.meta, err = index.Open(filepath.Join(s.dir, metaDir), index.Options{Cache: s.indexCache, Settled: settled})
	if err != nil {
		return fmt.Errorf("store %s: metadata index: %w", s.dir, err)
	}
	s.text, err = textindex.Open(filepath.Join(s.dir, textDir), textindex.Options{Cache: s.indexCache, Settled: settled})
	if err != nil {
		s.meta.Close()
		return fmt.Errorf("store %s: text index: %w", s.dir, err)
	}
	return nil
}

func (s *Store) openIndexesReadOnly() error {
	var err error
	s.meta, err = index.OpenReadOnly(filepath.Join(s.dir, metaDir), index.Options{Cache: s.indexCache})
	if err != nil {
		return fmt.Errorf("store %s: metadata index (read-only): %w", s.dir, err)
	}
	s.text, err = textindex.OpenReadOnly(filepath.Join(s.dir, textDir), textindex.Options{Cache: s.indexCache})
	if err != nil {
		s.meta.Close()
		return fmt.Errorf("store %s: text index (read-only): %w", s.dir, err)
	}
	return nil
}

// indexesCover reports whether both indexes cover the data file up to size.
func (s *Store) indexesCover(size int64) bool {
	mw, err1 := s.meta.Watermark()
	tw, err2 := s.text.Watermark()
	return err1 == nil && err2 == nil && max(min(mw, tw), chunk.HeaderSize) >= size
}

// openIndexesInMemory opens empty indexes held in memory only.
func (s *Store) openIndexesInMemory() error {
	var err error
	s.meta, err = index.Open(filepath.Join(s.dir, metaDir), index.Options{InMemory: true})
	if err != nil {
		return fmt.Errorf("store %s: metadata index (in memory): %w", s.dir, err)
	}
	s.text, err = textindex.Open(filepath.Join(s.dir, textDir), textindex.Options{InMemory: true})
	if err != nil {
		s.meta.Close()
		return fmt.Errorf("store %s: text index (in memory): %w", s.dir, err)
	}
	return nil
}

// resetIndexes deletes both indexes and opens empty ones.
func (s *Store) resetIndexes() error {
	s.meta.Close()
	s.text.Close()
	for _, d := range []string{metaDir, textDir} {
		if err := os.RemoveAll(filepath.Join(s.dir, d)); err != nil {
			return fmt.Errorf("store %s: reset index %s: %w", s.dir, d, err)
		}
	}
	// Rebuilt from the data file: opened for writes, and reopened Settled
	// once rebuilt (releaseMemTables).
	return s.openIndexes(false)
}

// checkWatermarks returns both indexes' watermarks. If either claims more
// than the data file holds, both indexes are deleted and rebuilt from 0:
// their entries could name chunks that are not there.
func (s *Store) checkWatermarks() (metaWM, textWM int64, err error) {
	size := s.data.Size()
	metaWM, err = s.meta.Watermark()
	if err != nil {
		return 0, 0, fmt.Errorf("store %s: %w", s.dir, err)
	}
	textWM, err = s.text.Watermark()
	if err != nil {
		return 0, 0, fmt.Errorf("store %s: %w", s.dir, err)
	}
	if metaWM > size || textWM > size {
		s.log.Warn("an index claims more than the data file holds; rebuilding both",
			"meta_watermark", metaWM, "text_watermark", textWM, "data_size", size)
		if err := s.resetIndexes(); err != nil {
			return 0, 0, err
		}
		metaWM, textWM = 0, 0
	}
	return metaWM, textWM, nil
}

// indexLag is how many data-file bytes the lower watermark leaves
// unindexed (after checkWatermarks).
func (s *Store) indexLag() (int64, error) {
	metaWM, textWM, err := s.checkWatermarks()
	if err != nil {
		return 0, err
	}
	// A zero tail (preallocated, chunk.File.ZeroTail) holds nothing to index.
	return max(0, s.data.Size()-s.data.ZeroTail()-max(min(metaWM, textWM), chunk.HeaderSize)), nil
}

// catchUp cuts a torn tail and re-indexes the chunks past the watermarks.
// Every opt.checkpoint bytes it flushes both indexes, so the watermarks
// it reached survive a crash during the replay.
func (s *Store) catchUp(ctx context.Context, opt storeOptions) error {
	lim := opt.limits
	checkpoint := opt.checkpoint
	if checkpoint <= 0 {
		checkpoint = replayCheckpointBytes
	}
	size := s.data.Size()
	metaWM, textWM, err := s.checkWatermarks()
	if err != nil {
		return err
	}
	from := min(metaWM, textWM)
	if from < chunk.HeaderSize {
		from = chunk.HeaderSize
	}
	if from < size && !opt.readOnly {
		// The chunks past the watermarks may still be only in the page
		// cache (a kill -9 is not a power loss): make them durable before
		// any index entry names them.
		if err := s.data.Sync(); err != nil {
			return fmt.Errorf("store %s: %w", s.dir, err)
		}
	}
	start := time.Now()
	sc := s.data.Scanner()
	sc.SetOffset(from)
	indexed, checkpoints := 0, 0
	lastCheckpoint := from
	var tail *chunk.BadRegion
	// Consecutive chunks are indexed together (IndexChunks: one commit per
	// index per batch, the entries and text ids those of chunk by chunk):
	// a batch ends at a gap (a chunk skipped), where the indexes that are
	// behind change, at batchSpans spans, and before a checkpoint.
	batchSpans := opt.catchUpBatch
	if batchSpans <= 0 {
		batchSpans = catchUpBatchSpans
	}
	var pending []ChunkSpans
	var pendingMeta, pendingText bool
	nspans := 0
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := s.indexChunksFor(pending, pendingMeta, pendingText); err != nil {
			return err
		}
		indexed += len(pending)
		if opt.replayed != nil {
			for _, c := range pending {
				opt.replayed(c.Next)
			}
		}
		clear(pending)
		pending, nspans = pending[:0], 0
		return nil
	}
	for sc.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		off, payload := sc.Chunk()
		spans, err := trace.DecodeChunk(payload, lim)
		if err != nil {
			s.log.Error("chunk payload does not decode; skipping it (run `ztsctl verify`)", "offset", off, "err", err)
			continue
		}
		doMeta, doText := off >= metaWM, off >= textWM
		if n := len(pending); n > 0 && (pending[n-1].Next != off || doMeta != pendingMeta || doText != pendingText) {
			if err := flush(); err != nil {
				return err
			}
		}
		pending = append(pending, ChunkSpans{Off: off, Next: sc.Offset(), Spans: spans})
		pendingMeta, pendingText = doMeta, doText
		nspans += len(spans)
		atCheckpoint := sc.Offset()-lastCheckpoint >= checkpoint
		if nspans >= batchSpans || atCheckpoint {
			if err := flush(); err != nil {
				return err
			}
		}
		if atCheckpoint {
			// Checkpoint: the watermarks committed with these chunks
			// reach the disk.
			if err := s.flushIndexes(); err != nil {
				return err
			}
			lastCheckpoint = sc.Offset()
			checkpoints++
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("store %s: scan from %d: %w", s.dir, from, err)
	}
	for _, br := range sc.BadRegions() {
		br := br
		if br.Offset+br.Length >= size {
			tail = &br
			continue
		}
		s.log.Error("bad region in data file skipped (run `ztsctl verify`)", "offset", br.Offset, "length", br.Length, "reason", br.Reason.String())
	}
	if tail != nil && opt.readOnly {
		s.log.Warn("read-only start: a torn tail of the data file is left in place (cut at the next start with free space)", "offset", tail.Offset)
	} else if tail != nil {
		moved, err := s.data.TruncateTail(tail.Offset, filepath.Join(s.dir, brokenFile))
		if err != nil {
			return fmt.Errorf("store %s: cut torn tail at %d: %w", s.dir, tail.Offset, err)
		}
		s.log.Warn("cut torn tail of the data file", "offset", tail.Offset, "bytes", moved, "reason", tail.Reason.String(), "kept_in", brokenFile)
		if err := s.setWatermarks(tail.Offset); err != nil {
			return err
		}
	} else if zoff, zlen := sc.ZeroTail(); zlen > 0 {
		// The zero tail the writer preallocated (chunk.PreallocStep): the
		// data ends where it starts, and the next append goes there.
		if err := s.data.SetEnd(zoff); err != nil {
			return fmt.Errorf("store %s: %w", s.dir, err)
		}
		if from < zoff {
			if err := s.setWatermarks(zoff); err != nil {
				return err
			}
		}
	} else if from < size {
		if err := s.setWatermarks(size); err != nil {
			return err
		}
	}
	if indexed > 0 {
		end := size
		if zoff, zlen := sc.ZeroTail(); zlen > 0 {
			end = zoff // the zeros after the data are not data
		}
		s.log.Info("re-indexed data file tail", "from", from, "bytes", end-from, "chunks", indexed,
			"checkpoints", checkpoints, "took", time.Since(start))
	}
	return nil
}

func (s *Store) setWatermarks(off int64) error {
	mb := s.meta.NewBatch()
	mb.SetWatermark(off)
	if err := mb.Commit(); err != nil {
		return fmt.Errorf("store %s: metadata watermark: %w", s.dir, err)
	}
	tb := s.text.NewBatch()
	tb.SetWatermark(off)
	if err := tb.Commit(); err != nil {
		return fmt.Errorf("store %s: text watermark: %w", s.dir, err)
	}
	return nil
}

// indexChunks adds consecutive chunks written by one group commit to both
// indexes in one batch each (IndexChunks) and updates the counters.
func (s *Store) indexChunks(chunks []ChunkSpans) error {
	return s.indexChunksFor(chunks, true, true)
}

// indexChunksFor is indexChunks into the indexes that are behind the
// chunks (doMeta, doText: see IndexChunks), for the re-indexing on open.
func (s *Store) indexChunksFor(chunks []ChunkSpans, doMeta, doText bool) error {
	for _, c := range chunks {
		s.filterIndexed(c.Spans) // before the entries can be found
	}
	if err := s.chunkIndexer.IndexChunks(s.meta, s.text, chunks, doMeta, doText); err != nil {
		return fmt.Errorf("store %s: %w", s.dir, err)
	}
	for _, c := range chunks {
		s.counted(c.Spans, 1)
	}
	return nil
}

// counted adds spans stored in n chunks to the store's counters.
func (s *Store) counted(spans []*trace.Span, n int64) {
	s.mu.Lock()
	for _, sp := range spans {
		if s.firstNS == 0 || sp.StartNS < s.firstNS {
			s.firstNS = sp.StartNS
		}
		if sp.StartNS > s.lastNS {
			s.lastNS = sp.StartNS
		}
	}
	s.spans += int64(len(spans))
	s.chunks += n
	s.mu.Unlock()
}

// ChunkSpans is one stored chunk for IndexChunks: its data-file offset,
// where the next chunk starts, and its spans in payload order.
type ChunkSpans struct {
	Off, Next int64
	Spans     []*trace.Span
}

// IndexChunk adds the spans of the chunk at data-file offset off (the next
// chunk starts at next) to meta (when doMeta) and text (when doText), and
// moves their watermarks to next. It is the one function that turns
// stored spans into index entries — the write path, the catch-up on open
// and `ztsctl recover` all use it (or IndexChunks, its batched form) — so
// text ids come out the same whichever of them built an index. With doText
// false, text must already hold the chunk's strings (its watermark is past
// off).
func IndexChunk(meta *index.Index, text *textindex.Index, off, next int64, spans []*trace.Span, doMeta, doText bool) error {
	return IndexChunks(meta, text, []ChunkSpans{{Off: off, Next: next, Spans: spans}}, doMeta, doText)
}

// IndexChunks is IndexChunk for consecutive chunks of one data file (each
// chunk's Off is the previous one's Next), with one batch per index for all
// of them: the entries and text ids are exactly those of calling IndexChunk
// chunk by chunk, the watermarks move to the last chunk's Next, and the
// indexes pay one commit (and one merge operand per posting key) instead
// of one per chunk.
func IndexChunks(meta *index.Index, text *textindex.Index, chunks []ChunkSpans, doMeta, doText bool) error {
	return indexChunks(nil, meta, text, chunks, doMeta, doText)
}

// ChunkIndexer is IndexChunks for a writer that indexes chunk after chunk
// into the same indexes (a store's indexer and catch-up, `ztsctl
// recover`): it keeps the text ids of the strings it interned from one
// call to the next (see interner), so that a string the store repeats
// (method names, attribute keys, low-cardinality values) costs one map
// lookup, not a text index lookup per call. The entries, the text ids and
// the order in which new strings get theirs are exactly IndexChunks'. The
// zero value is ready to use; calls are serialized.
type ChunkIndexer struct {
	mu sync.Mutex
	in *interner // nil until the first call, and after Release
}

// IndexChunks is the package's IndexChunks, keeping the interned strings.
func (x *ChunkIndexer) IndexChunks(meta *index.Index, text *textindex.Index, chunks []ChunkSpans, doMeta, doText bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.in == nil {
		x.in = &interner{}
		n := 0
		for _, c := range chunks {
			n += len(c.Spans)
		}
		if n >= internerPresizeSpans {
			x.in.ids = make(map[string]int32, internerMaxTexts)
		}
	}
	return indexChunks(x.in, meta, text, chunks, doMeta, doText)
}

// internerPresizeSpans is the group size from which a ChunkIndexer's first
// call sizes its interner's map for internerMaxTexts strings at once
// (~14 MB, within the interner's bound): a writer of large groups (batched
// ingest, a catch-up, a rebuild) fills it to that bound, and growing it
// there step by step rehashed every string at each doubling, ~0.1 s of CPU
// per store (~2% of the CPU of storing 300k spans of batched records). A
// writer of small groups (unbatched clients, tests) lets it grow.
const internerPresizeSpans = 256

// Release drops the kept strings (a sealed store indexes nothing more).
func (x *ChunkIndexer) Release() {
	x.mu.Lock()
	x.in = nil
	x.mu.Unlock()
}

// indexChunks is IndexChunks with the interner in (nil: one for this call).
func indexChunks(in *interner, meta *index.Index, text *textindex.Index, chunks []ChunkSpans, doMeta, doText bool) error {
	if len(chunks) == 0 {
		return nil
	}
	off, next := chunks[0].Off, chunks[len(chunks)-1].Next
	for i := 1; i < len(chunks); i++ {
		if chunks[i].Off != chunks[i-1].Next {
			// A gap would move the watermarks over chunks never indexed.
			return fmt.Errorf("index chunks: chunk %d at offset %d does not follow the chunk ending at %d", i, chunks[i].Off, chunks[i-1].Next)
		}
	}
	tb := text.NewBatch()
	var mb *index.Batch
	if doMeta {
		mb = meta.NewBatch()
	}
	nspans := 0
	for _, c := range chunks {
		nspans += len(c.Spans)
	}
	if in == nil {
		// Its map holds the group's distinct strings: a few per span
		// (spans repeat keys and most values), and it grows when a group
		// has more.
		in = newInterner(text, min(1024, 4*nspans))
	}
	in.begin(text, tb)
	entries := make([]index.SpanEntry, 0, nspans)
	for _, c := range chunks {
		for i, sp := range c.Spans {
			e := index.SpanEntry{
				TraceID:    sp.TraceID,
				SpanID:     uint64(sp.SpanID),
				ParentID:   uint64(sp.ParentID),
				ChunkNum:   sp.ChunkNum,
				StartNS:    sp.StartNS,
				DurationNS: sp.DurationNS,
				Error:      sp.Error, // the flag only: errors counted without it (caught exceptions) are no failure
				Loc:        index.Location{ChunkOffset: c.Off, Index: uint32(i)},
			}
			in.internSpan(sp, &e)
			if mb != nil {
				entries = append(entries, e)
			}
		}
	}
	// Every text id is assigned by now: the text batch commits while the
	// metadata batch is built and committed, on two cores. The two indexes
	// are separate databases with their own watermarks; whichever commit a
	// crash loses is redone from the data file on the next open, and text
	// ids come out the same (data-file order).
	textErr := make(chan error, 1)
	if doText {
		go func() {
			tb.SetWatermark(next)
			if err := tb.Commit(); err != nil {
				textErr <- fmt.Errorf("text index at chunk %d: %w", off, err)
				return
			}
			textErr <- nil
		}()
	} else {
		textErr <- nil
	}
	var metaErr error
	if mb != nil {
		mb.Grow(len(entries))
		for _, e := range entries {
			mb.AddDistinctSpan(e) // the interner listed each text and pair once
		}
		mb.SetWatermark(next)
		if err := mb.Commit(); err != nil {
			metaErr = fmt.Errorf("metadata index at chunk %d: %w", off, err)
		}
	}
	err := errors.Join(<-textErr, metaErr)
	// The interner keeps only ids the text index holds: the new strings'
	// ids are the index's once the text batch is committed, and are
	// handed out again if it is not.
	in.end(err == nil && (doText || tb.Len() == 0))
	return err
}

// interner interns the strings of spans into a text index batch. It
// remembers every id the batch returned, so that the strings spans repeat
// (method names, attribute keys, low-cardinality values) are looked up in
// the text index once; Batch.Intern is idempotent, so the ids, and the
// order in which new strings get theirs, are exactly those of calling it
// for every occurrence.
//
// A ChunkIndexer keeps its interner from one call to the next: the ids it
// remembers are then those of the strings the text index holds (end drops
// everything when a call's batch is not committed, and begin when the
// calls move to another text index or one that was emptied). It is
// bounded: when a call begins with more than internerMaxTexts strings or
// internerMaxBytes bytes of them remembered, it forgets them all and
// starts again (its map keeps its size); so it holds at most those bounds
// plus the distinct strings of one call, which an interner for a single
// call holds too. The strings it keeps are its own copies: a span's
// strings share one copy of their chunk's string table, which the
// interner must not keep alive.
//
// Each remembered string also carries the number of the last span that
// listed it, so one lookup per string both finds its id and says whether
// the span has it already. Consecutive spans tend to list the same strings
// in the same order (a request's resource attributes, the keys of one
// operation's attributes), so the interner first compares a string with
// the one the previous span listed at the same position, and looks it up
// in its map only when they differ. Numbers and booleans are formatted
// into a scratch buffer and looked up without allocating; only a new one
// becomes a string. The spans' Texts and Attrs are carved out of two
// shared arrays, not allocated per span.
type interner struct {
	text  *textindex.Index // the index the remembered ids are from
	count uint64           // its Count() when the last call ended
	tb    *textindex.Batch
	ids   map[string]int32 // index into texts
	texts []internedText
	bytes int    // of the strings in texts
	span  uint32 // number of the current span, from 1
	// maxTexts and maxBytes bound what it remembers between calls (0:
	// internerMaxTexts, internerMaxBytes).
	maxTexts, maxBytes int

	// prev and cur are the strings the previous and the current span
	// interned, in order, with their index into texts.
	prev, cur []internedAt
	scratch   []byte
	// addrs finds again, by its address, a string this call's spans gave
	// before (direct-mapped; cleared at the end of each call, while the
	// spans, and so the strings' bytes, are still alive): the spans of a
	// decoded chunk share one copy of its string table, so each repeat of
	// a string in a chunk is the same bytes, found without hashing them.
	addrs [1 << internAddrBits]internedAddr

	textArena []uint64
	attrArena []index.KV
}

// The bounds of what a ChunkIndexer's interner remembers between calls:
// with the map's and texts' overhead (about 70 bytes a string), at most
// about 18 MiB plus 16 MiB of strings.
const (
	internerMaxTexts = 1 << 18
	internerMaxBytes = 16 << 20
)

type internedText struct {
	s        string
	id       uint64
	lastSpan uint32 // the last span (interner.span) that listed it
}

type internedAt struct {
	s string
	i int32
}

// internAddrBits sizes interner.addrs: 1,024 slots, 16 KiB.
const internAddrBits = 10

// internedAddr is a string of n bytes at p, and its index into texts. Its
// pointer keeps those bytes alive, so no other string can take that
// address while the slot names it.
type internedAddr struct {
	p *byte
	n int32
	i int32
}

// newInterner sizes its map for about hint distinct strings: a group commit
// of a few small spans must not pay for clearing a map sized for a large one.
func newInterner(text *textindex.Index, hint int) *interner {
	return &interner{text: text, ids: make(map[string]int32, hint), texts: make([]internedText, 0, hint)}
}

// begin starts a call that interns into tb, a batch of text.
func (in *interner) begin(text *textindex.Index, tb *textindex.Batch) {
	maxTexts, maxBytes := internerMaxTexts, internerMaxBytes
	if in.maxTexts > 0 {
		maxTexts, maxBytes = in.maxTexts, in.maxBytes
	}
	if in.text != text || text.Count() < in.count || len(in.texts) > maxTexts ||
		in.bytes > maxBytes || in.span > math.MaxUint32-(1<<24) {
		in.forget()
		in.text = text
	}
	in.tb = tb
	in.prev, in.cur = in.prev[:0], in.cur[:0]
	// The arenas' ids become the entries of this call's metadata batch.
	in.textArena, in.attrArena = nil, nil
}

// end ends a call: kept says whether its batch's new strings are the text
// index's now (committed, or none), else the interner forgets everything.
func (in *interner) end(kept bool) {
	in.tb = nil
	in.textArena, in.attrArena = nil, nil
	// Nothing of the call's spans stays referenced.
	in.addrs = [len(in.addrs)]internedAddr{}
	clear(in.prev)
	clear(in.cur)
	in.prev, in.cur = in.prev[:0], in.cur[:0]
	if !kept {
		in.forget()
		return
	}
	in.count = in.text.Count()
}

// forget drops every remembered string.
func (in *interner) forget() {
	if in.ids == nil {
		in.ids = make(map[string]int32)
	}
	clear(in.ids)
	clear(in.texts)
	in.texts, in.bytes, in.span, in.count = in.texts[:0], 0, 0, 0
	in.prev, in.cur = in.prev[:0], in.cur[:0]
	in.addrs = [len(in.addrs)]internedAddr{}
}

// intern returns the text id of s and whether the current span listed it
// already.
func (in *interner) intern(s string) (uint64, bool) {
	if j := len(in.cur); j < len(in.prev) && in.prev[j].s == s {
		return in.listed(in.prev[j].i, s)
	}
	p := unsafe.StringData(s)
	slot := &in.addrs[uintptr(unsafe.Pointer(p))*0x9e3779b97f4a7c15>>(64-internAddrBits)]
	if slot.p == p && int(slot.n) == len(s) {
		return in.listed(slot.i, s)
	}
	i, ok := in.ids[s]
	if !ok {
		id, seen := in.add(s, false)
		*slot = internedAddr{p: p, n: int32(len(s)), i: int32(len(in.texts) - 1)}
		return id, seen
	}
	*slot = internedAddr{p: p, n: int32(len(s)), i: i}
	return in.listed(i, s)
}

// internBytes is intern for a string held in b (which it does not retain).
func (in *interner) internBytes(b []byte) (uint64, bool) {
	if j := len(in.cur); j < len(in.prev) && in.prev[j].s == string(b) {
		return in.listed(in.prev[j].i, in.prev[j].s)
	}
	if i, ok := in.ids[string(b)]; ok {
		return in.listed(i, in.texts[i].s)
	}
	return in.add(string(b), true)
}

// listed records that the current span lists texts[i] (whose string is s)
// and returns its id and whether the span listed it before.
func (in *interner) listed(i int32, s string) (uint64, bool) {
	t := &in.texts[i]
	seen := t.lastSpan == in.span
	t.lastSpan = in.span
	in.cur = append(in.cur, internedAt{s: s, i: i})
	return t.id, seen
}

// add interns s, which the interner has not seen; owned says that s is a
// string of its own (textindex.Batch.InternKept), else it keeps a copy.
func (in *interner) add(s string, owned bool) (uint64, bool) {
	if !owned {
		s = strings.Clone(s)
	}
	id := in.tb.InternKept(s)
	i := int32(len(in.texts))
	in.ids[s] = i
	in.bytes += len(s)
	in.texts = append(in.texts, internedText{id: id, lastSpan: in.span, s: s})
	in.cur = append(in.cur, internedAt{s: s, i: i})
	return id, false
}

// valueText appends the text of a scalar value v (trace.Value.Text) to
// dst, or returns the string itself for a string value.
func valueText(dst []byte, v trace.Value) (string, []byte) {
	switch v.Kind {
	case trace.KindString:
		return v.Str, nil
	case trace.KindInt:
		return "", strconv.AppendInt(dst, v.Int, 10)
	case trace.KindBool:
		return "", strconv.AppendBool(dst, v.Bool)
	}
	return v.Text(), nil
}

// arenaBlock is the most ids an arena grows by at once: the first holds
// 512 (256 attributes), each next one twice the last, so a group commit of
// one small span does not allocate and zero 64 KiB it does not use (a
// third of the daemon's allocations under 1-span requests).
const arenaBlock = 4096

// internSpan interns every searchable string of sp, in a fixed order, and
// fills e.Attrs and e.Texts.
func (in *interner) internSpan(sp *trace.Span, e *index.SpanEntry) {
	in.span++
	in.prev, in.cur = in.cur, in.prev[:0]
	if cap(in.textArena)-len(in.textArena) < 256 {
		in.textArena = make([]uint64, 0, min(max(2*cap(in.textArena), 512), arenaBlock))
	}
	if cap(in.attrArena)-len(in.attrArena) < 128 {
		in.attrArena = make([]index.KV, 0, min(max(2*cap(in.attrArena), 256), arenaBlock/2))
	}
	texts, attrs := in.textArena[len(in.textArena):], in.attrArena[len(in.attrArena):]
	addText := func(s string) (uint64, bool) {
		if s == "" {
			return 0, true
		}
		id, seen := in.intern(s)
		if !seen {
			texts = append(texts, id)
		}
		return id, seen
	}
	// Every record's scalar attributes are the span's attribute postings
	// too (each distinct pair once): `attr=db.statement:…` finds the span
	// whose JDBC call, however deep, carries it.
	addAttrs := func(as trace.Attrs) {
		for _, a := range as {
			k, kSeen := addText(a.Key)
			switch a.Value.Kind {
			case trace.KindList, trace.KindMap:
				continue
			}
			var v uint64
			var vSeen bool
			str, b := valueText(in.scratch[:0], a.Value)
			if b != nil {
				in.scratch = b
				// A formatted number is never empty.
				if v, vSeen = in.internBytes(b); !vSeen {
					texts = append(texts, v)
				}
			} else {
				v, vSeen = addText(str)
			}
			if k == 0 || v == 0 {
				continue
			}
			kv := index.KV{Key: k, Value: v}
			// A pair is new when either string is new to the span;
			// otherwise it may be listed already.
			if !kSeen || !vSeen || !slices.Contains(attrs, kv) {
				attrs = append(attrs, kv)
			}
		}
	}
	addText(sp.Type)
	addAttrs(sp.Attrs)
	if sp.Root != nil {
		sp.Root.Walk(func(r *trace.Record, depth int) bool {
			addText(r.Method)
			addAttrs(r.Attrs)
			for ex := r.Exception; ex != nil; ex = ex.Cause {
				addText(ex.Class)
				addText(ex.Message)
			}
			return true
		})
	}
	e.Texts, e.Attrs = texts[:len(texts):len(texts)], attrs[:len(attrs):len(attrs)]
	// What grew beyond the arenas was allocated on its own; what fit stays
	// taken.
	if len(texts) <= cap(in.textArena)-len(in.textArena) {
		in.textArena = in.textArena[:len(in.textArena)+len(texts)]
	}
	if len(attrs) <= cap(in.attrArena)-len(in.attrArena) {
		in.attrArena = in.attrArena[:len(in.attrArena)+len(attrs)]
	}
}

// seal makes the store read-only: indexes flushed, data fsynced, master
// checksum written, state=sealed in config.props.
func (s *Store) seal() error {
	if s.Sealed() {
		return nil
	}
	if err := s.flushIndexes(); err != nil {
		return err
	}
	s.chunkIndexer.Release()
	master, err := s.data.Seal()
	if err != nil {
		return fmt.Errorf("store %s: seal: %w", s.dir, err)
	}
	s.mu.Lock()
	s.props.State = stateSealed
	s.props.MasterChecksum = master
	s.mu.Unlock()
	return s.writeProps()
}

// settleIndexMaxBytes is the largest index a store compacts whole at close
// (kv.DB.Settle): a few seconds of CPU at most (closing an 8M-span OTLP
// store, a 182 MB metadata index, took 5.5 s on an idle 2-core machine,
// inside CloseTimeout); settleIndexMinL0 the least L0 worth it (a store of
// a few thousand spans has a few KB there, and the compaction's file syncs
// would cost more than they save). Below the cap the flushed L0 tables can
// be a large share of an index at rest; above it they are a small part.
const (
	settleIndexMaxBytes = 256 << 20
	settleIndexMinL0    = 1 << 20
)

// settleIndexes compacts, after the final flush of a close, each index that
// is small and has tables in L0 (kv.DB.Settle) into its last level, with
// room free bytes of disk for the copies: a store written to less than
// about ten million OTLP-shaped spans rests with its indexes
// zstd-compressed.
func (s *Store) settleIndexes(room uint64) error {
	metaDone, err := s.meta.Settle(s.settleMinL0, settleIndexMaxBytes, room)
	if err != nil {
		return fmt.Errorf("store %s: compact metadata index: %w", s.dir, err)
	}
	textDone, err := s.text.Settle(s.settleMinL0, settleIndexMaxBytes, room)
	if err != nil {
		return fmt.Errorf("store %s: compact text index: %w", s.dir, err)
	}
	if metaDone || textDone {
		s.log.Debug("compacted the indexes at close", "meta", metaDone, "text", textDone)
	}
	return nil
}

func (s *Store) flushIndexes() error {
	if err := s.meta.Flush(); err != nil {
		return fmt.Errorf("store %s: flush metadata index: %w", s.dir, err)
	}
	if err := s.text.Flush(); err != nil {
		return fmt.Errorf("store %s: flush text index: %w", s.dir, err)
	}
	return nil
}

func (s *Store) writeProps() error {
	s.mu.Lock()
	s.props.FirstTraceNS, s.props.LastTraceNS, s.props.Chunks = s.firstNS, s.lastNS, s.chunks
	p := s.props.ToProps()
	s.mu.Unlock()
	if err := config.WritePropsFileAtomic(filepath.Join(s.dir, propsFile), p); err != nil {
		return fmt.Errorf("store %s: %w", s.dir, err)
	}
	return nil
}

// close flushes the indexes, records the counters in config.props and
// closes every file. It waits for readers to finish.
func (s *Store) close() error { return s.closeBy(time.Now().Add(CloseTimeout)) }

// unflushedCloseWait bounds the Pebble close of indexes whose flush was
// skipped or failed (on a full disk it never finishes).
const unflushedCloseWait = 2 * time.Second

// closeBy is close bounded by deadline: the index flush is skipped when
// the disk has no room for it, and a flush or Pebble close still running
// at the deadline is abandoned (the indexes are rebuilt from the data file
// past their watermarks at the next open). A read-only store only closes
// its files.
func (s *Store) closeBy(deadline time.Time) error {
	s.mu.Lock()
	stopFilter, stopCatchUp, stopRelease := s.filterCancel, s.catchUpCancel, s.memCancel
	s.mu.Unlock()
	if stopFilter != nil {
		stopFilter() // a filter scan holds refs shared until it sees this
	}
	if stopCatchUp != nil {
		stopCatchUp() // so does a background catch-up
	}
	if stopRelease != nil {
		stopRelease() // and the release of a sealed store's memtables
	}
	s.refs.Lock()
	defer s.refs.Unlock()
	s.closed = true
	var errs []error
	if s.readOnly {
		return errors.Join(s.meta.Close(), s.text.Close(), s.data.Close())
	}
	flushed := false
	if free, _, ok := freeBytes(s.dir); ok && free < closeMinFree {
		s.log.Warn("disk full: closing without flushing the indexes; the next start re-indexes from their watermarks", "free_bytes", free)
	} else if err := within(deadline, s.flushIndexes); err != nil {
		errs = append(errs, err)
		s.log.Warn("index flush failed at close; the next start re-indexes from the watermarks", "err", err)
	} else {
		flushed = true
		if free, _, ok := freeBytes(s.dir); ok && free > closeMinFree {
			if err := within(deadline, func() error { return s.settleIndexes(free - closeMinFree) }); err != nil {
				s.log.Warn("compacting the indexes at close failed; they stay as flushed", "err", err)
			}
		}
	}
	if err := s.data.Sync(); err != nil {
		errs = append(errs, fmt.Errorf("store %s: sync: %w", s.dir, err))
	}
	if err := s.writeProps(); err != nil {
		errs = append(errs, err)
	}
	closeIndexes := func() error { return errors.Join(s.meta.Close(), s.text.Close()) }
	if !flushed {
		// Pebble's close waits for a flush it retries forever on ENOSPC:
		// give it a moment, not the whole deadline.
		wait := time.Now().Add(unflushedCloseWait)
		if deadline.Before(wait) {
			wait = deadline
		}
		if err := within(wait, closeIndexes); err != nil {
			errs = append(errs, fmt.Errorf("store %s: close indexes: %w", s.dir, err))
		}
	} else {
		errs = append(errs, closeIndexes())
	}
	errs = append(errs, s.data.Close())
	return errors.Join(errs...)
}

// Info describes a store for `GET /v1/stores`.
type Info struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	FirstNS int64  `json:"first_ns"`
	LastNS  int64  `json:"last_ns"`
	Spans   int64  `json:"spans"`
	Traces  int64  `json:"traces"`
	Chunks  int64  `json:"chunks"`
	Bytes   int64  `json:"bytes"`
	// IndexLag is how many data-file bytes the metadata index does not
	// cover yet (non-zero only while a re-index is catching up).
	IndexLag int64 `json:"index_lag_bytes"`
	// IndexCompactionDebt is Pebble's estimate of the bytes its two
	// indexes' compactions still have to rewrite (it counts tables in L0
	// that Pebble compacts only once more arrive, so a store at rest may
	// keep some), and IndexCompactions the flushes and compactions running
	// now: a store just written in bulk reads slower until they stop.
	IndexCompactionDebt int64 `json:"index_compaction_debt_bytes"`
	IndexCompactions    int64 `json:"index_compactions_running"`
	// Reason says why a store is not served (quarantined, rebuilding,
	// orphaned), or that a store serving is catching up (its indexes lag
	// its data file by IndexLag bytes, re-indexed in the background);
	// empty for a store that serves fully indexed.
	Reason string `json:"reason,omitempty"`
	// Compression and Checksums are how the store's chunks are written
	// (its config.props).
	Compression string `json:"compression"`
	Checksums   bool   `json:"checksums"`
	// Location is where the store lives: "local" (the data directory) or
	// "remote" (a bucket; Node and Generation name its upload, Cached says
	// whether its indexes are in the local cache).
	Location   string `json:"location"`
	Node       string `json:"node,omitempty"`
	Generation string `json:"generation,omitempty"`
	Cached     bool   `json:"cached,omitempty"`
}

func (s *Store) info() Info {
	if s.remote != nil {
		return s.remoteInfo()
	}
	st := s.meta.Stats()
	var lag int64
	// A zero tail found at open (chunk.File.ZeroTail) holds nothing to index.
	end := s.data.Size() - s.data.ZeroTail()
	if wm, err := s.meta.Watermark(); err == nil && wm < end {
		lag = end - wm
	}
	var reason string
	if w, ok := s.catchUpWarning(); ok {
		reason, lag = w.Error, max(lag, s.data.Size()-w.Offset)
	}
	comp := s.meta.Compaction().Add(s.text.Compaction())
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{IndexLag: lag, Reason: reason,
		IndexCompactionDebt: int64(comp.DebtBytes), IndexCompactions: comp.Running,
		ID: StoreName(s.id), State: s.props.State, FirstNS: s.firstNS, LastNS: s.lastNS,
		Spans: int64(st.Spans), Traces: int64(st.Traces), Chunks: s.chunks, Bytes: dirSize(s.dir),
		Compression: s.props.Compression, Checksums: s.props.Checksums, Location: "local",
	}
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
