package index

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

// firstHitModel is FirstHit by definition: the first hit of the trace in
// the brute-force search, if it comes before the bound.
func firstHitModel(hits []Hit, id [16]byte, before *Cursor) (Hit, bool) {
	for _, h := range hits {
		if h.TraceID != id {
			continue
		}
		if before != nil && !hitBefore(h, Hit{SpanRef{StartNS: before.StartNS, TraceID: before.TraceID, SpanID: before.SpanID}}) {
			return Hit{}, false
		}
		return h, true
	}
	return Hit{}, false
}

func TestMatcherFirstHit(t *testing.T) {
	entries := genEntries(31, 600)
	ix := openTest(t, t.TempDir(), 6)
	t.Cleanup(func() { ix.Close() }) // after the matchers' cleanups
	m := &model{}
	fill(t, ix, m, entries, 32)
	rng := rand.New(rand.NewPCG(33, 34))
	ctx := context.Background()
	for pass, dense := range []bool{false, true, true} {
		if dense {
			ix.prefetchKeys = 1
		}
		if pass == 2 {
			open := ix.open
			ix.open = nil
			defer func() { ix.open = open }()
		}
		checked, found := 0, 0
		qs := queries(entries)
		for qi := pass; qi < len(qs); qi += 3 {
			q := qs[qi]
			want := m.search(q)
			q.After = &Cursor{StartNS: 1} // ignored
			mt, err := ix.NewMatcher(q)
			if err != nil {
				t.Fatal(err)
			}
			// A failing check must still close the matcher: ix.Close
			// (deferred above) waits for it.
			t.Cleanup(func() { mt.Close() })
			for k := 0; k < 12; k++ {
				var id [16]byte
				switch {
				case k == 0:
					id = [16]byte{0xfe, 0xed} // no such trace
				case k < 6 && len(want) > 0:
					id = want[rng.IntN(len(want))].TraceID
				default:
					id = entries[rng.IntN(len(entries))].TraceID
				}
				bounds := []*Cursor{nil}
				for b := 0; b < 3; b++ {
					e := entries[rng.IntN(len(entries))]
					if b == 2 && len(want) > 0 {
						c := want[rng.IntN(len(want))].Cursor()
						c.TraceID = id // the trace's own position: strictly before excludes it
						bounds = append(bounds, &c)
						continue
					}
					bounds = append(bounds, &Cursor{StartNS: e.StartNS, TraceID: e.TraceID, SpanID: e.SpanID})
				}
				for _, before := range bounds {
					wh, wok := firstHitModel(want, id, before)
					gh, gok, err := mt.FirstHit(ctx, id, before)
					if err != nil {
						t.Fatal(err)
					}
					if gok != wok || gh != wh {
						t.Fatalf("pass %d query %d %+v trace %x before %+v: got %+v %v, want %+v %v",
							pass, qi, qs[qi], id, before, gh, gok, wh, wok)
					}
					checked++
					if wok {
						found++
					}
				}
			}
			if err := mt.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if found < 400 {
			t.Fatalf("pass %d: only %d of %d checks find a hit: the data set does not exercise matching", pass, found, checked)
		}
	}
}

func TestMatcherSnapshotAndClose(t *testing.T) {
	ix := openTest(t, t.TempDir(), 5)
	t.Cleanup(func() { ix.Close() })
	fill(t, ix, nil, genEntries(41, 100), 42)
	q := Query{Attrs: []KV{{77, 7777}}}
	mt, err := ix.NewMatcher(q)
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte{0xee}
	b := ix.NewBatch()
	b.AddSpan(SpanEntry{TraceID: id, SpanID: 1, StartNS: 5, Attrs: []KV{{77, 7777}}})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, ok, err := mt.FirstHit(ctx, id, nil); ok || err != nil {
		t.Fatalf("an entry committed after the matcher's snapshot: %v %v", ok, err)
	}
	mt.Close()
	if _, _, err := mt.FirstHit(ctx, id, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	mt, err = ix.NewMatcher(q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mt.Close() })
	if h, ok, err := mt.FirstHit(ctx, id, nil); !ok || err != nil || h.SpanID != 1 {
		t.Fatalf("a new matcher: %+v %v %v", h, ok, err)
	}
	if _, ok, _ := mt.FirstHit(ctx, id, &Cursor{StartNS: 6}); ok {
		t.Fatal("an entry older than the bound")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := mt.FirstHit(cctx, id, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
