package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/recovery"
	"github.com/ztsd/ztsd/trace"
)

// verify checks the target against the sources and the seen-set (see the
// package documentation). Problems go into the result; the error is for
// failures to check at all. It closes the target DB (recovery's verify
// must not find the lock held).
func (m *migration) verify(ctx context.Context) (*Verification, error) {
	t0 := m.opt.Now()
	v := &Verification{Problems: []string{}}
	if err := m.state.deletePrefix(prefixVerify); err != nil {
		return nil, err
	}
	targetIDs, err := listStores(m.target)
	if err != nil {
		return nil, err
	}
	var total, done int64
	for _, st := range m.p.Stores {
		total += st.Size
	}
	var targets []sourceStore
	for _, id := range targetIDs {
		st, err := targetStore(m.target, id)
		if err != nil {
			return nil, err
		}
		targets = append(targets, st)
		total += st.Size
	}
	if err := m.verifySources(ctx, v, &done, total); err != nil {
		return nil, err
	}
	if err := m.verifyTargetPieces(ctx, v, targets, &done, total); err != nil {
		return nil, err
	}
	if err := m.verifyReads(ctx, v); err != nil {
		return nil, err
	}
	if v.Pieces+v.OlderVersions != v.TargetPieces {
		v.problem("the target holds %d pieces, the sources %d and %d older versions", v.TargetPieces, v.Pieces, v.OlderVersions)
	}
	// recovery's verify: chunks, master checksums, and both indexes
	// against the data files, exactly as `ztsctl verify` checks them.
	if err := m.db.Close(); err != nil {
		return nil, fmt.Errorf("target: close: %w", err)
	}
	m.db = nil
	vr, err := recovery.VerifyDataDir(ctx, m.target, recovery.Options{Limits: m.opt.Limits, Logger: m.log})
	if err != nil {
		return nil, fmt.Errorf("verify target: %w", err)
	}
	v.StoresVerified = len(vr.Stores)
	for _, p := range vr.Problems {
		v.problem("ztsctl verify: store %s: %s", p.Store, p)
	}
	v.OK = v.ProblemsTotal == 0
	v.Seconds = m.opt.Now().Sub(t0).Seconds()
	return v, nil
}

// verifySources re-reads the sources: every piece the filters keep must be
// in the seen-set, its last occurrence with the recorded content; no piece
// the filters drop may be.
func (m *migration) verifySources(ctx context.Context, v *Verification, done *int64, total int64) error {
	verdicts := map[trace.TraceID]verdict{}
	for k, st := range m.p.Stores {
		base := *done
		err := readStore(ctx, st, chunk.HeaderSize, m.opt.Upgraders[st.Version], m.opt.Limits, func(sc sourceChunk) error {
			m.opt.progress(PhaseVerify, base+sc.End, total)
			if sc.Err != nil {
				return nil // counted by the copy
			}
			if len(verdicts) > filterCacheEntries {
				clear(verdicts)
			}
			for i, sp := range sc.Spans {
				if validPiece(sp) != nil {
					continue
				}
				verd, err := m.filter(sp.TraceID, verdicts)
				if err != nil {
					return err
				}
				key := keyOf(sp)
				sv, ok, err := m.state.seen(key)
				if err != nil {
					return err
				}
				if verd != keep {
					if ok {
						v.problem("piece %s of %s (chunk at %d) is in the target, but the filters drop its trace", key, st.Dir, sc.Off)
					}
					continue
				}
				h, err := m.hashPiece(sp)
				if err != nil {
					continue // invalid: skipped by the copy too
				}
				v.SourcePieces++
				if !ok {
					v.problem("piece %s of %s (chunk at %d) is missing from the target", key, st.Dir, sc.Off)
					continue
				}
				// The seen-set holds the version written last, from its
				// first occurrence on: that one and every later
				// occurrence must equal it (earlier ones are older
				// versions), so the target's current version is the
				// sources' last occurrence.
				if loc := (pieceLoc{Store: uint32(k), Offset: sc.Off, Index: uint32(i)}); !loc.before(sv.Loc) && sv.Hash != h {
					if loc == sv.Loc {
						v.problem("piece %s of %s (chunk at %d): the source differs from what was copied", key, st.Dir, sc.Off)
					} else {
						v.problem("piece %s of %s (chunk at %d): a newer version than the one copied", key, st.Dir, sc.Off)
					}
				}
			}
			return nil
		}, func(chunk.BadRegion) error { return nil })
		if err != nil {
			return fmt.Errorf("verify sources: %w", err)
		}
		*done = base + st.Size
	}
	return nil
}

// verifyTargetPieces reads the target's data files: every piece must be in
// the seen-set. Where each was found is recorded under 'v', with its hash,
// so that verifyReads finds pieces missing, written twice in a row, or
// whose current (last) version differs from the recorded one.
func (m *migration) verifyTargetPieces(ctx context.Context, v *Verification, targets []sourceStore, done *int64, total int64) error {
	for _, st := range targets {
		base := *done
		err := readStore(ctx, st, chunk.HeaderSize, trace.DecodeChunk, m.opt.Limits, func(sc sourceChunk) error {
			m.opt.progress(PhaseVerify, base+sc.End, total)
			if sc.Err != nil {
				v.problem("target store %s: %v", st.Dir, sc.Err)
				return nil
			}
			b := m.state.batch()
			for i, sp := range sc.Spans {
				v.TargetPieces++
				key := keyOf(sp)
				_, ok, err := m.state.seen(key)
				if err != nil {
					return err
				}
				if !ok {
					v.problem("target store %s chunk at %d holds piece %s, which is not from the sources", st.Dir, sc.Off, key)
					continue
				}
				h, err := m.hashPiece(sp)
				if err != nil {
					v.problem("target store %s chunk at %d piece %s: %v", st.Dir, sc.Off, key, err)
					continue
				}
				b.set(prefixVerify, verifyKey(key, pieceLoc{Store: st.ID, Offset: sc.Off, Index: uint32(i)}), h[:])
			}
			return b.commit(false)
		}, func(br chunk.BadRegion) error {
			v.problem("target store %s: bad region at %d (%d bytes): %s", st.Dir, br.Offset, br.Length, br.Reason)
			return nil
		})
		if err != nil {
			return fmt.Errorf("verify target: %w", err)
		}
		*done = base + st.Size
	}
	return nil
}

// expectedPiece is a seen-set entry of the trace being checked.
type expectedPiece struct {
	key pieceKey
	val seenValue
}

// verifyReads reads every trace of the seen-set back through the target's
// indexes (storedir.DB.GetTrace) and compares it span by span with the
// sources.
func (m *migration) verifyReads(ctx context.Context, v *Verification) error {
	var ck checkpoint
	if _, err := m.state.getMeta(metaCkpt, &ck); err != nil {
		return err
	}
	src := newSourceReader(m.p.Stores, m.opt.Upgraders, m.opt.Limits)
	defer src.close()
	// The 'v' entries are in piece order too: walk them alongside.
	found, err := m.state.iter(prefixVerify)
	if err != nil {
		return err
	}
	defer found.Close()
	found.First()
	// copies checks the 'v' entries of piece k (its copies in the
	// target, in target order), skipping any before it (pieces not from
	// the sources, reported by verifyTargetPieces): each must differ from
	// the one before it (older versions stay, an identical copy is a
	// piece written twice) and the last, the version GetTrace serves,
	// must be the recorded one. It returns how many there are.
	copies := func(k pieceKey, want [16]byte) (int, error) {
		n := 0
		var prev []byte
		for ; found.Valid(); found.Next() {
			key := found.Key()
			if len(key) < 1+len(k) {
				continue
			}
			c := bytes.Compare(key[1:1+len(k)], k[:])
			if c > 0 {
				break
			}
			if c != 0 {
				continue
			}
			h := found.Value()
			if len(h) != len(want) {
				return 0, fmt.Errorf("%w: verification entry of piece %s holds %d bytes", errCorruptState, k, len(h))
			}
			if n > 0 && bytes.Equal(h, prev) {
				v.problem("piece %s is in the target's data files twice in a row", k)
			}
			prev = append(prev[:0], h...)
			n++
		}
		if n > 0 && !bytes.Equal(prev, want[:]) {
			v.problem("piece %s: the target's current version differs from the source's last", k)
		}
		return n, nil
	}
	var group []expectedPiece
	check := func() error {
		if len(group) == 0 {
			return nil
		}
		err := m.checkTrace(ctx, v, src, group)
		group = group[:0]
		return err
	}
	err = m.state.scanSeen(func(k pieceKey, sv seenValue) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(group) > 0 && group[0].key.traceID() != k.traceID() {
			if err := check(); err != nil {
				return err
			}
		}
		v.Pieces++
		n, err := copies(k, sv.Hash)
		if err != nil {
			return err
		}
		if n == 0 {
			v.problem("piece %s is not in the target's data files", k)
		} else {
			v.OlderVersions += int64(n - 1)
		}
		group = append(group, expectedPiece{k, sv})
		m.opt.progress(PhaseReads, v.Pieces, ck.Counters.SpansWritten)
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify reads: %w", err)
	}
	if err := check(); err != nil {
		return fmt.Errorf("verify reads: %w", err)
	}
	if err := found.Error(); err != nil {
		return fmt.Errorf("verify reads: %w", err)
	}
	return nil
}

// checkTrace compares one trace read through the target's indexes with
// the pieces the seen-set holds for it.
func (m *migration) checkTrace(ctx context.Context, v *Verification, src *sourceReader, group []expectedPiece) error {
	id := group[0].key.traceID()
	v.Traces++
	roots, err := m.db.GetTrace(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		v.problem("trace %s: not readable from the target: %v", id, err)
		return nil
	}
	got := map[trace.SpanID]*trace.Span{}
	var walk func(s *trace.Span)
	walk = func(s *trace.Span) {
		got[s.SpanID] = s
		for _, c := range s.Children {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	want := map[trace.SpanID][]expectedPiece{}
	for _, p := range group {
		want[p.key.spanID()] = append(want[p.key.spanID()], p)
	}
	if len(got) != len(want) {
		v.problem("trace %s: the target returns %d spans, the sources hold %d", id, len(got), len(want))
	}
	ids := make([]trace.SpanID, 0, len(want))
	for sid := range want {
		ids = append(ids, sid)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, sid := range ids {
		pieces := want[sid]
		g, ok := got[sid]
		if !ok {
			v.problem("trace %s: span %s is missing from the target", id, sid)
			continue
		}
		if len(pieces) == 1 {
			h, err := m.hashPiece(g)
			if err != nil || h != pieces[0].val.Hash {
				v.problem("trace %s span %s: read back from the target, it differs from the source (%v)", id, sid, err)
			}
			continue
		}
		// A streamed span: assemble the source pieces and compare.
		var parts []*trace.Span
		for _, p := range pieces {
			sp, err := src.piece(p.val.Loc)
			if err != nil {
				return fmt.Errorf("trace %s span %s: %w", id, sid, err)
			}
			parts = append(parts, sp)
		}
		wantSpan, err := trace.AssembleChunks(parts)
		if err != nil && !(errors.Is(err, trace.ErrMissingChunks) && wantSpan != nil) {
			return fmt.Errorf("trace %s span %s: assemble the source pieces: %w", id, sid, err)
		}
		gc := *g
		gc.Children = nil
		if d := trace.Diff(wantSpan, &gc); d != "" {
			v.problem("trace %s span %s: read back from the target, it differs from the source: %s", id, sid, d)
		}
	}
	return nil
}
