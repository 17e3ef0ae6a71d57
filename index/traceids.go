package index

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// TraceIDs calls fn with the id of every trace the index holds, in key
// order, from a consistent snapshot; it stops early with ctx's error.
func (ix *Index) TraceIDs(ctx context.Context, fn func(id [16]byte)) error {
	if err := ix.acquire(); err != nil {
		return err
	}
	defer ix.release()
	lower := []byte{prefixTrace}
	iter, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return fmt.Errorf("index %s: %w", ix.dir, err)
	}
	n := 0
	for iter.First(); iter.Valid(); iter.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				iter.Close()
				return err
			}
		}
		k := iter.Key()
		if len(k) != 17 {
			iter.Close()
			return fmt.Errorf("index %s: %w", ix.dir, corruptf("trace key of %d bytes", len(k)))
		}
		var id [16]byte
		copy(id[:], k[1:])
		fn(id)
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("index %s: %w", ix.dir, err)
	}
	return nil
}
