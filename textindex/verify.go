package textindex

import (
	"fmt"

	"github.com/cockroachdb/pebble"
)

// This file serves `ztsctl verify`: a full read of every key and value (to
// find damaged index files). OpenReadOnly is in textindex.go.

// CheckIntegrity reads every key and value of the text index (which
// verifies the checksum of every block read) and checks Pebble's level
// invariants. It returns the number of keys read.
func (ix *Index) CheckIntegrity() (int64, error) {
	if err := ix.acquire(); err != nil {
		return 0, err
	}
	defer ix.release()
	if err := ix.db.CheckLevels(&pebble.CheckLevelsStats{}); err != nil {
		return 0, fmt.Errorf("text index %s: check levels: %w", ix.dir, err)
	}
	iter, err := ix.db.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("text index %s: integrity: %w", ix.dir, err)
	}
	defer iter.Close()
	var n int64
	for iter.First(); iter.Valid(); iter.Next() {
		if _, err := iter.ValueAndErr(); err != nil {
			return n, fmt.Errorf("text index %s: key %q: %w", ix.dir, iter.Key(), err)
		}
		n++
	}
	if err := iter.Error(); err != nil {
		return n, fmt.Errorf("text index %s: integrity after %d keys: %w", ix.dir, n, err)
	}
	return n, nil
}
