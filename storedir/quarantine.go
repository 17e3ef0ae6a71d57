package storedir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	crdberrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/textindex"
)

// Store states beyond open and sealed, as Info.State reports them. A
// quarantined or rebuilding store serves nothing (it is not in the DB's
// set); an orphaned directory was set aside at start-up.
const (
	// StateQuarantined: the store could not be opened and cannot be
	// repaired online (its data file is damaged, or its format needs
	// `ztsctl migrate`): it waits for `ztsctl recover` or the operator.
	StateQuarantined = "quarantined"
	// StateRebuilding: the store could not be opened but its data file is
	// intact; its indexes (and config.props when that was the damage) are
	// being rebuilt in the background, after which it serves again.
	StateRebuilding = "rebuilding"
	// StateOrphaned: a store directory without its data file that was not
	// provably an interrupted creation; it was renamed aside
	// (Info.ID is the new name) and nothing was deleted.
	StateOrphaned = "orphaned"
)

// orphanMark is what a store directory set aside is renamed to:
// "<id>.orphaned-<unix seconds>".
const orphanMark = ".orphaned-"

// outOfService is a store directory the DB does not serve: quarantined,
// rebuilding, or set aside.
type outOfService struct {
	id     uint32
	name   string // directory name under the data directory
	state  string
	reason string
	since  time.Time
}

// background runs the DB's repairs; Close cancels and waits for them.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
}

// Degraded lists the stores the DB does not serve (quarantined, being
// rebuilt, or set aside), oldest first; empty when every store serves.
func (db *DB) Degraded() []Info {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.degradedLocked()
}

// degradedLocked is Degraded with db.mu held.
func (db *DB) degradedLocked() []Info {
	out := make([]Info, 0, len(db.out))
	for _, o := range db.out {
		out = append(out, Info{ID: o.name, State: o.state, Reason: o.reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// setOut records (or replaces) the out-of-service entry of a directory.
func (db *DB) setOut(o *outOfService) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.out == nil {
		db.out = map[string]*outOfService{}
	}
	db.out[o.name] = o
}

func (db *DB) clearOut(name string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	delete(db.out, name)
}

// isInterruptedCreation reports whether a store directory without a data
// file is provably what an interrupted createStore leaves: nothing but
// config.props (state open, no chunks) and its temp files. Anything else —
// a sealed state, chunks counted, an index, any other file — means data
// existed and the directory must not be deleted.
func isInterruptedCreation(dir string) (bool, string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err.Error()
	}
	for _, e := range entries {
		name := e.Name()
		if name == propsFile || strings.HasPrefix(name, "."+propsFile+".tmp-") {
			continue
		}
		return false, fmt.Sprintf("it holds %s", name)
	}
	p, err := config.ReadPropsFile(filepath.Join(dir, propsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return true, ""
	}
	if err != nil {
		return false, fmt.Sprintf("%s does not read: %v", propsFile, err)
	}
	sp, err := config.StorePropsFrom(p)
	if err != nil {
		return false, fmt.Sprintf("%s does not parse: %v", propsFile, err)
	}
	if sp.State != stateOpen || sp.Chunks != 0 || sp.MasterChecksum != 0 {
		return false, fmt.Sprintf("%s says state=%s with %d chunks", propsFile, sp.State, sp.Chunks)
	}
	return true, ""
}

// handleMissingData deals with a store directory whose data file is
// missing: removed when it is provably an interrupted creation, otherwise
// renamed aside to <id>.orphaned-<time> and reported.
func (db *DB) handleMissingData(id uint32, dir string) error {
	if ok, why := isInterruptedCreation(dir); ok {
		db.log.Warn("removing a store directory without a data file (interrupted creation)", "dir", dir)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		return nil
	} else {
		aside := StoreName(id) + orphanMark + fmt.Sprint(db.opt.Now().Unix())
		if err := os.Rename(dir, filepath.Join(db.dir, aside)); err != nil {
			return fmt.Errorf("set aside %s: %w", dir, err)
		}
		if err := syncDir(db.dir); err != nil {
			return err
		}
		reason := fmt.Sprintf("traces.zts is missing and %s: not an interrupted creation, so nothing was deleted; moved aside to %s", why, aside)
		db.log.Error("store without a data file set aside", "store", StoreName(id), "dir", aside, "reason", reason)
		db.setOut(&outOfService{id: id, name: aside, state: StateOrphaned, reason: reason, since: db.opt.Now()})
	}
	return nil
}

// noteOrphan reports a directory set aside by an earlier start.
func (db *DB) noteOrphan(name string) {
	id, _ := ParseStoreName(name[:storeDigits])
	db.setOut(&outOfService{id: id, name: name, state: StateOrphaned,
		reason: "a store directory without traces.zts, set aside at an earlier start; inspect it, then move or delete it"})
}

// repairability says whether a store that failed to open can be rebuilt
// online: its data file must open with a valid header that agrees with
// config.props (when that parses), and its format must be this one.
// propsBad is true when config.props must be rewritten from the data file.
func repairability(dir string) (ok, propsBad bool, why string) {
	var props *config.StoreProps
	if p, err := config.ReadPropsFile(filepath.Join(dir, propsFile)); err == nil {
		if sp, err := config.StorePropsFrom(p); err == nil {
			props = &sp
		} else {
			propsBad = true
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		propsBad = true
	}
	if props != nil && props.FormatVersion > FormatVersion {
		return false, false, fmt.Sprintf("format version %d is written by a newer ztsd", props.FormatVersion)
	}
	if props != nil && props.FormatVersion < FormatVersion {
		return false, false, fmt.Sprintf("format version %d needs `ztsctl migrate`", props.FormatVersion)
	}
	f, err := chunk.Open(filepath.Join(dir, dataFile))
	if err != nil {
		return false, propsBad, fmt.Sprintf("the data file is damaged (%v): run `ztsctl recover`", err)
	}
	defer f.Close()
	if props != nil {
		if c, err := chunk.ParseCompression(props.Compression); err == nil {
			if want := (chunk.Options{Compression: c, Checksums: props.Checksums}); f.Options() != want {
				return false, false, fmt.Sprintf("the data file header says %v but config.props says %v: run `ztsctl recover`", f.Options(), want)
			}
		}
	}
	return true, propsBad, ""
}

// quarantine takes a store that failed to open out of service. When its
// data file is intact, its indexes (and a damaged config.props) are
// rebuilt in the background and it is brought online; otherwise it stays
// quarantined with the reason.
func (db *DB) quarantine(id uint32, dir string, openErr error) {
	name := StoreName(id)
	ok, propsBad, why := repairability(dir)
	if ok && db.readOnly != "" {
		ok, why = false, "the disk is full (read-only start): it is rebuilt when ztsd starts with free space"
	}
	if !ok {
		reason := fmt.Sprintf("%v; %s", openErr, why)
		db.log.Error("store quarantined: it does not open and cannot be repaired online; the other stores serve", "store", name, "reason", reason)
		db.setOut(&outOfService{id: id, name: name, state: StateQuarantined, reason: reason, since: db.opt.Now()})
		return
	}
	reason := fmt.Sprintf("%v; the data file is intact: rebuilding the indexes", openErr)
	db.log.Error("store quarantined while its indexes are rebuilt in the background; the other stores serve", "store", name, "reason", reason)
	db.setOut(&outOfService{id: id, name: name, state: StateRebuilding, reason: reason, since: db.opt.Now()})
	db.bg.wg.Add(1)
	go func() {
		defer db.bg.wg.Done()
		if err := db.rebuild(db.bg.ctx, id, dir, propsBad); err != nil {
			if db.bg.ctx.Err() != nil {
				return // closing: the next start tries again
			}
			r := fmt.Sprintf("%v; rebuilding its indexes failed: %v", openErr, err)
			db.log.Error("store stays quarantined: the rebuild failed", "store", name, "err", err)
			db.setOut(&outOfService{id: id, name: name, state: StateQuarantined, reason: r, since: db.opt.Now()})
		}
	}()
}

// rebuild deletes a store's indexes (derived data), rewrites config.props
// from the data file when it was damaged, opens the store (which re-indexes
// the whole data file) and adds it to the served set.
func (db *DB) rebuild(ctx context.Context, id uint32, dir string, propsBad bool) error {
	start := time.Now()
	if propsBad {
		if err := rewriteProps(dir, db.opt.Now()); err != nil {
			return err
		}
	}
	for _, d := range []string{metaDir, textDir} {
		// Renamed first, so that a crash never leaves a half-deleted index
		// under its own name.
		tmp := filepath.Join(dir, d+".damaged")
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove %s: %w", tmp, err)
		}
		if err := os.Rename(filepath.Join(dir, d), tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("set aside index %s: %w", d, err)
		}
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove %s: %w", tmp, err)
		}
	}
	// Out of service already and in the background: the whole data file
	// is re-indexed here, before the store serves again.
	opt := db.storeOptions()
	opt.syncCatchUp = math.MaxInt64
	s, err := openStore(ctx, dir, id, opt)
	if err != nil {
		return err
	}
	db.retMu.Lock() // no rotation or retention while the set changes
	defer db.retMu.Unlock()
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		s.close()
		return ErrClosed
	}
	newer := db.current != nil && db.current.id > id
	for _, x := range db.stores {
		newer = newer || x.id > id
	}
	db.mu.Unlock()
	if !s.Sealed() && newer {
		if err := s.seal(); err != nil {
			s.close()
			return err
		}
	}
	db.mu.Lock()
	i := sort.Search(len(db.stores), func(i int) bool { return db.stores[i].id > id })
	db.stores = append(db.stores[:i], append([]*Store{s}, db.stores[i:]...)...)
	if !s.Sealed() && db.current == nil {
		db.current = s
	}
	delete(db.out, StoreName(id))
	db.mu.Unlock()
	if s.Sealed() {
		db.releaseMemTables(s) // what the rebuild grew
	}
	db.log.Info("store rebuilt and serving again", "store", StoreName(id), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// rewriteProps replaces a damaged config.props with one derived from the
// data file's header (a sealed header has a master checksum). The
// counters are recomputed when the store is re-indexed.
func rewriteProps(dir string, now time.Time) error {
	f, err := chunk.Open(filepath.Join(dir, dataFile))
	if err != nil {
		return err
	}
	opt, master := f.Options(), f.MasterChecksum()
	f.Close()
	sp := config.StoreProps{FormatVersion: FormatVersion, Compression: opt.Compression.String(),
		Checksums: opt.Checksums, Created: now.UTC(), State: stateOpen}
	if master != 0 {
		sp.State, sp.MasterChecksum = stateSealed, master
	}
	path := filepath.Join(dir, propsFile)
	if b, err := os.ReadFile(path); err == nil {
		// Keep the damaged file's bytes for the operator.
		if err := os.WriteFile(path+".damaged", b, 0o640); err != nil {
			return fmt.Errorf("keep damaged %s: %w", propsFile, err)
		}
	}
	if err := config.WritePropsFileAtomic(path, sp.ToProps()); err != nil {
		return fmt.Errorf("rewrite %s: %w", path, err)
	}
	return nil
}

// isIndexDamage reports whether err from a store's index means the index
// itself is damaged (a Pebble table that fails its checksum, an entry
// that does not decode), as opposed to a cancelled request or a closed
// index.
func isIndexDamage(err error) bool {
	// Pebble marks its corruption errors the cockroachdb/errors way, which
	// the standard errors.Is does not see.
	return crdberrors.Is(err, pebble.ErrCorruption) || errors.Is(err, index.ErrCorrupt) || errors.Is(err, textindex.ErrCorrupt)
}

// indexDamaged handles a store whose index a read found damaged: the read
// leaves the store out and names it in its warnings (offset 0: the
// store's indexes, not a chunk), and the store is taken out of service and
// rebuilt in the background (quarantine), once. It returns the warning.
func (db *DB) indexDamaged(s *Store, err error) Warning {
	if s.remote != nil {
		return db.remoteIndexDamaged(s, err)
	}
	w := Warning{Store: StoreName(s.id), Offset: 0,
		Error: fmt.Sprintf("index damaged, store left out and being rebuilt: %v", err)}
	if !s.pulled.CompareAndSwap(false, true) {
		return w
	}
	db.log.Error("a store's index is damaged: the store is taken out of service and rebuilt from its data file", "store", StoreName(s.id), "err", err)
	db.setOut(&outOfService{id: s.id, name: StoreName(s.id), state: StateRebuilding,
		reason: fmt.Sprintf("index damaged: %v; rebuilding from the data file", err), since: db.opt.Now()})
	db.bg.wg.Add(1)
	go func() {
		defer db.bg.wg.Done()
		// Out of the served set first, so that no new reader takes it;
		// the readers that hold it finish before close returns.
		db.retMu.Lock()
		db.mu.Lock()
		for i, x := range db.stores {
			if x == s {
				db.stores = append(db.stores[:i:i], db.stores[i+1:]...)
				break
			}
		}
		if db.current == s {
			db.current = nil // the committer starts a new store
		}
		db.mu.Unlock()
		db.retMu.Unlock()
		if cerr := s.close(); cerr != nil {
			db.log.Warn("closing a store with a damaged index", "store", StoreName(s.id), "err", cerr)
		}
		db.cache.dropStore(s.key())
		db.layouts.dropStore(s.key())
		db.damage.forgetStore(s.key())
		if db.bg.ctx.Err() != nil {
			return
		}
		db.quarantine(s.id, s.dir, err)
	}()
	return w
}
