package recovery

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/recovery/indexswap"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/textindex"
	"github.com/ztsd/ztsd/trace"
)

// maxProblemsPerKind bounds how many problems of one kind a store reports
// individually; the rest are summed up in one more.
const maxProblemsPerKind = 50

// VerifyDataDir checks every store of a data directory without changing
// anything (see the package comment). While a daemon holds the lock only
// the data files are checked. The report's OK is false on any problem.
func VerifyDataDir(ctx context.Context, dir string, opt Options) (*VerifyReport, error) {
	opt.fill()
	t0 := opt.Now()
	rep := &VerifyReport{Dir: dir, Stores: []StoreVerify{}, Problems: []Problem{}, Notes: []string{}}
	held, pid := storedir.LockHolder(dir)
	if held {
		rep.Notes = append(rep.Notes, fmt.Sprintf("a daemon (pid %s) holds the lock: only the data files are checked, not the indexes", pid))
	}
	stores, deleting, err := dataDirEntries(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range deleting {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s is the leftover of an interrupted store deletion (removed when the daemon starts)", d))
	}
	var total, done int64
	for _, s := range stores {
		total += fileSize(filepath.Join(s, DataFile))
	}
	open := 0
	for i, s := range stores {
		sv, err := verifyStore(ctx, s, opt, !held, done, total)
		if err != nil {
			return rep, err
		}
		if sv.State == config.StateOpen {
			open++
			if i < len(stores)-1 {
				sv.note("the store is open but not the newest (a crash during rotation): the daemon seals it when it starts")
			}
		}
		rep.add(*sv)
		done += sv.DataBytes
	}
	rep.Seconds = opt.Now().Sub(t0).Seconds()
	rep.MBPerS = mbPerS(rep.DataBytes, rep.Seconds)
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}

// VerifyStore checks one store directory without changing anything.
func VerifyStore(ctx context.Context, storeDir string, opt Options) (*VerifyReport, error) {
	opt.fill()
	t0 := opt.Now()
	rep := &VerifyReport{Dir: storeDir, Stores: []StoreVerify{}, Problems: []Problem{}, Notes: []string{}}
	held, pid := storedir.LockHolder(filepath.Dir(storeDir))
	if held {
		rep.Notes = append(rep.Notes, fmt.Sprintf("a daemon (pid %s) holds the lock: only the data file is checked, not the indexes", pid))
	}
	sv, err := verifyStore(ctx, storeDir, opt, !held, 0, fileSize(filepath.Join(storeDir, DataFile)))
	if err != nil {
		return rep, err
	}
	rep.add(*sv)
	rep.Seconds = opt.Now().Sub(t0).Seconds()
	rep.MBPerS = mbPerS(rep.DataBytes, rep.Seconds)
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}

// indexedChunk is what the metadata index says about one chunk: which span
// positions it lists and a hash of their entries.
type indexedChunk struct {
	seen  []uint64 // bitset of span positions
	count int
	hash  uint64 // XOR of entryHash over the distinct positions
}

// storeVerification is the state of one store's verification.
type storeVerification struct {
	opt    Options
	dir    string
	sv     *StoreVerify
	seed   maphash.Seed
	counts map[string]int // problems per kind
	meta   *index.Index
	text   textChecker
	metaWM int64
	textWM int64
	// indexed holds the metadata index's entries by chunk offset.
	indexed map[int64]*indexedChunk
	// strings already confirmed in the text index (bounded, reset when full).
	known map[string]struct{}
}

const maxKnownStrings = 1 << 16

func (v *storeVerification) problem(kind string, off *int64, length int64, format string, args ...any) {
	v.counts[kind]++
	n := v.counts[kind]
	if n > maxProblemsPerKind {
		return
	}
	v.sv.problem(kind, off, length, format, args...)
}

func (v *storeVerification) summarise() {
	for kind, n := range v.counts {
		if n > maxProblemsPerKind {
			v.sv.problem(kind, nil, 0, "%d more problems of this kind not listed", n-maxProblemsPerKind)
		}
	}
}

func verifyStore(ctx context.Context, dir string, opt Options, checkIndexes bool, progressBase, progressTotal int64) (*StoreVerify, error) {
	t0 := opt.Now()
	sv := &StoreVerify{Store: filepath.Base(dir), Dir: dir, BadRegions: []Region{}, Problems: []Problem{}, Notes: []string{}}
	v := &storeVerification{opt: opt, dir: dir, sv: sv, seed: maphash.MakeSeed(), counts: map[string]int{}}
	defer func() {
		v.summarise()
		sv.Seconds = opt.Now().Sub(t0).Seconds()
		sv.MBPerS = mbPerS(sv.DataBytes, sv.Seconds)
	}()
	if pending, err := indexswap.Pending(dir); err != nil {
		v.problem("io", nil, 0, "%v", err)
	} else if len(pending) > 0 {
		v.problem("swap-pending", nil, 0, "an index rebuild was interrupted (%v): it is finished when the daemon or `ztsctl recover` opens the store", pending)
	}
	var props *config.StoreProps
	switch p, err := config.ReadPropsFile(filepath.Join(dir, PropsFile)); {
	case errors.Is(err, fs.ErrNotExist):
		v.problem("props", nil, 0, "config.props is missing (rebuilt from the data file when the store is opened)")
	case err != nil:
		v.problem("props", nil, 0, "config.props: %v", err)
	default:
		sp, err := config.StorePropsFrom(p)
		if err != nil {
			v.problem("props", nil, 0, "config.props: %v", err)
		} else {
			props = &sp
			sv.State = sp.State
			if sp.FormatVersion != storedir.FormatVersion {
				v.problem("props", nil, 0, "format version %d, this ztsctl reads %d", sp.FormatVersion, storedir.FormatVersion)
			}
		}
	}
	if b := fileSize(filepath.Join(dir, BrokenFile)); b > 0 {
		sv.note("%s holds %d bytes cut from the data file by earlier repairs", BrokenFile, b)
	}
	dataPath := filepath.Join(dir, DataFile)
	f, err := opt.FS.OpenFile(dataPath, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		v.problem("no-data-file", nil, 0, "%s is missing", DataFile)
		return sv, nil
	}
	if err != nil {
		return sv, fmt.Errorf("store %s: open data file: %w", dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return sv, fmt.Errorf("store %s: %w", dir, err)
	}
	size := st.Size()
	sv.DataBytes = size
	opts, ok, err := v.checkHeader(f, size, props)
	if err != nil || !ok {
		return sv, err
	}
	sv.Compression, sv.Checksums = opts.Compression.String(), opts.Checksums
	if checkIndexes {
		v.openIndexes()
		defer v.closeIndexes()
		sv.IndexesChecked = true
	}
	var progress func(int64)
	if opt.Progress != nil {
		progress = func(n int64) { opt.Progress(progressBase+n, progressTotal) }
	}
	ch := make(chan goodChunk, 64)
	resc := make(chan scanResult, 1)
	go func() {
		resc <- scanChunks(ctx, f, size, scanConfig{opt: opts, limits: opt.Limits, progress: progress}, ch)
	}()
	var lastEnd int64 = chunk.HeaderSize
	for c := range ch {
		sv.ChunksOK++
		sv.Spans += int64(len(c.spans))
		v.checkChunk(c)
		lastEnd = c.next
	}
	res := <-resc
	if res.err != nil {
		return sv, fmt.Errorf("store %s: scan: %w", dir, res.err)
	}
	sv.ChunksBad = len(res.bad)
	for i, b := range res.bad {
		sv.BadRegions = append(sv.BadRegions, regionOf(b, ""))
		r := regionOf(b, "")
		if i == len(res.bad)-1 && b.Offset+b.Length >= size {
			v.problem("tail", at(b.Offset), b.Length, "torn tail: %s: %s (cut when the store is opened or by `ztsctl recover`; the bytes are kept in %s)", r.Reason, r.Detail, BrokenFile)
			continue
		}
		v.problem("chunk", at(b.Offset), b.Length, "bad chunk: %s: %s (its traces are lost; the chunks after it are read)", r.Reason, r.Detail)
	}
	if res.zeroLen > 0 {
		if sv.State == config.StateSealed {
			v.problem("tail", at(res.zeroOff), res.zeroLen, "the sealed data file ends in %d zero bytes after its last chunk (a sealed file ends with its last chunk; `ztsctl recover` cuts them)", res.zeroLen)
		} else {
			sv.note("%d zero bytes preallocated after the last chunk at %d (the end of the data; cut when the store is sealed or closed)", res.zeroLen, res.zeroOff)
		}
	}
	v.finishIndexes(res.end, lastEnd, size)
	return sv, nil
}

// checkHeader checks the file header and the master checksum against
// config.props and returns the options to scan with; ok is false when the
// file cannot be scanned at all.
func (v *storeVerification) checkHeader(f chunk.OSFile, size int64, props *config.StoreProps) (chunk.Options, bool, error) {
	rh, err := readRawHeader(f, size)
	if err != nil {
		return chunk.Options{}, false, fmt.Errorf("store %s: %w", v.dir, err)
	}
	var propsOpt chunk.Options
	haveProps := false
	if props != nil {
		if c, err := chunk.ParseCompression(props.Compression); err == nil {
			propsOpt, haveProps = chunk.Options{Compression: c, Checksums: props.Checksums}, true
		}
	}
	if errors.Is(rh.err, chunk.ErrTornHeader) {
		v.problem("header", at(0), size, "%v: the data file holds no chunk (re-initialised when the store is opened)", rh.err)
		return chunk.Options{}, false, nil
	}
	opts := rh.header.Options
	if rh.err != nil || (haveProps && opts != propsOpt) {
		var prefer []chunk.Options
		if rh.err == nil {
			prefer = append(prefer, opts)
		}
		if haveProps {
			prefer = append(prefer, propsOpt)
		}
		best, n := chooseOptions(f, size, prefer, v.opt.Limits)
		if rh.err != nil {
			v.problem("header", at(0), chunk.HeaderSize, "%v (header bytes %x); the chunks read as %v (%d validate in the first %d MiB): `ztsctl recover` rewrites the header",
				rh.err, rh.bytes, best, n, probeBytes>>20)
		} else {
			v.problem("header", at(0), chunk.HeaderSize, "the data file header says %v, config.props says %v; the chunks read as %v (%d validate in the first %d MiB)",
				opts, propsOpt, best, n, probeBytes>>20)
		}
		opts = best
	}
	stored := rh.storedMaster()
	if rh.err == nil && stored != 0 {
		if _, err := chunk.VerifyMaster(f, size); err != nil {
			v.problem("master", at(8), 4, "%v", err)
		}
	}
	if props != nil {
		switch {
		case props.State == config.StateSealed && stored == 0 && size <= chunk.HeaderSize:
			// No chunks: the checksum over no chunk headers is 0. (What a
			// sealed store cut to nothing by recover holds.)
		case props.State == config.StateSealed && stored == 0:
			v.problem("master", at(8), 4, "config.props says sealed, but the data file carries no master checksum")
		case props.State == config.StateOpen && stored != 0:
			v.problem("master", at(8), 4, "config.props says open, but the data file carries master checksum %08x (sealed)", stored)
		case props.State == config.StateSealed && props.MasterChecksum != stored:
			v.problem("master", at(8), 4, "config.props says master checksum %08x, the data file header %08x", props.MasterChecksum, stored)
		}
	} else if stored != 0 {
		v.sv.State = config.StateSealed
	} else {
		v.sv.State = config.StateOpen
	}
	return opts, true, nil
}

// openIndexes opens both indexes read-only and reads the metadata index's
// entries; problems go to the report.
func (v *storeVerification) openIndexes() {
	metaPath := filepath.Join(v.dir, MetaDir)
	switch {
	case !exists(metaPath):
		v.problem("index-missing", nil, 0, "the metadata index %s/ is missing (`ztsctl recover` rebuilds it; the daemon does when it starts)", MetaDir)
	default:
		ix, err := index.OpenReadOnly(metaPath, index.Options{})
		if err != nil {
			if kind := indexErrorKind(err, index.ErrNoIndex, metaPath); kind != "index-missing" {
				v.problem(kind, nil, 0, "metadata index: %v", err)
			} else {
				v.noteEmptyIndex("metadata", MetaDir)
			}
			break
		}
		if _, err := ix.CheckIntegrity(); err != nil {
			v.problem("index-corrupt", nil, 0, "metadata index: %v", err)
			ix.Close()
			break
		}
		v.metaWM, err = ix.Watermark()
		if err != nil {
			v.problem("index-corrupt", nil, 0, "metadata index: %v", err)
			ix.Close()
			break
		}
		v.indexed = map[int64]*indexedChunk{}
		if err := ix.Entries(v.addEntry); err != nil {
			v.problem("index-corrupt", nil, 0, "metadata index: %v", err)
			v.indexed = nil
			ix.Close()
			break
		}
		v.sv.Traces = int64(ix.Stats().Traces)
		v.meta = ix
	}
	textPath := filepath.Join(v.dir, TextDir)
	if !exists(textPath) {
		v.problem("index-missing", nil, 0, "the text index %s/ is missing (`ztsctl recover` rebuilds it; the daemon does when it starts)", TextDir)
		return
	}
	tx, err := openTextReadOnly(textPath)
	if err != nil {
		if kind := indexErrorKind(err, textindex.ErrNoIndex, textPath); kind != "index-missing" {
			v.problem(kind, nil, 0, "text index: %v", err)
		} else {
			v.noteEmptyIndex("text", TextDir)
		}
		return
	}
	if v.textWM, err = tx.Watermark(); err != nil {
		v.problem("index-corrupt", nil, 0, "text index: %v", err)
		tx.Close()
		return
	}
	v.text = tx
	v.known = make(map[string]struct{}, 1024)
}

// indexErrorKind classifies an error opening an index: "index-missing"
// for an empty directory, "index-corrupt" otherwise — including a
// directory that holds sstables in which Pebble finds no index (a damaged
// MANIFEST makes Pebble see an empty database).
// noteEmptyIndex reports an index directory that exists but holds nothing:
// Pebble runs the indexes without a WAL, so after a crash (kill -9, power
// loss) an index nothing was flushed to is empty. That is index lag, not
// damage: the daemon indexes the whole data file when it opens the store.
func (v *storeVerification) noteEmptyIndex(which, dir string) {
	v.sv.note("index lag: the %s index %s/ holds nothing yet (not flushed before a crash or stop); the daemon indexes the data file when it opens the store", which, dir)
}

// indexErrorKind classifies an error opening an index directory that
// exists: index-missing when it holds no table (nothing was ever flushed
// to it), index-corrupt otherwise.
func indexErrorKind(err, errNoIndex error, dir string) string {
	if !errors.Is(err, errNoIndex) {
		return "index-corrupt"
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.sst")); len(m) > 0 {
		return "index-corrupt"
	}
	return "index-missing"
}

func (v *storeVerification) closeIndexes() {
	if v.meta != nil {
		v.meta.Close()
	}
	if v.text != nil {
		v.text.Close()
	}
}

// entryHash identifies an index entry by everything storedir.IndexChunk
// derives from the span at that position.
func (v *storeVerification) entryHash(off int64, pos uint32, traceID [16]byte, spanID, parentID uint64, chunkNum uint32, startNS, durNS int64, isErr bool) uint64 {
	var b [72]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(off))
	binary.LittleEndian.PutUint32(b[8:], pos)
	copy(b[12:28], traceID[:])
	binary.LittleEndian.PutUint64(b[28:], spanID)
	binary.LittleEndian.PutUint64(b[36:], parentID)
	binary.LittleEndian.PutUint32(b[44:], chunkNum)
	binary.LittleEndian.PutUint64(b[48:], uint64(startNS))
	binary.LittleEndian.PutUint64(b[56:], uint64(durNS))
	if isErr {
		b[64] = 1
	}
	return maphash.Bytes(v.seed, b[:65])
}

func (v *storeVerification) addEntry(r index.SpanRef) error {
	c := v.indexed[r.Loc.ChunkOffset]
	if c == nil {
		c = &indexedChunk{}
		v.indexed[r.Loc.ChunkOffset] = c
	}
	w := int(r.Loc.Index / 64)
	if w >= len(c.seen) {
		if w > 1<<20 {
			return fmt.Errorf("index entry for span position %d of chunk %d: out of range", r.Loc.Index, r.Loc.ChunkOffset)
		}
		c.seen = append(c.seen, make([]uint64, w+1-len(c.seen))...)
	}
	bit := uint64(1) << (r.Loc.Index % 64)
	if c.seen[w]&bit != 0 {
		return nil // the same position indexed twice (superseded entry)
	}
	c.seen[w] |= bit
	c.count++
	c.hash ^= v.entryHash(r.Loc.ChunkOffset, r.Loc.Index, r.TraceID, r.SpanID, r.ParentID, r.ChunkNum, r.StartNS, r.DurationNS, r.Error)
	return nil
}

// checkChunk compares one good chunk with the indexes.
func (v *storeVerification) checkChunk(c goodChunk) {
	if v.indexed != nil && c.off < v.metaWM {
		ic := v.indexed[c.off]
		delete(v.indexed, c.off)
		var want uint64
		for i, sp := range c.spans {
			want ^= v.entryHash(c.off, uint32(i), sp.TraceID, uint64(sp.SpanID), uint64(sp.ParentID), sp.ChunkNum, sp.StartNS, sp.DurationNS, sp.Error)
		}
		switch {
		case ic == nil:
			v.problem("unindexed-chunk", at(c.off), c.next-c.off, "the chunk's %d spans are not in the metadata index (below its watermark %d)", len(c.spans), v.metaWM)
		case ic.count != len(c.spans) || ic.hash != want || !allSet(ic.seen, len(c.spans)):
			v.problem("entry-mismatch", at(c.off), c.next-c.off, "the metadata index lists %d span positions of this chunk, which holds %d spans, and they disagree with the chunk's spans", ic.count, len(c.spans))
		}
	}
	if v.text != nil && c.off < v.textWM {
		for _, sp := range c.spans {
			if !v.checkTexts(c, sp) {
				return
			}
		}
	}
}

// checkTexts checks that the text index knows every string of sp that
// storedir.IndexChunk interns; false stops checking the chunk after an
// I/O error.
func (v *storeVerification) checkTexts(c goodChunk, sp *trace.Span) bool {
	ok := true
	spanTexts(sp, func(s string) {
		if !ok {
			return
		}
		if _, seen := v.known[s]; seen {
			return
		}
		_, found, err := v.text.Lookup(s)
		if err != nil {
			v.problem("index-corrupt", at(c.off), 0, "text index lookup: %v", err)
			ok = false
			return
		}
		if !found {
			v.problem("text-missing-string", at(c.off), c.next-c.off, "the text index does not know the string %q of span %s/%s in this chunk", truncate(s, 80), sp.TraceID, sp.SpanID)
			return
		}
		if len(v.known) >= maxKnownStrings {
			clear(v.known)
		}
		v.known[s] = struct{}{}
	})
	return ok
}

// spanTexts calls fn for every non-empty string of sp that the text index
// holds: the strings storedir.IndexChunk interns (span type, attribute
// keys and scalar values of the span and of every record, method names,
// exception classes and messages). TestSpanTextsMatchTextIndex keeps the two
// in step.
func spanTexts(sp *trace.Span, fn func(string)) {
	emit := func(s string) {
		if s != "" {
			fn(s)
		}
	}
	attrs := func(as trace.Attrs) {
		for _, a := range as {
			emit(a.Key)
			if a.Value.Kind != trace.KindList && a.Value.Kind != trace.KindMap {
				emit(a.Value.Text())
			}
		}
	}
	emit(sp.Type)
	attrs(sp.Attrs)
	if sp.Root != nil {
		sp.Root.Walk(func(r *trace.Record, _ int) bool {
			emit(r.Method)
			attrs(r.Attrs)
			for ex := r.Exception; ex != nil; ex = ex.Cause {
				emit(ex.Class)
				emit(ex.Message)
			}
			return true
		})
	}
}

func allSet(bs []uint64, n int) bool {
	have := 0
	for _, w := range bs {
		have += bits.OnesCount64(w)
	}
	if have != n {
		return false
	}
	for i := 0; i < n; i++ {
		if i/64 >= len(bs) || bs[i/64]&(1<<(i%64)) == 0 {
			return false
		}
	}
	return true
}

// finishIndexes reports entries that point at no good chunk and watermarks
// that disagree with the data: end is where the good data ends (a torn tail
// starts there), lastEnd the end of the last good chunk, size the file size.
func (v *storeVerification) finishIndexes(end, lastEnd, size int64) {
	if v.meta != nil {
		for off, ic := range v.indexed {
			if off >= v.metaWM {
				v.problem("index-ahead", at(off), 0, "the metadata index lists %d spans of a chunk at %d, past its own watermark %d", ic.count, off, v.metaWM)
				continue
			}
			v.problem("dangling-entry", at(off), 0, "the metadata index lists %d spans in a chunk at %d, where the data file has no valid chunk", ic.count, off)
		}
		v.checkWatermark("metadata", v.metaWM, end, lastEnd, size)
	}
	if v.text != nil {
		v.checkWatermark("text", v.textWM, end, lastEnd, size)
	}
}

func (v *storeVerification) checkWatermark(which string, wm, end, lastEnd, size int64) {
	// A new index says 0: complete for a data file without chunks.
	wm = max(wm, chunk.HeaderSize)
	switch {
	case wm > size:
		v.problem("index-ahead", at(wm), 0, "the %s index claims the data file up to %d, but it has %d bytes (the daemon rebuilds both indexes when it starts)", which, wm, size)
	case wm < lastEnd && wm < end:
		// What a crash leaves (the indexes have no WAL), healed when the
		// daemon opens the store: a note, not a problem.
		v.sv.note("index lag: the %s index covers the data file up to %d, the data goes on to %d (%d bytes); the daemon indexes the rest when it opens the store", which, wm, end, end-wm)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// textChecker is the part of the text index verify reads.
type textChecker interface {
	Watermark() (int64, error)
	Lookup(s string) (uint64, bool, error)
	CheckIntegrity() (int64, error)
	Close() error
}

// openTextReadOnly opens the text index read-only and checks every block.
func openTextReadOnly(dir string) (textChecker, error) {
	tx, err := textindex.OpenReadOnly(dir, textindex.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := tx.CheckIntegrity(); err != nil {
		tx.Close()
		return nil, err
	}
	return tx, nil
}
