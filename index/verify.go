package index

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// This file serves `ztsctl verify` and recovery: a walk over every stored
// entry (to check the index against the data file) and a full read of every
// key and value (to find damaged index files). OpenReadOnly is in index.go.

// Entries calls fn for every entry stored in the index, trace by trace in
// trace-id order, including entries that a later entry for the same span
// chunk superseded (TraceSpans hides those). It stops at the first error fn
// returns and returns it.
func (ix *Index) Entries(fn func(SpanRef) error) error {
	return ix.scanTraces(context.Background(), "entries", func(_ [16]byte, recs []traceRec) error {
		for i := range recs {
			if err := fn(recs[i].ref); err != nil {
				return err
			}
		}
		return nil
	})
}

// CheckIntegrity reads every key and value of the index (which verifies
// the checksum of every block read) and checks Pebble's level invariants.
// It returns the number of keys read.
func (ix *Index) CheckIntegrity() (int64, error) {
	if err := ix.acquire(); err != nil {
		return 0, err
	}
	defer ix.release()
	if err := ix.db.CheckLevels(&pebble.CheckLevelsStats{}); err != nil {
		return 0, fmt.Errorf("index %s: check levels: %w", ix.dir, err)
	}
	iter, err := ix.db.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("index %s: integrity: %w", ix.dir, err)
	}
	defer iter.Close()
	var n int64
	for iter.First(); iter.Valid(); iter.Next() {
		if _, err := iter.ValueAndErr(); err != nil {
			return n, fmt.Errorf("index %s: key %q: %w", ix.dir, iter.Key(), err)
		}
		n++
	}
	if err := iter.Error(); err != nil {
		return n, fmt.Errorf("index %s: integrity after %d keys: %w", ix.dir, n, err)
	}
	return n, nil
}
