package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/recovery"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// migration is one run of Run.
type migration struct {
	opt     Options
	log     *slog.Logger
	sources []string // absolute, in the given order (repeats kept)
	target  string   // the directory written: Target, or Sources[0]+".migrate-new"

	p       params
	state   *stateDB
	db      *storedir.DB
	resumed bool

	enc     trace.ChunkEncoder
	hashBuf []byte
	single  []*trace.Span

	copiedBytes int64    // source bytes copied by this run
	copiedSpans int64    // source pieces copied by this run
	runWarnings []string // warnings of this run only (not checkpointed)
}

// Run performs the migration opt describes: it refuses while a daemon
// holds a source, copies (or resumes copying), verifies, and finishes
// (writes the report into the target, or swaps the directories for
// InPlace). The report is returned whenever there is one, also with
// ErrVerifyFailed.
func Run(ctx context.Context, opt Options) (*Report, error) {
	opt.fill()
	sources, target, err := opt.validate()
	if err != nil {
		return nil, err
	}
	m := &migration{opt: opt, log: opt.Logger, sources: sources, target: target}
	t0 := opt.Now()
	var rep *Report
	if opt.InPlace {
		rep, err = m.runInPlace(ctx)
	} else {
		rep, err = m.runInto(ctx)
	}
	if rep != nil && !rep.AlreadyComplete {
		rep.Seconds = opt.Now().Sub(t0).Seconds()
		if rep.Seconds > 0 {
			rep.MBPerS = float64(m.copiedBytes) / 1e6 / rep.Seconds
			rep.SpansPerS = float64(m.copiedSpans) / rep.Seconds
		}
	}
	if rep != nil {
		for _, w := range m.runWarnings {
			rep.warn(w)
		}
		rep.normalize()
	}
	return rep, err
}

// lock is a held data-directory lock.
type lock interface{ Unlock() error }

// lockSources takes the LOCK of every distinct source directory, failing
// with an error wrapping storedir.ErrLocked when a daemon holds one. A
// read-only source (where no daemon can run) is read without its lock.
func (m *migration) lockSources(dirs []string) (unlock func(), err error) {
	var held []lock
	unlock = func() {
		for _, l := range held {
			l.Unlock()
		}
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		if err := checkSourceDir(d); err != nil {
			unlock()
			return nil, err
		}
		l, err := recovery.LockDataDir(d)
		if err != nil && !errors.Is(err, storedir.ErrLocked) && (errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)) {
			m.runWarnings = append(m.runWarnings, fmt.Sprintf("source %s is read-only: read without taking its lock (%v)", d, err))
			continue
		}
		if err != nil {
			unlock()
			return nil, fmt.Errorf("source %w", err)
		}
		held = append(held, l)
	}
	return unlock, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// renameDurably renames and fsyncs the parent directory.
func renameDurably(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("rename %s to %s: %w", from, to, err)
	}
	return syncDir(filepath.Dir(to))
}

// runInto migrates into a new data directory.
func (m *migration) runInto(ctx context.Context) (*Report, error) {
	unlock, err := m.lockSources(m.sources)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep, err := m.migrateInto(ctx)
	if err != nil || rep.AlreadyComplete {
		return rep, err
	}
	if err := m.removeState(m.target); err != nil {
		return rep, err
	}
	return rep, nil
}

// runInPlace migrates Sources[0] into Sources[0]+".migrate-new" and swaps
// the two (see the package documentation), finishing an interrupted swap
// first when there is one.
func (m *migration) runInPlace(ctx context.Context) (*Report, error) {
	dir := m.sources[0]
	newDir, oldDir := dir+newSuffix, dir+oldSuffix
	dirOK, newOK, oldOK := exists(dir), exists(newDir), exists(oldDir)
	switch {
	case !dirOK && oldOK && newOK:
		// Interrupted between the two renames: redo the second.
		l, err := recovery.LockDataDir(newDir)
		if err != nil {
			return nil, err
		}
		defer l.Unlock()
		if err := renameDurably(newDir, dir); err != nil {
			return nil, err
		}
		if err := m.opt.hook(StepRenamedNew); err != nil {
			return nil, err
		}
		return m.finishSwap(dir, oldDir)
	case dirOK && oldOK:
		l, err := recovery.LockDataDir(dir)
		if err != nil {
			return nil, err
		}
		defer l.Unlock()
		return m.finishSwap(dir, oldDir)
	case !dirOK:
		return nil, fmt.Errorf("source %s: %w", dir, fs.ErrNotExist)
	}
	// The swap finished; only its state is left to remove.
	if exists(filepath.Join(dir, stateDirName)) || exists(filepath.Join(dir, stateDeletingName)) {
		if !exists(filepath.Join(dir, stateDeletingName)) {
			if stage, _, err := readFinishedState(dir, m.log); err != nil {
				return nil, err
			} else if stage != stageVerified {
				return nil, fmt.Errorf("%w: %s holds an unfinished migration into it (stage %q); finish that one first", ErrTargetNotEmpty, dir, stage)
			}
		}
		l, err := recovery.LockDataDir(dir)
		if err != nil {
			return nil, err
		}
		defer l.Unlock()
		return m.finishSwap(dir, oldDir)
	}

	unlock, err := m.lockSources(m.sources)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep, err := m.migrateInto(ctx)
	if err != nil {
		return rep, err
	}
	l, err := recovery.LockDataDir(newDir)
	if err != nil {
		return rep, err
	}
	defer l.Unlock()
	if err := renameDurably(dir, oldDir); err != nil {
		return rep, err
	}
	if err := m.opt.hook(StepRenamedOld); err != nil {
		return rep, err
	}
	if err := renameDurably(newDir, dir); err != nil {
		return rep, fmt.Errorf("%w (the verified migration is in %s, the original in %s; a daemon may have created %s meanwhile: remove it if it is empty and re-run)", err, newDir, oldDir, dir)
	}
	if err := m.opt.hook(StepRenamedNew); err != nil {
		return rep, err
	}
	if _, err := m.finishSwap(dir, oldDir); err != nil {
		return rep, err
	}
	return rep, nil
}

// finishSwap removes DIR.migrate-old once DIR is the verified new
// directory, then the migration state, and returns the recorded report.
func (m *migration) finishSwap(dir, oldDir string) (*Report, error) {
	var rep *Report
	if exists(filepath.Join(dir, stateDirName)) {
		stage, r, err := readFinishedState(dir, m.log)
		if err != nil {
			return nil, err
		}
		if stage != stageVerified {
			return nil, fmt.Errorf("both %s and %s exist, and %s holds no verified migration (stage %q): resolve by hand", dir, oldDir, dir, stage)
		}
		rep = r
	} else if exists(oldDir) {
		return nil, fmt.Errorf("both %s and %s exist, and %s holds no migration state: resolve by hand", dir, oldDir, dir)
	}
	if exists(oldDir) {
		if err := os.RemoveAll(oldDir); err != nil {
			return rep, fmt.Errorf("remove the original %s: %w", oldDir, err)
		}
		if err := syncDir(filepath.Dir(oldDir)); err != nil {
			return rep, err
		}
		if err := m.opt.hook(StepRemovedOld); err != nil {
			return rep, err
		}
	}
	if rep == nil {
		r, err := readReportFile(dir)
		if err != nil {
			return nil, err
		}
		rep = &r.Report
		rep.AlreadyComplete = true
	}
	rep.Resumed = true
	if err := m.removeState(dir); err != nil {
		return rep, err
	}
	return rep, nil
}

// readFinishedState reads the stage and report of the migration state in
// dir without changing it.
func readFinishedState(dir string, log *slog.Logger) (stage string, rep *Report, err error) {
	st, err := openState(filepath.Join(dir, stateDirName, stateDBName), log)
	if err != nil {
		return "", nil, err
	}
	defer st.close()
	if _, err := st.getMeta(metaStage, &stage); err != nil {
		return "", nil, err
	}
	var r Report
	ok, err := st.getMeta(metaReport, &r)
	if err != nil {
		return "", nil, err
	}
	if ok {
		rep = &r
	}
	return stage, rep, nil
}

// removeState removes dir/.migrate crash-safely: renamed to
// .migrate.deleting first, so that a crash while removing it leaves a name
// that says the migration was complete.
func (m *migration) removeState(dir string) error {
	st, del := filepath.Join(dir, stateDirName), filepath.Join(dir, stateDeletingName)
	if exists(st) {
		if exists(del) {
			if err := os.RemoveAll(del); err != nil {
				return fmt.Errorf("remove %s: %w", del, err)
			}
		}
		if err := renameDurably(st, del); err != nil {
			return err
		}
		if err := m.opt.hook(StepStateMarked); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(del); err != nil {
		return fmt.Errorf("remove %s: %w", del, err)
	}
	return nil
}

// reportFile is the content of .migrate-report.json.
type reportFile struct {
	Params params `json:"params"`
	Report Report `json:"report"`
}

func readReportFile(dir string) (*reportFile, error) {
	path := filepath.Join(dir, reportFileName)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("migration report: %w", err)
	}
	if fi.Size() > maxMetaValue {
		return nil, fmt.Errorf("migration report %s: %d bytes, more than %d", path, fi.Size(), maxMetaValue)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("migration report: %w", err)
	}
	var r reportFile
	if err := decodeJSON(b, &r); err != nil {
		return nil, fmt.Errorf("migration report %s: %w", path, err)
	}
	return &r, nil
}

// writeReportFile writes .migrate-report.json atomically and durably.
func writeReportFile(dir string, r *reportFile) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("migration report: %w", err)
	}
	path := filepath.Join(dir, reportFileName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("migration report: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("migration report %s: %w", tmp, err)
	}
	return renameDurably(tmp, path)
}

// currentParams resolves the parameters of this run: the manifest of the
// sources and the target's chunk options.
func (m *migration) currentParams() (params, error) {
	stores, err := buildManifest(m.sources)
	if err != nil {
		return params{}, err
	}
	for _, st := range stores {
		if _, ok := m.opt.Upgraders[st.Version]; !ok {
			return params{}, fmt.Errorf("%w: source store %s has format version %d; this ztsctl reads %v",
				ErrUnknownVersion, st.Dir, st.Version, versions(m.opt.Upgraders))
		}
	}
	p := params{Sources: m.sources, InPlace: m.opt.InPlace, SinceNS: m.opt.SinceNS, UntilNS: m.opt.UntilNS,
		DropAttrs: dropAttrStrings(m.opt.DropAttrs), Stores: stores}
	def := storedir.DefaultOptions().Chunk
	if len(stores) > 0 {
		def = stores[0].options()
	}
	p.Compression, p.Checksums = def.Compression.String(), def.Checksums
	if m.opt.Compression != nil {
		p.Compression = m.opt.Compression.String()
	}
	if m.opt.Checksums != nil {
		p.Checksums = *m.opt.Checksums
	}
	if p.Stores == nil {
		p.Stores = []sourceStore{}
	}
	if p.DropAttrs == nil {
		p.DropAttrs = []string{}
	}
	return p, nil
}

func versions(ups map[int]Upgrader) []int {
	var vs []int
	for v := range ups {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// targetEntriesOtherThan lists what dir holds besides the given names.
func targetEntriesOtherThan(dir string, allowed ...string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", dir, err)
	}
	var out []string
next:
	for _, e := range entries {
		for _, a := range allowed {
			if e.Name() == a {
				continue next
			}
		}
		out = append(out, e.Name())
	}
	return out, nil
}

// migrateInto copies the sources into m.target (resuming when it holds an
// interrupted migration), verifies, and records the report in the state and
// in .migrate-report.json. The state is left for the caller to remove.
func (m *migration) migrateInto(ctx context.Context) (rep *Report, err error) {
	p, err := m.currentParams()
	if err != nil {
		return nil, err
	}
	m.p = p
	stateDir := filepath.Join(m.target, stateDirName)
	if exists(filepath.Join(m.target, stateDeletingName)) && !exists(stateDir) {
		// A finished migration whose state removal was interrupted.
		if err := m.removeState(m.target); err != nil {
			return nil, err
		}
	}
	if !exists(stateDir) {
		if r, err := readReportFile(m.target); err == nil {
			if d := r.Params.diff(&p); d != "" || manifestDiff(r.Params.Stores, p.Stores) != "" {
				if d == "" {
					d = manifestDiff(r.Params.Stores, p.Stores)
				}
				return nil, fmt.Errorf("%w: %s holds a finished migration with other options or sources (%s)", ErrTargetNotEmpty, m.target, d)
			}
			rep := r.Report
			rep.AlreadyComplete = true
			return &rep, nil
		}
		others, err := targetEntriesOtherThan(m.target, lockFileName, stateNewName)
		if err != nil {
			return nil, err
		}
		if len(others) > 0 {
			return nil, fmt.Errorf("%w: %s holds %q and no interrupted migration", ErrTargetNotEmpty, m.target, others)
		}
	}

	sopt := storedir.DefaultOptions()
	sopt.Sync = storedir.SyncNone
	sopt.MaxStoreAge = 0
	if m.opt.MaxStoreSize > 0 {
		sopt.MaxStoreSize = m.opt.MaxStoreSize
	}
	comp, err := chunk.ParseCompression(p.Compression)
	if err != nil {
		return nil, err
	}
	sopt.Chunk = chunk.Options{Compression: comp, Checksums: p.Checksums}
	sopt.Limits = m.opt.Limits
	sopt.Logger = m.log
	sopt.Now = m.opt.Now
	m.db, err = storedir.Open(ctx, m.target, sopt)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	defer func() {
		if m.db != nil {
			if cerr := m.db.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("target: close: %w", cerr)
			}
		}
	}()
	started := exists(stateDir)
	if !started {
		if err := m.createState(stateDir); err != nil {
			return nil, err
		}
	}
	m.state, err = openState(filepath.Join(stateDir, stateDBName), m.log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := m.state.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if started {
		var recorded params
		ok, err := m.state.getMeta(metaParams, &recorded)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("migration state %s: %w: no parameters", stateDir, errCorruptState)
		}
		if d := recorded.diff(&p); d != "" {
			return nil, fmt.Errorf("%w: %s was started with %s", ErrParamsChanged, m.target, d)
		}
		if d := manifestDiff(recorded.Stores, p.Stores); d != "" {
			return nil, fmt.Errorf("%w: %s", ErrSourceChanged, d)
		}
		m.resumed = true
		m.log.Info("resuming an interrupted migration", "target", m.target)
	} else if err := m.opt.hook(StepStarted); err != nil {
		return nil, err
	}
	var stage string
	if _, err := m.state.getMeta(metaStage, &stage); err != nil {
		return nil, err
	}
	if stage == stageVerified {
		var r Report
		if ok, err := m.state.getMeta(metaReport, &r); err != nil {
			return nil, err
		} else if !ok {
			return nil, fmt.Errorf("migration state %s: %w: verified without a report", stateDir, errCorruptState)
		}
		r.Resumed = true
		rep = &r
	} else {
		if stage != stageCopied {
			if m.opt.filtered() {
				if err := m.plan(ctx); err != nil {
					return nil, err
				}
			}
			if err := m.copy(ctx); err != nil {
				return nil, err
			}
			if err := m.state.putMeta(metaStage, stageCopied); err != nil {
				return nil, err
			}
			if err := m.opt.hook(StepCopied); err != nil {
				return nil, err
			}
		}
		rep, err = m.report()
		if err != nil {
			return nil, err
		}
		v, err := m.verify(ctx)
		if err != nil {
			return rep, err
		}
		rep.Verify = *v
		if !v.OK {
			return rep, fmt.Errorf("%w: %d problems (first: %s)", ErrVerifyFailed, v.ProblemsTotal, v.Problems[0])
		}
		b := m.state.batch()
		if err := b.setMeta(metaReport, rep); err != nil {
			return rep, err
		}
		if err := b.setMeta(metaStage, stageVerified); err != nil {
			return rep, err
		}
		if err := b.commit(true); err != nil {
			return rep, err
		}
		if err := m.opt.hook(StepVerified); err != nil {
			return rep, err
		}
	}
	if err := writeReportFile(m.target, &reportFile{Params: p, Report: *rep}); err != nil {
		return rep, err
	}
	if err := m.opt.hook(StepReported); err != nil {
		return rep, err
	}
	return rep, nil
}

// createState creates the state with the parameters in .migrate.new and
// renames it to .migrate, so that a state always has its parameters.
func (m *migration) createState(stateDir string) error {
	tmp := filepath.Join(m.target, stateNewName)
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("migration state: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		return fmt.Errorf("migration state: %w", err)
	}
	st, err := openState(filepath.Join(tmp, stateDBName), m.log)
	if err != nil {
		return err
	}
	b := st.batch()
	err = b.setMeta(metaParams, m.p)
	if err == nil {
		err = b.setMeta(metaStage, stageCopy)
	}
	if err == nil {
		err = b.commit(true)
	}
	if cerr := st.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return renameDurably(tmp, stateDir)
}

// report builds the report from the parameters, the final checkpoint and
// the target's stores.
func (m *migration) report() (*Report, error) {
	var ck checkpoint
	if _, err := m.state.getMeta(metaCkpt, &ck); err != nil {
		return nil, err
	}
	target := m.target
	if m.p.InPlace {
		target = m.sources[0]
	}
	rep := &Report{Sources: m.p.Sources, Target: target, InPlace: m.p.InPlace, Resumed: m.resumed,
		Compression: m.p.Compression, Checksums: m.p.Checksums, SinceNS: m.p.SinceNS, UntilNS: m.p.UntilNS,
		DropAttrs: m.p.DropAttrs, SourceStores: len(m.p.Stores), Counters: ck.Counters}
	for _, st := range m.p.Stores {
		rep.SourceBytes += st.Size
		if st.Version != storedir.FormatVersion {
			rep.UpgradedStores++
		}
	}
	if m.db != nil {
		for _, in := range m.db.Stores() {
			rep.TargetStores++
			rep.TargetBytes += in.Bytes
		}
	}
	return rep, nil
}

// hashPiece returns the first 128 bits of the SHA-256 of sp's encoding as
// a chunk of its own: equal spans encode to equal bytes.
func (m *migration) hashPiece(sp *trace.Span) ([16]byte, error) {
	var h [16]byte
	c := *sp
	c.Children = nil
	if m.single == nil {
		m.single = make([]*trace.Span, 1)
	}
	m.single[0] = &c
	b, err := m.enc.Encode(m.hashBuf[:0], m.single)
	m.single[0] = nil
	if err != nil {
		return h, err
	}
	m.hashBuf = b
	sum := sha256.Sum256(b)
	copy(h[:], sum[:16])
	return h, nil
}

// validPiece reports whether a daemon would have stored sp.
func validPiece(sp *trace.Span) error {
	if sp.SpanID == 0 {
		return fmt.Errorf("span %s has no span id", sp.TraceID)
	}
	return sp.Validate()
}
