package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// filterCacheEntries bounds the per-run cache of filter decisions.
const filterCacheEntries = 1 << 16

// copier copies source pieces into the target batch by batch.
type copier struct {
	m  *migration
	ck checkpoint // the last committed checkpoint
	// The batch being built: the pieces to append, the seen-set entries
	// to commit with the next checkpoint (written and recovered pieces),
	// the counters since ck, and the source bytes it covers.
	spans   []*trace.Span
	seen    map[pieceKey]seenValue
	pending Counters
	bytes   int64
	// recovered holds pieces found in the target past ck.Target: written
	// by an interrupted run after its last checkpoint. They are recorded,
	// not written again, when the copy meets them in the sources.
	// A piece may be there several times (versions, in target order).
	recovered map[pieceKey][][16]byte
	verdicts  map[trace.TraceID]verdict
}

// copy copies every source store from the checkpoint on.
func (m *migration) copy(ctx context.Context) error {
	c := &copier{m: m, seen: map[pieceKey]seenValue{}, verdicts: map[trace.TraceID]verdict{}}
	ok, err := m.state.getMeta(metaCkpt, &c.ck)
	if err != nil {
		return err
	}
	if !ok {
		c.ck = checkpoint{Offset: chunk.HeaderSize, RotatedFor: -1}
	}
	if err := c.ck.validate(len(m.p.Stores)); err != nil {
		return err
	}
	if err := c.recoverTargetTail(ctx); err != nil {
		return err
	}
	var total, before int64
	for i, st := range m.p.Stores {
		total += st.Size
		if i < c.ck.Store {
			before += st.Size
		}
	}
	for k := c.ck.Store; k < len(m.p.Stores); k++ {
		st := m.p.Stores[k]
		from := int64(chunk.HeaderSize)
		if k == c.ck.Store {
			from = max(c.ck.Offset, chunk.HeaderSize)
		}
		if st.Size < chunk.HeaderSize {
			c.pending.warn(fmt.Sprintf("source store %s: the data file is shorter than its header; it holds nothing", st.Dir))
		}
		err := readStore(ctx, st, from, m.opt.Upgraders[st.Version], m.opt.Limits,
			func(sc sourceChunk) error {
				if err := c.addChunk(k, sc); err != nil {
					return err
				}
				m.copiedBytes += sc.End - sc.Off
				m.copiedSpans += int64(len(sc.Spans))
				if c.bytes >= int64(m.opt.BatchBytes) {
					if err := c.flush(ctx, k, k, sc.End); err != nil {
						return err
					}
				}
				m.opt.progress(PhaseCopy, before+sc.End, total)
				return nil
			},
			func(br chunk.BadRegion) error {
				c.pending.region(regionOf(st.Dir, br))
				m.log.Warn("skipping a bad region of a source data file", "store", st.Dir, "offset", br.Offset, "length", br.Length, "reason", br.Reason.String())
				return nil
			})
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		c.pending.StoresRead++
		if err := c.flush(ctx, k, k+1, chunk.HeaderSize); err != nil {
			return err
		}
		before += st.Size
		m.opt.progress(PhaseCopy, before, total)
	}
	if len(c.recovered) > 0 {
		for k := range c.recovered {
			return fmt.Errorf("%w: the target holds %d pieces past its checkpoint that no source holds (e.g. %s); remove the target and start again",
				errCorruptState, len(c.recovered), k)
		}
	}
	return nil
}

// addChunk sorts the pieces of one source chunk into the batch.
func (c *copier) addChunk(store int, sc sourceChunk) error {
	m := c.m
	c.pending.ChunksRead++
	c.pending.BytesRead += sc.End - sc.Off
	c.bytes += sc.End - sc.Off
	if sc.Err != nil {
		c.pending.BadChunks++
		c.pending.warn(fmt.Sprintf("source store %s: %v: skipped", m.p.Stores[store].Dir, sc.Err))
		return nil
	}
	if len(c.verdicts) > filterCacheEntries {
		clear(c.verdicts)
	}
	for i, sp := range sc.Spans {
		c.pending.SpansRead++
		if err := validPiece(sp); err != nil {
			c.pending.InvalidSpans++
			c.pending.warn(fmt.Sprintf("source store %s chunk at offset %d span %d: %v: skipped", m.p.Stores[store].Dir, sc.Off, i, err))
			continue
		}
		v, err := m.filter(sp.TraceID, c.verdicts)
		if err != nil {
			return err
		}
		switch v {
		case dropByAttr:
			c.pending.DroppedByAttr++
			continue
		case dropByTime:
			c.pending.DroppedByTime++
			continue
		}
		k := keyOf(sp)
		h, err := m.hashPiece(sp)
		if err != nil {
			c.pending.InvalidSpans++
			c.pending.warn(fmt.Sprintf("source store %s chunk at offset %d span %d: %v: skipped", m.p.Stores[store].Dir, sc.Off, i, err))
			continue
		}
		// The current version of k: the last one written (in this batch,
		// or recorded in the seen-set). An identical piece is a duplicate;
		// a different one is a newer version, written after it.
		prev, had := c.seen[k]
		if !had {
			sv, dup, err := m.state.seen(k)
			if err != nil {
				return err
			}
			prev, had = sv, dup
		}
		if had && prev.Hash == h {
			c.pending.Duplicates++
			continue
		}
		sv := seenValue{Hash: h, Loc: pieceLoc{Store: uint32(store), Offset: sc.Off, Index: uint32(i)}}
		c.seen[k] = sv
		if had {
			c.pending.NewerVersions++
		} else {
			c.pending.SpansWritten++
		}
		if rh := c.recovered[k]; len(rh) > 0 {
			if rh[0] != h {
				return fmt.Errorf("%w: piece %s in the target past its checkpoint differs from the source's; remove the target and start again", errCorruptState, k)
			}
			if len(rh) == 1 {
				delete(c.recovered, k)
			} else {
				c.recovered[k] = rh[1:]
			}
			continue
		}
		c.spans = append(c.spans, sp)
	}
	return nil
}

// flush appends the batch (which holds pieces of source store k), makes it
// durable, and commits its seen-set entries with a checkpoint at
// (nextStore, nextOff).
func (c *copier) flush(ctx context.Context, k, nextStore int, nextOff int64) error {
	m := c.m
	if len(c.spans) > 0 {
		if err := c.rotateFor(k); err != nil {
			return err
		}
		if err := c.appendVersions(ctx); err != nil {
			return err
		}
		if err := m.db.Sync(); err != nil {
			return fmt.Errorf("copy: sync the target: %w", err)
		}
		if err := m.opt.hook(StepAppended); err != nil {
			return err
		}
	}
	ck := c.ck
	ck.Store, ck.Offset = nextStore, nextOff
	ck.Counters.add(c.pending)
	tip, err := c.targetTip()
	if err != nil {
		return err
	}
	ck.Target = tip
	b := m.state.batch()
	for key, v := range c.seen {
		b.set(prefixSeen, key[:], v.encode())
	}
	if err := b.setMeta(metaCkpt, ck); err != nil {
		return err
	}
	if err := b.commit(true); err != nil {
		return err
	}
	c.ck = ck
	c.spans = c.spans[:0]
	clear(c.seen)
	c.pending = Counters{}
	c.bytes = 0
	return m.opt.hook(StepCheckpoint)
}

// appendVersions appends the batch to the target in order. A batch may
// hold several versions of a piece; each Append call holds at most one of
// each, so that every call sees the version before it stored and indexed
// (storedir then supersedes it, exactly as when the source daemon stored
// the newer version).
func (c *copier) appendVersions(ctx context.Context) error {
	start := 0
	inCall := make(map[pieceKey]struct{}, len(c.spans))
	for i := 0; i <= len(c.spans); i++ {
		if i < len(c.spans) {
			k := keyOf(c.spans[i])
			if _, again := inCall[k]; !again {
				inCall[k] = struct{}{}
				continue
			}
		}
		if err := c.m.db.Append(ctx, c.spans[start:i]); err != nil {
			return fmt.Errorf("copy: append %d spans to the target: %w", i-start, err)
		}
		if i < len(c.spans) {
			clear(inCall)
			inCall[keyOf(c.spans[i])] = struct{}{}
		}
		start = i
	}
	return nil
}

// rotateFor starts a new target store for source store k, unless the
// current one was started for it or is still empty, and records that
// durably before anything of k is written.
func (c *copier) rotateFor(k int) error {
	if c.ck.RotatedFor == k {
		return nil
	}
	tip, err := c.targetTip()
	if err != nil {
		return err
	}
	if tip.Known && tip.Size > chunk.HeaderSize {
		if err := c.m.db.Rotate(); err != nil {
			return fmt.Errorf("copy: start a target store: %w", err)
		}
	}
	// ck.Target stays where it was: a resume scans from there, which
	// covers the new store too.
	ck := c.ck
	ck.RotatedFor = k
	if err := c.m.state.putMeta(metaCkpt, ck); err != nil {
		return err
	}
	c.ck = ck
	return c.m.opt.hook(StepRotated)
}

// targetTip returns the newest target store and the size of its data file.
func (c *copier) targetTip() (targetTip, error) {
	infos := c.m.db.Stores()
	if len(infos) == 0 {
		return targetTip{}, nil
	}
	id, ok := storedir.ParseStoreName(infos[len(infos)-1].ID)
	if !ok {
		return targetTip{}, fmt.Errorf("target store name %q", infos[len(infos)-1].ID)
	}
	// The end of its data, not the file's length: an open store's data
	// file ends in preallocated zeros that later appends overwrite.
	if size, ok := c.m.db.DataSize(id); ok {
		return targetTip{Known: true, Store: id, Size: size}, nil
	}
	fi, err := os.Stat(filepath.Join(c.m.target, storedir.StoreName(id), dataFileName))
	if err != nil {
		return targetTip{}, fmt.Errorf("target: %w", err)
	}
	return targetTip{Known: true, Store: id, Size: fi.Size()}, nil
}

// recoverTargetTail reads the target's data files past ck.Target: pieces
// an interrupted run wrote after its last checkpoint.
func (c *copier) recoverTargetTail(ctx context.Context) error {
	m := c.m
	ids, err := listStores(m.target)
	if err != nil {
		return err
	}
	tip := c.ck.Target
	for _, id := range ids {
		if tip.Known && id < tip.Store {
			continue
		}
		from := int64(chunk.HeaderSize)
		if tip.Known && id == tip.Store {
			from = max(tip.Size, chunk.HeaderSize)
		}
		st, err := targetStore(m.target, id)
		if err != nil {
			return err
		}
		if st.Size <= from {
			continue
		}
		err = readStore(ctx, st, from, trace.DecodeChunk, m.opt.Limits, func(sc sourceChunk) error {
			if sc.Err != nil {
				return fmt.Errorf("target store %s: %w", st.Dir, sc.Err)
			}
			for _, sp := range sc.Spans {
				// A piece already in the seen-set is a newer version of
				// it, written by the interrupted batch.
				k := keyOf(sp)
				h, err := m.hashPiece(sp)
				if err != nil {
					return fmt.Errorf("target store %s chunk at offset %d: %w", st.Dir, sc.Off, err)
				}
				if c.recovered == nil {
					c.recovered = map[pieceKey][][16]byte{}
				}
				c.recovered[k] = append(c.recovered[k], h)
			}
			return nil
		}, func(chunk.BadRegion) error { return nil })
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	if len(c.recovered) > 0 {
		m.log.Info("found pieces written after the last checkpoint", "pieces", len(c.recovered))
	}
	return nil
}

// targetStore describes a target store for readStore.
func targetStore(target string, id uint32) (sourceStore, error) {
	dir := filepath.Join(target, storedir.StoreName(id))
	fi, err := os.Stat(filepath.Join(dir, dataFileName))
	if err != nil {
		return sourceStore{}, fmt.Errorf("target: %w", err)
	}
	return sourceStore{Dir: dir, ID: id, Version: storedir.FormatVersion, Size: fi.Size()}, nil
}
