package migrate

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// planFlushEntries bounds the traces the plan aggregates in memory before
// merging them into the state database.
const planFlushEntries = 1 << 17

// plan records, for every trace of the sources, its earliest start and
// whether a span carries a dropped attribute. It is redone from scratch
// when an earlier run did not finish it (it only reads the sources).
func (m *migration) plan(ctx context.Context) error {
	var done bool
	if _, err := m.state.getMeta(metaPlanDone, &done); err != nil {
		return err
	}
	if done {
		return nil
	}
	if err := m.state.deletePrefix(prefixPlan); err != nil {
		return err
	}
	agg := make(map[trace.TraceID]planEntry)
	flush := func() error {
		ids := make([]trace.TraceID, 0, len(agg))
		for id := range agg {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
		b := m.state.batch()
		for _, id := range ids {
			e := agg[id]
			old, ok, err := m.state.plan(id)
			if err != nil {
				return err
			}
			if ok {
				e = e.merge(old)
			}
			b.set(prefixPlan, id[:], e.encode())
		}
		clear(agg)
		return b.commit(false)
	}
	var total, before int64
	for _, st := range m.p.Stores {
		total += st.Size
	}
	for _, st := range m.p.Stores {
		dec := m.opt.Upgraders[st.Version]
		if st.Version == storedir.FormatVersion && len(m.opt.DropAttrs) == 0 {
			// The time range needs no record trees.
			dec = trace.DecodeChunkSummaries
		}
		err := readStore(ctx, st, chunk.HeaderSize, dec, m.opt.Limits, func(c sourceChunk) error {
			for _, sp := range c.Spans {
				if validPiece(sp) != nil {
					continue
				}
				e := planEntry{StartNS: sp.StartNS, Drop: m.dropped(sp)}
				if old, ok := agg[sp.TraceID]; ok {
					e = e.merge(old)
				}
				agg[sp.TraceID] = e
			}
			if len(agg) >= planFlushEntries {
				if err := flush(); err != nil {
					return err
				}
			}
			m.opt.progress(PhasePlan, before+c.End, total)
			return nil
		}, func(chunk.BadRegion) error { return nil })
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		before += st.Size
	}
	if err := flush(); err != nil {
		return err
	}
	if err := m.state.putMeta(metaPlanDone, true); err != nil {
		return err
	}
	return m.opt.hook(StepPlanned)
}

// dropped reports whether sp carries one of the dropped attributes, as a
// span attribute or an attribute of its root record (what search matches).
func (m *migration) dropped(sp *trace.Span) bool {
	match := func(attrs trace.Attrs) bool {
		for _, d := range m.opt.DropAttrs {
			v, ok := attrs.Get(d.Key)
			if !ok || v.Kind == trace.KindList || v.Kind == trace.KindMap {
				continue
			}
			if v.Text() == d.Value.Text() {
				return true
			}
		}
		return false
	}
	if match(sp.Attrs) {
		return true
	}
	return sp.Root != nil && match(sp.Root.Attrs)
}

// verdict is what the filters decide for a trace.
type verdict uint8

const (
	keep verdict = iota
	dropByTime
	dropByAttr
)

// filter decides for the trace of a piece, caching decisions in cache
// (the caller clears it now and then).
func (m *migration) filter(id trace.TraceID, cache map[trace.TraceID]verdict) (verdict, error) {
	if !m.opt.filtered() {
		return keep, nil
	}
	if v, ok := cache[id]; ok {
		return v, nil
	}
	e, ok, err := m.state.plan(id)
	if err != nil {
		return keep, err
	}
	if !ok {
		return keep, fmt.Errorf("%w: the plan has no entry for trace %s", errCorruptState, id)
	}
	v := keep
	switch {
	case e.Drop:
		v = dropByAttr
	case m.opt.SinceNS != 0 && e.StartNS < m.opt.SinceNS, m.opt.UntilNS != 0 && e.StartNS >= m.opt.UntilNS:
		v = dropByTime
	}
	cache[id] = v
	return v, nil
}
