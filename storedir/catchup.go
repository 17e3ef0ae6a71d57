package storedir

import (
	"context"
	"fmt"
	"time"
)

// syncCatchUpBytes is the largest index lag that opening a store re-indexes
// before Open returns (about a fifth of a second of re-indexing): a larger
// lag — a kill -9 after a long run whose indexes Pebble had not flushed,
// or indexes deleted — is re-indexed in the background while the store
// already serves (startCatchUp), so that a restart serves within a second
// whatever the store's size.
const syncCatchUpBytes = 2 << 20

func (o storeOptions) syncCatchUpLimit() int64 {
	switch {
	case o.syncCatchUp < 0:
		return 0
	case o.syncCatchUp == 0:
		return syncCatchUpBytes
	}
	return o.syncCatchUp
}

// startCatchUp re-indexes, in the background, the part of the data file
// that a store opened with lagging indexes (openStore set catching) does
// not have in its indexes, then brings it into its place in the DB.
//
// While it runs the store serves what its indexes hold: searches and trace
// reads cover the data file up to the watermark and name the store in
// their warnings ("catching up", with the bytes left), and /healthz lists
// it. The store takes no writes: it is not the current store, so the first
// write creates a new store, whose acknowledged spans every read waits
// for the indexer to index, as always (read-your-writes). The catch-up is the catchUp
// of a synchronous open — the same chunk order, text ids, checkpoints
// every replayCheckpointBytes and torn-tail cut — so a crash during it
// costs at most one checkpoint of re-indexing at the next start, and every
// entry it writes names a chunk that was in the data file at open (after
// the tail cut, only whole chunks whose checksum validated).
//
// Because duplicate checks cannot see the spans past the watermark yet, a
// retried write may store again a span the lagging part holds; the store
// is marked superseded first, so that searches list such a span once (by
// its newest copy), as for any newer version.
//
// When it is done: a store that is still open and the newest becomes the
// current store if no newer one was created meanwhile; otherwise it is
// sealed (only now: sealing needs the torn tail cut). Its trace filter is
// then built.
func (db *DB) startCatchUp(s *Store) {
	ctx, cancel := context.WithCancel(db.bg.ctx)
	s.mu.Lock()
	s.catchUpCancel = cancel
	s.mu.Unlock()
	db.bg.wg.Add(1)
	go func() {
		defer db.bg.wg.Done()
		defer cancel()
		if err := db.catchUpStore(ctx, s); err != nil {
			if ctx.Err() != nil {
				return // closing: the next start carries on from the last checkpoint
			}
			s.log.Error("background re-indexing failed; the store serves what its indexes hold (restart, or run `ztsctl recover`)", "err", err)
			s.mu.Lock()
			s.catchUpFailed = err.Error()
			s.mu.Unlock()
		}
	}()
}

func (db *DB) catchUpStore(ctx context.Context, s *Store) error {
	s.refs.RLock() // the store stays open while we index it; close cancels ctx first
	defer s.refs.RUnlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := s.markSuperseded(); err != nil {
		return err
	}
	if err := s.catchUp(ctx, db.storeOptions()); err != nil {
		return err
	}
	if err := s.flushIndexes(); err != nil {
		return err // persist the work: a later crash does not redo it
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.caughtUp(s); err != nil {
		return err
	}
	if s.Sealed() {
		db.releaseMemTables(s) // what the re-indexing grew
	}
	s.filter.Store(newStoreFilter(s.meta.Stats().Traces, s.Sealed(), db.opt.MaxStoreSize))
	s.catching.Store(false)
	s.fillFilter(db.bg)
	s.log.Info("background re-indexing done: the store is fully indexed", "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// caughtUp puts a store whose catch-up finished in its place: the current
// store when it is open, the newest, and no store was created meanwhile;
// sealed when it is open and another store takes the writes.
func (db *DB) caughtUp(s *Store) error {
	if s.Sealed() {
		return nil
	}
	db.retMu.Lock() // no rotation while the current store is chosen
	defer db.retMu.Unlock()
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	becomesCurrent := db.current == nil && s.id+1 == db.storeSeq && db.readOnly == ""
	if becomesCurrent {
		db.current = s
	}
	db.mu.Unlock()
	if becomesCurrent {
		return nil
	}
	if err := s.seal(); err != nil {
		return fmt.Errorf("store %s: seal after catching up: %w", s.dir, err)
	}
	return nil
}

// catchUpWarning is the warning a read that used s attaches while s's
// indexes lag its data file; ok is false once they do not.
func (s *Store) catchUpWarning() (w Warning, ok bool) {
	if !s.catching.Load() {
		return Warning{}, false
	}
	wm, err := s.meta.Watermark()
	if tw, terr := s.text.Watermark(); err == nil && terr == nil {
		wm = min(wm, tw)
	}
	s.mu.Lock()
	failed := s.catchUpFailed
	s.mu.Unlock()
	msg := fmt.Sprintf("catching up after a restart: %d bytes of the data file past offset %d are not indexed yet; spans stored there are missing from this answer",
		max(s.data.Size()-wm, 0), wm)
	if failed != "" {
		msg = fmt.Sprintf("the indexes lag the data file past offset %d and re-indexing failed (%s); spans stored there are missing from this answer", wm, failed)
	}
	// The offset is the watermark, so that the warning stays apart from
	// the damaged chunks a read names (each by its own offset).
	return Warning{Store: StoreName(s.id), Offset: wm, Error: msg}, true
}

// CatchingUp lists the stores whose indexes are being brought up to their
// data files in the background (Info.IndexLag: the bytes left; Reason says
// so), oldest first; empty when every served store is fully indexed.
func (db *DB) CatchingUp() []Info {
	db.mu.RLock()
	var stores []*Store
	for _, s := range db.stores {
		if s.catching.Load() {
			stores = append(stores, s)
		}
	}
	db.mu.RUnlock()
	out := make([]Info, 0, len(stores))
	for _, s := range stores {
		out = append(out, s.info())
	}
	return out
}

// waitCatchUp waits until no store is catching up (tests).
func (db *DB) waitCatchUp(ctx context.Context) error {
	for len(db.CatchingUp()) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
