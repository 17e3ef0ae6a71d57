package recovery

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/recovery/indexswap"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/textindex"
	"github.com/ztsd/ztsd/trace"
)

// Options configure Recover and Verify.
type Options struct {
	// DryRun scans and reports what Recover would do without changing
	// anything (Recover only).
	DryRun bool
	// Limits bound the decoding of chunk payloads; zero means
	// trace.DefaultLimits().
	Limits trace.Limits
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
	// FS is what data files are read and written through; nil is the
	// operating system's. Tests inject faults here.
	FS chunk.FS
	// Progress, when set, is called with the bytes of data files scanned so
	// far and the total, from the scanning goroutine.
	Progress func(done, total int64)
	// Hook is a test seam: it is called after each durable step with the
	// step's name (see the Step constants); an error stops recovery there,
	// as a crash would, and is returned.
	Hook func(step string) error
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	// groupSpans is how many spans an index group (one commit per index)
	// holds at most; 0 means batchSpans (tests lower it to rebuild in
	// many groups).
	groupSpans int
}

func (o *Options) fill() {
	if o.Limits == (trace.Limits{}) {
		o.Limits = trace.DefaultLimits()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = chunk.OSFS{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Durable steps of Recover, as passed to Options.Hook.
const (
	StepSwapFinished    = "interrupted swap finished"
	StepHeaderRepaired  = "header repaired"
	StepReinitialized   = "data file reinitialised"
	StepIndexesBuilt    = "indexes built"
	StepTailCut         = "tail cut"
	StepMasterFixed     = "master checksum fixed"
	StepSwapPrefix      = "swap: " // + an indexswap step name (+ " " + index name)
	StepPropsWritten    = "config.props written"
	StepDeletingRemoved = "deletion leftover removed"
)

// errNoGoodChunk refuses to cut a whole data file.
var errNoGoodChunk = errors.New("no chunk of the data file validates")

// RecoverDataDir recovers every store of a stopped data directory: it takes
// the directory's lock (failing with an error wrapping storedir.ErrLocked
// while a daemon holds it), removes the leftovers of interrupted store
// deletions, and recovers each store (RecoverStore).
func RecoverDataDir(ctx context.Context, dir string, opt Options) (*Report, error) {
	opt.fill()
	rep := &Report{Dir: dir, DryRun: opt.DryRun, Stores: []StoreReport{}, Actions: []string{}}
	lock, err := lockUnlessDryRun(dir, opt)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	t0 := opt.Now()
	stores, deleting, err := dataDirEntries(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range deleting {
		if opt.DryRun {
			rep.Actions = append(rep.Actions, fmt.Sprintf("would remove %s (an interrupted store deletion)", d))
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return rep, fmt.Errorf("remove %s: %w", d, err)
		}
		rep.Actions = append(rep.Actions, fmt.Sprintf("removed %s (an interrupted store deletion)", d))
		if err := step(opt, StepDeletingRemoved); err != nil {
			return rep, err
		}
	}
	var total int64
	for _, s := range stores {
		total += fileSize(filepath.Join(s, DataFile))
	}
	var done int64
	for _, s := range stores {
		sr, err := recoverStore(ctx, s, opt, done, total)
		if sr != nil {
			rep.add(*sr)
		}
		if err != nil {
			return rep, err
		}
		done += sr.DataBytes
	}
	rep.Seconds = opt.Now().Sub(t0).Seconds()
	rep.MBPerS = mbPerS(rep.DataBytes, rep.Seconds)
	return rep, nil
}

// RecoverStore recovers one stopped store directory (see the package
// comment), holding the lock of the data directory that contains it.
func RecoverStore(ctx context.Context, storeDir string, opt Options) (*Report, error) {
	opt.fill()
	lock, err := lockUnlessDryRun(filepath.Dir(storeDir), opt)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	rep := &Report{Dir: storeDir, DryRun: opt.DryRun, Stores: []StoreReport{}, Actions: []string{}}
	t0 := opt.Now()
	sr, err := recoverStore(ctx, storeDir, opt, 0, fileSize(filepath.Join(storeDir, DataFile)))
	if sr != nil {
		rep.add(*sr)
	}
	rep.Seconds = opt.Now().Sub(t0).Seconds()
	rep.MBPerS = mbPerS(rep.DataBytes, rep.Seconds)
	return rep, err
}

// lockUnlessDryRun takes the data directory lock. A dry run changes
// nothing, but it still refuses to run next to a daemon (whose writes would
// make its report meaningless): it only checks the lock.
func lockUnlessDryRun(dir string, opt Options) (*Lock, error) {
	if opt.DryRun {
		if held, pid := storedir.LockHolder(dir); held {
			return nil, fmt.Errorf("%s (held by pid %s; stop the daemon first): %w", dir, pid, storedir.ErrLocked)
		}
		return nil, nil
	}
	return LockDataDir(dir)
}

func step(opt Options, name string) error {
	if opt.Hook == nil {
		return nil
	}
	if err := opt.Hook(name); err != nil {
		return fmt.Errorf("recovery stopped after %q: %w", name, err)
	}
	return nil
}

// storeRecovery is the state of one store's recovery.
type storeRecovery struct {
	opt       Options
	dir       string
	rep       *StoreReport
	dataPath  string
	props     *config.StoreProps // nil when missing or unreadable
	propsBad  bool               // present but unreadable
	chosen    chunk.Options
	size      int64
	log       *slog.Logger
	firstNS   int64
	lastNS    int64
	wantSeal  bool
	finalMast uint32
	// reinitialised: the data file had a torn header and holds no chunk.
	reinitialised bool
}

func (r *storeRecovery) action(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.rep.Actions = append(r.rep.Actions, msg)
	r.log.Info(msg)
}

func recoverStore(ctx context.Context, dir string, opt Options, progressBase, progressTotal int64) (*StoreReport, error) {
	t0 := opt.Now()
	rep := &StoreReport{Store: filepath.Base(dir), Dir: dir, BadRegions: []Region{}, Actions: []string{}}
	r := &storeRecovery{opt: opt, dir: dir, rep: rep, dataPath: filepath.Join(dir, DataFile),
		log: opt.Logger.With("store", filepath.Base(dir))}
	defer func() {
		rep.Seconds = opt.Now().Sub(t0).Seconds()
		rep.MBPerS = mbPerS(rep.DataBytes, rep.Seconds)
	}()
	if err := r.finishSwap(); err != nil {
		return rep, err
	}
	if err := r.readProps(); err != nil {
		return rep, err
	}
	fi, err := os.Stat(r.dataPath)
	if errors.Is(err, fs.ErrNotExist) {
		rep.Skipped = "no data file (an interrupted store creation; the daemon removes such a directory when it starts)"
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("store %s: %w", dir, err)
	}
	rep.DataBytes = fi.Size()
	r.size = fi.Size()
	if err := r.repairHeader(); err != nil {
		return rep, err
	}
	rep.Compression, rep.Checksums = r.chosen.Compression.String(), r.chosen.Checksums
	res, err := r.scanAndIndex(ctx, progressBase, progressTotal)
	if err != nil {
		return rep, err
	}
	if err := r.cutTail(res); err != nil {
		return rep, err
	}
	if err := r.fixMaster(); err != nil {
		return rep, err
	}
	if opt.DryRun {
		return rep, nil
	}
	if err := indexswap.Commit(dir, []string{MetaDir, TextDir}, func(s, name string) error {
		if name != "" {
			s += " " + name
		}
		return step(opt, StepSwapPrefix+s)
	}); err != nil {
		return rep, fmt.Errorf("store %s: swap in the rebuilt indexes: %w", dir, err)
	}
	rep.IndexesRebuilt = true
	r.action("rebuilt meta/ and text/ from the data file (%d spans, %d traces) and swapped them in", rep.Spans, rep.Traces)
	if err := r.writeProps(); err != nil {
		return rep, err
	}
	return rep, nil
}

// finishSwap completes an index swap a crash interrupted.
func (r *storeRecovery) finishSwap() error {
	if r.opt.DryRun {
		if pending, err := indexswap.Pending(r.dir); err == nil && len(pending) > 0 {
			r.action("would finish an interrupted index swap (found %v)", pending)
		}
		return nil
	}
	out, err := indexswap.FinishInterrupted(r.dir)
	if err != nil {
		return fmt.Errorf("store %s: %w", r.dir, err)
	}
	if out != indexswap.Clean {
		r.action("interrupted index swap %s", out)
		return step(r.opt, StepSwapFinished)
	}
	return nil
}

func (r *storeRecovery) readProps() error {
	p, err := config.ReadPropsFile(filepath.Join(r.dir, PropsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		var sp config.StoreProps
		if sp, err = config.StorePropsFrom(p); err == nil {
			if sp.FormatVersion > storedir.FormatVersion {
				return fmt.Errorf("store %s: format version %d is newer than this ztsctl supports (%d)", r.dir, sp.FormatVersion, storedir.FormatVersion)
			}
			if sp.FormatVersion < storedir.FormatVersion {
				return fmt.Errorf("store %s: format version %d is older than %d: run `ztsctl migrate` first", r.dir, sp.FormatVersion, storedir.FormatVersion)
			}
			r.props = &sp
			return nil
		}
	}
	r.propsBad = true
	r.log.Warn("config.props unreadable; it is rebuilt from the data file", "err", err)
	return nil
}

func (r *storeRecovery) propsOptions() (chunk.Options, bool) {
	if r.props == nil {
		return chunk.Options{}, false
	}
	c, err := chunk.ParseCompression(r.props.Compression)
	if err != nil {
		return chunk.Options{}, false
	}
	return chunk.Options{Compression: c, Checksums: r.props.Checksums}, true
}

// repairHeader decides the options the data file is read with and, unless
// this is a dry run, rewrites a damaged header or re-initialises a file
// whose header is torn.
func (r *storeRecovery) repairHeader() error {
	f, err := r.opt.FS.OpenFile(r.dataPath, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("store %s: open data file: %w", r.dir, err)
	}
	rh, err := readRawHeader(f, r.size)
	if err != nil {
		f.Close()
		return fmt.Errorf("store %s: %w", r.dir, err)
	}
	propsOpt, havePropsOpt := r.propsOptions()
	switch {
	case errors.Is(rh.err, chunk.ErrTornHeader) || (rh.err != nil && r.size < chunk.HeaderSize+chunk.ChunkHeaderSize):
		// Nothing in the file can be a chunk: start it afresh.
		f.Close()
		opt := chunk.Options{Compression: chunk.LZ4, Checksums: true}
		if havePropsOpt {
			opt = propsOpt
		}
		r.chosen = opt
		r.reinitialised = true
		if r.opt.DryRun {
			r.action("would re-initialise the data file (torn header: %v); %d bytes would be kept in %s", rh.err, r.size, BrokenFile)
			r.rep.BytesMovedAside += r.size
			r.size = chunk.HeaderSize
			return nil
		}
		df, moved, err := chunk.ReinitializeFS(r.opt.FS, r.dataPath, opt, filepath.Join(r.dir, BrokenFile))
		if err != nil {
			return fmt.Errorf("store %s: %w", r.dir, err)
		}
		df.Close()
		r.rep.BytesMovedAside += moved
		r.size = chunk.HeaderSize
		r.action("re-initialised the data file (torn header, %d bytes kept in %s)", moved, BrokenFile)
		return step(r.opt, StepReinitialized)
	case rh.err == nil && (!havePropsOpt || rh.header.Options == propsOpt):
		f.Close()
		r.chosen = rh.header.Options
		return nil
	}
	// A damaged header, or one that disagrees with config.props: let the
	// chunks decide.
	var prefer []chunk.Options
	if rh.err == nil {
		prefer = append(prefer, rh.header.Options)
	}
	if havePropsOpt {
		prefer = append(prefer, propsOpt)
	}
	opt, n := chooseOptions(f, r.size, prefer, r.opt.Limits)
	f.Close()
	r.chosen = opt
	why := "disagrees with config.props"
	if rh.err != nil {
		why = rh.err.Error()
	}
	if rh.err == nil && rh.header.Options == opt {
		// The header was right; config.props is what is wrong (rewritten below).
		r.action("config.props says %v but the data file header says %v, which %d chunks confirm; config.props is corrected", propsOpt, opt, n)
		return nil
	}
	newHdr := encodeHeader(opt, 0)
	if r.opt.DryRun {
		r.action("would repair the file header (%s): %s → %s (%v, %d chunks validate)", why, hex.EncodeToString(rh.bytes), hex.EncodeToString(newHdr), opt, n)
		return nil
	}
	if err := writeAt(r.opt.FS, r.dataPath, newHdr, 0); err != nil {
		return fmt.Errorf("store %s: repair file header: %w", r.dir, err)
	}
	r.action("repaired the file header (%s): was %s, now %s (%v, %d chunks validate)", why, hex.EncodeToString(rh.bytes), hex.EncodeToString(newHdr), opt, n)
	return step(r.opt, StepHeaderRepaired)
}

// writeAt writes b at off of path and fsyncs it.
func writeAt(fsys chunk.FS, path string, b []byte, off int64) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if n, err := f.WriteAt(b, off); err != nil || n != len(b) {
		f.Close()
		if err == nil {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
		}
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scanAndIndex scans the data file and, unless this is a dry run, builds
// both indexes into the .rebuild directories from the good chunks.
func (r *storeRecovery) scanAndIndex(ctx context.Context, progressBase, progressTotal int64) (scanResult, error) {
	f, err := r.opt.FS.OpenFile(r.dataPath, os.O_RDONLY, 0)
	if err != nil {
		return scanResult{}, fmt.Errorf("store %s: open data file: %w", r.dir, err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var progress func(int64)
	if r.opt.Progress != nil {
		progress = func(n int64) { r.opt.Progress(progressBase+n, progressTotal) }
	}
	ch := make(chan goodChunk, 32)
	resc := make(chan scanResult, 1)
	go func() {
		resc <- scanChunks(ctx, f, r.size, scanConfig{opt: r.chosen, limits: r.opt.Limits, progress: progress}, ch)
	}()
	var b *builder
	if !r.opt.DryRun {
		if b, err = newBuilder(r.dir, r.opt.groupSpans); err != nil {
			cancel()
			for range ch {
			}
			<-resc
			return scanResult{}, err
		}
	}
	var ierr error
	for c := range ch {
		if ierr != nil {
			continue // drain after a failure
		}
		r.rep.ChunksOK++
		r.rep.Spans += int64(len(c.spans))
		for _, sp := range c.spans {
			if r.firstNS == 0 || sp.StartNS < r.firstNS {
				r.firstNS = sp.StartNS
			}
			r.lastNS = max(r.lastNS, sp.StartNS)
		}
		if b != nil {
			if ierr = b.add(c); ierr != nil {
				cancel()
			}
		}
	}
	res := <-resc
	if ierr == nil && res.err != nil {
		ierr = fmt.Errorf("store %s: scan: %w", r.dir, res.err)
	}
	if b != nil {
		if ierr == nil {
			ierr = b.finish(res.end)
			r.rep.Spans, r.rep.Traces = b.spans, b.traces
		}
		if cerr := b.close(); ierr == nil {
			ierr = cerr
		}
	}
	if ierr != nil {
		return res, ierr
	}
	if !r.opt.DryRun {
		if err := step(r.opt, StepIndexesBuilt); err != nil {
			return res, err
		}
	}
	return res, nil
}

// cutTail reports the bad regions and cuts a torn tail.
func (r *storeRecovery) cutTail(res scanResult) error {
	n := len(res.bad)
	var tail *chunk.BadRegion
	if n > 0 && res.bad[n-1].Offset+res.bad[n-1].Length >= r.size {
		tail = &res.bad[n-1]
	}
	r.rep.ChunksBad = n
	for i, b := range res.bad {
		act := "skipped"
		if tail != nil && i == n-1 {
			act = "cut"
			if r.opt.DryRun {
				act = "would cut"
			}
		}
		r.rep.BadRegions = append(r.rep.BadRegions, regionOf(b, act))
	}
	if tail == nil {
		return r.cutZeroTail(res)
	}
	if r.rep.ChunksOK == 0 && tail.Length > chunk.MaxChunkSize+chunk.ChunkHeaderSize {
		return fmt.Errorf("store %s: refusing to cut %d bytes at %d: %w with options %v (is the file header right?)",
			r.dir, tail.Length, tail.Offset, errNoGoodChunk, r.chosen)
	}
	if r.opt.DryRun {
		r.size = tail.Offset
		r.rep.BytesMovedAside += tail.Length
		r.action("would cut the torn tail at %d (%d bytes to %s)", tail.Offset, tail.Length, BrokenFile)
		return nil
	}
	df, err := chunk.OpenFS(r.opt.FS, r.dataPath)
	if err != nil {
		return fmt.Errorf("store %s: %w", r.dir, err)
	}
	moved, err := df.TruncateTail(tail.Offset, filepath.Join(r.dir, BrokenFile))
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store %s: cut the torn tail at %d: %w", r.dir, tail.Offset, err)
	}
	r.size = tail.Offset
	r.rep.BytesMovedAside += moved
	r.action("cut the torn tail at %d: %d bytes (%s) moved to %s", tail.Offset, moved, tail.Reason, BrokenFile)
	return step(r.opt, StepTailCut)
}

// cutZeroTail truncates the zero tail an open store's writer preallocated
// (chunk.PreallocStep) off the data file: the rebuilt store ends with its
// last chunk, as a sealed one must. The zeros hold nothing; nothing is
// moved to .broken.
func (r *storeRecovery) cutZeroTail(res scanResult) error {
	if res.zeroLen == 0 {
		return nil
	}
	if r.opt.DryRun {
		r.size = res.zeroOff
		r.action("would cut the %d zero bytes preallocated after the last chunk at %d", res.zeroLen, res.zeroOff)
		return nil
	}
	df, err := chunk.OpenFS(r.opt.FS, r.dataPath)
	if err != nil {
		return fmt.Errorf("store %s: %w", r.dir, err)
	}
	_, err = df.TruncateTail(res.zeroOff, "")
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store %s: cut the zero tail at %d: %w", r.dir, res.zeroOff, err)
	}
	r.size = res.zeroOff
	r.action("cut the %d zero bytes preallocated after the last chunk at %d", res.zeroLen, res.zeroOff)
	return step(r.opt, StepTailCut)
}

// fixMaster makes the header's master checksum agree with the store's
// state: sealed stores carry the checksum of their chunk headers, open
// ones 0. A sealed store whose chunk headers do not tile the file (bad
// regions in the middle) cannot be re-sealed and keeps master 0.
func (r *storeRecovery) fixMaster() error {
	if r.props != nil {
		r.rep.State = r.props.State
	}
	if r.opt.DryRun && r.reinitialised {
		return nil
	}
	f, err := r.opt.FS.OpenFile(r.dataPath, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("store %s: open data file: %w", r.dir, err)
	}
	rh, err := readRawHeader(f, r.size)
	var computed uint32
	var cerr error
	if err == nil {
		computed, cerr = chunk.VerifyMaster(f, r.size)
	}
	f.Close()
	if err != nil {
		return fmt.Errorf("store %s: %w", r.dir, err)
	}
	stored := rh.storedMaster()
	tiles := cerr == nil || errors.Is(cerr, chunk.ErrMasterMismatch) || errors.Is(cerr, chunk.ErrNotSealed)
	switch {
	case r.props != nil:
		r.wantSeal = r.props.State == config.StateSealed
		if !r.wantSeal && stored != 0 && cerr == nil {
			// Sealed on disk, but the crash came before config.props said so.
			r.wantSeal = true
			r.action("the data file is sealed (master checksum %08x verifies) but config.props says open; config.props is corrected", stored)
		}
	default:
		r.wantSeal = stored != 0
	}
	r.rep.State = config.StateOpen
	if r.wantSeal {
		r.rep.State = config.StateSealed
	}
	want := uint32(0)
	if r.wantSeal && tiles {
		want = computed
	}
	r.finalMast = want
	if stored == want {
		return nil
	}
	switch {
	case r.wantSeal && !tiles:
		r.action("cannot seal: the chunk headers do not tile the data file (%v); master checksum set to 0", cerr)
	case r.wantSeal:
		r.action("master checksum %08x → %08x (computed over the chunk headers)", stored, want)
	default:
		r.action("master checksum %08x → 0 (the store is open)", stored)
	}
	if r.opt.DryRun {
		return nil
	}
	var b [4]byte
	b[0], b[1], b[2], b[3] = byte(want>>24), byte(want>>16), byte(want>>8), byte(want)
	if err := writeAt(r.opt.FS, r.dataPath, b[:], 8); err != nil {
		return fmt.Errorf("store %s: write master checksum: %w", r.dir, err)
	}
	return step(r.opt, StepMasterFixed)
}

// writeProps rewrites config.props from what the scan found.
func (r *storeRecovery) writeProps() error {
	var sp config.StoreProps
	if r.props != nil {
		sp = *r.props
	} else {
		sp = config.StoreProps{FormatVersion: storedir.FormatVersion, Created: r.opt.Now().UTC()}
		if fi, err := os.Stat(r.dataPath); err == nil {
			sp.Created = fi.ModTime().UTC()
		}
	}
	sp.Compression = r.chosen.Compression.String()
	sp.Checksums = r.chosen.Checksums
	sp.State = config.StateOpen
	if r.wantSeal {
		sp.State = config.StateSealed
	}
	sp.MasterChecksum = r.finalMast
	sp.FirstTraceNS, sp.LastTraceNS, sp.Chunks = r.firstNS, r.lastNS, r.rep.ChunksOK
	r.rep.State = sp.State
	if r.props != nil && sameProps(sp, *r.props) {
		return nil
	}
	path := filepath.Join(r.dir, PropsFile)
	if r.propsBad {
		keep := path + ".broken"
		if err := os.Rename(path, keep); err != nil {
			return fmt.Errorf("store %s: keep the unreadable config.props: %w", r.dir, err)
		}
		r.action("kept the unreadable config.props as %s", filepath.Base(keep))
	}
	if err := config.WritePropsFileAtomic(path, sp.ToProps()); err != nil {
		return fmt.Errorf("store %s: %w", r.dir, err)
	}
	r.action("wrote config.props (state %s, %d chunks, master checksum %08x)", sp.State, sp.Chunks, sp.MasterChecksum)
	return step(r.opt, StepPropsWritten)
}

// builder builds both indexes of a store into the .rebuild directories.
// It indexes chunks in groups (storedir.IndexChunks: one commit per index
// per group), cutting a group at a gap between good chunks. The indexes
// are opened for a bulk load (no automatic compactions, large memtables)
// and compacted once at the end (finish).
//
// Memory: the group being filled (its decoded spans) and the scan queue
// (32 decoded chunks, about one more group at the usual chunk size of ~500
// spans: the scan must stay a group ahead, a queue of a quarter group made
// the rebuild ~10% slower), whatever the store's size, besides Pebble's
// memtables and caches. Groups of 16k spans rather than 32k halve that
// live heap, which under ztsctl's heap limit (offlineGC) made the rebuild
// of a 1M-span store 4-7% faster.
type builder struct {
	metaDir, textDir string
	meta             *index.Index
	text             *textindex.Index
	spans, traces    int64
	pending          []storedir.ChunkSpans
	pendingSpans     int
	groupSpans       int
	// indexer keeps the strings interned from one group to the next, as
	// the daemon's store does (the text ids do not depend on it).
	indexer storedir.ChunkIndexer
}

// batchSpans is how many spans one group holds at most.
const batchSpans = 16 << 10

func newBuilder(storeDir string, groupSpans int) (*builder, error) {
	if groupSpans <= 0 {
		groupSpans = batchSpans
	}
	b := &builder{metaDir: filepath.Join(storeDir, MetaDir+indexswap.RebuildSuffix),
		textDir: filepath.Join(storeDir, TextDir+indexswap.RebuildSuffix), groupSpans: groupSpans}
	for _, d := range []string{b.metaDir, b.textDir} {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("remove stale %s: %w", d, err)
		}
	}
	var err error
	if b.meta, err = index.Open(b.metaDir, index.Options{BulkLoad: true}); err != nil {
		return nil, fmt.Errorf("create %s: %w", b.metaDir, err)
	}
	if b.text, err = textindex.Open(b.textDir, textindex.Options{BulkLoad: true}); err != nil {
		b.meta.Close()
		return nil, fmt.Errorf("create %s: %w", b.textDir, err)
	}
	return b, nil
}

func (b *builder) add(c goodChunk) error {
	if n := len(b.pending); n > 0 && b.pending[n-1].Next != c.off {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.pending = append(b.pending, storedir.ChunkSpans{Off: c.off, Next: c.next, Spans: c.spans})
	b.pendingSpans += len(c.spans)
	if b.pendingSpans >= b.groupSpans {
		return b.flush()
	}
	return nil
}

func (b *builder) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	err := b.indexer.IndexChunks(b.meta, b.text, b.pending, true, true)
	if err != nil {
		err = fmt.Errorf("index chunks [%d, %d): %w", b.pending[0].Off, b.pending[len(b.pending)-1].Next, err)
	}
	clear(b.pending)
	b.pending, b.pendingSpans = b.pending[:0], 0
	return err
}

// finish records end as both watermarks (the indexes are complete up to
// the end of the good data) and reads the counters.
func (b *builder) finish(end int64) error {
	if err := b.flush(); err != nil {
		return err
	}
	mb := b.meta.NewBatch()
	mb.SetWatermark(end)
	if err := mb.Commit(); err != nil {
		return fmt.Errorf("%s: watermark: %w", b.metaDir, err)
	}
	tb := b.text.NewBatch()
	tb.SetWatermark(end)
	if err := tb.Commit(); err != nil {
		return fmt.Errorf("%s: watermark: %w", b.textDir, err)
	}
	// Opened for a bulk load, the indexes compact nothing by themselves:
	// one compaction each, in parallel, writes every key once into the
	// layout the daemon reads.
	textErr := make(chan error, 1)
	go func() { textErr <- b.text.Compact() }()
	metaErr := b.meta.Compact()
	if err := errors.Join(metaErr, <-textErr); err != nil {
		return err
	}
	st := b.meta.Stats()
	b.spans, b.traces = int64(st.Spans), int64(st.Traces)
	return nil
}

func (b *builder) close() error {
	return errors.Join(b.meta.Close(), b.text.Close())
}

func sameProps(a, b config.StoreProps) bool {
	same := a.Created.Equal(b.Created)
	a.Created, b.Created = time.Time{}, time.Time{}
	return same && a == b
}
