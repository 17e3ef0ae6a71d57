package index

import (
	"context"
	"fmt"
	"slices"

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

// TraceChunks calls fn, for every trace the index holds in key order (trace
// id ascending) from a consistent snapshot, with the data-file offsets of
// the chunks holding the trace's current span entries (the ones a get of
// the trace reads), ascending and distinct. offs is reused after fn
// returns. It is one scan of the trace keys: building a store's trace
// directory costs a sequential read of the index, not a point lookup per
// trace. It stops at fn's first error, or early with ctx's error.
func (ix *Index) TraceChunks(ctx context.Context, fn func(id [16]byte, offs []int64) error) error {
	var offs []int64
	return ix.scanTraces(ctx, "trace chunks", func(id [16]byte, recs []traceRec) error {
		recs = currentRecords(recs)
		offs = offs[:0]
		for _, r := range recs {
			offs = append(offs, r.ref.Loc.ChunkOffset)
		}
		slices.Sort(offs)
		return fn(id, slices.Compact(offs))
	})
}

// scanTraces calls fn with every trace's decoded entries (all of them,
// superseded ones included; recs is reused after fn returns), in trace-id
// order, from one iterator over the trace keys. A malformed key or value
// is an ErrCorrupt error naming the index and what; op names the caller
// in other errors. It checks ctx every 1024 traces.
func (ix *Index) scanTraces(ctx context.Context, op string, fn func(id [16]byte, recs []traceRec) error) error {
	if err := ix.acquire(); err != nil {
		return err
	}
	defer ix.release()
	lower := []byte{prefixTrace}
	iter, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return fmt.Errorf("index %s: %s: %w", ix.dir, op, err)
	}
	defer iter.Close()
	var recs []traceRec
	n := 0
	for iter.First(); iter.Valid(); iter.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k := iter.Key()
		if len(k) != 1+16 {
			return fmt.Errorf("index %s: %w", ix.dir, corruptf("trace key %x: want 17 bytes", k))
		}
		var id [16]byte
		copy(id[:], k[1:])
		v, err := iter.ValueAndErr()
		if err != nil {
			return fmt.Errorf("index %s: trace %x: %w", ix.dir, id, err)
		}
		if recs, err = decodeTraceValue(v, id, recs[:0]); err != nil {
			return fmt.Errorf("index %s: %w", ix.dir, err)
		}
		if err := fn(id, recs); err != nil {
			return err
		}
	}
	if err := iter.Error(); err != nil {
		return fmt.Errorf("index %s: %s: %w", ix.dir, op, err)
	}
	return nil
}
