package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

// model is the brute-force reference: every entry added, in order.
type model struct {
	entries []SpanEntry
}

// genEntries returns a deterministic, adversarial data set: traces of 1–8
// spans, spans of 1–3 chunks, millisecond-granular start times (many ties),
// out-of-order arrival, a late import of old traces, Zipf-distributed
// attributes and texts.
func genEntries(seed uint64, ntraces int) []SpanEntry {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	zipfAttr := rand.NewZipf(rng, 1.3, 1, 40)
	zipfText := rand.NewZipf(rng, 1.1, 1, 300)
	var out []SpanEntry
	now := int64(1_700_000_000_000_000_000)
	for t := 0; t < ntraces; t++ {
		var tid [16]byte
		for i := range tid {
			tid[i] = byte(rng.UintN(256))
		}
		if t%50 == 7 {
			tid[0] = 0 // some trace ids share leading bytes
		}
		base := now + int64(t)*int64(time.Millisecond)*3
		if t > ntraces*3/4 && t%5 == 0 {
			base -= int64(time.Hour) // a late import of old data
		}
		nspans := 1 + rng.IntN(8)
		spanIDs := make([]uint64, nspans)
		for i := range spanIDs {
			spanIDs[i] = rng.Uint64()
		}
		for i := 0; i < nspans; i++ {
			parent := uint64(0)
			if i > 0 {
				parent = spanIDs[rng.IntN(i)]
				if rng.IntN(20) == 0 {
					parent = rng.Uint64() // parent outside the trace
				}
			}
			start := base + int64(rng.IntN(5))*int64(time.Millisecond) // ms ticks: ties
			if rng.IntN(10) == 0 {
				start += int64(rng.IntN(1000)) // sub-ms
			}
			dur := int64(rng.ExpFloat64() * float64(20*time.Millisecond))
			isErr := rng.IntN(10) == 0
			nattrs := rng.IntN(7)
			var attrs []KV
			for a := 0; a < nattrs; a++ {
				k := uint64(1 + rng.IntN(6))
				v := 100 + zipfAttr.Uint64()
				if k == 6 {
					v = 10_000 + rng.Uint64N(100_000) // high cardinality
				}
				attrs = append(attrs, KV{k, v})
			}
			var texts []uint64
			for x := rng.IntN(6); x > 0; x-- {
				texts = append(texts, 1000+zipfText.Uint64())
			}
			for _, kv := range attrs {
				if rng.IntN(2) == 0 {
					texts = append(texts, kv.Value)
				}
				if rng.IntN(4) == 0 {
					texts = append(texts, kv.Key)
				}
			}
			nchunks := 1
			if rng.IntN(6) == 0 {
				nchunks = 2 + rng.IntN(2)
			}
			for c := 0; c < nchunks; c++ {
				e := SpanEntry{
					TraceID: tid, SpanID: spanIDs[i], ParentID: parent, ChunkNum: uint32(c),
					StartNS: start, DurationNS: dur, Error: isErr && c == nchunks-1,
					Loc:   Location{ChunkOffset: int64(16 + len(out)/10*1000), Index: uint32(len(out) % 10)},
					Attrs: attrs, Texts: texts,
				}
				if c > 0 {
					e.Attrs = attrs[:len(attrs)/2]
					e.DurationNS = dur / int64(c+1)
				}
				out = append(out, e)
			}
		}
	}
	// Spans arrive slightly out of order: shuffle within windows of 20.
	for i := 0; i+20 <= len(out); i += 20 {
		w := out[i : i+20]
		rng.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
	}
	return out
}

func (m *model) add(e SpanEntry) { m.entries = append(m.entries, e) }

func matches(e SpanEntry, q Query) bool {
	if q.TextFilterAll {
		return false
	}
	if q.SinceNS != 0 && e.StartNS < q.SinceNS {
		return false
	}
	if q.UntilNS != 0 && e.StartNS >= q.UntilNS {
		return false
	}
	if e.DurationNS < q.MinDurationNS {
		return false
	}
	if q.ErrorsOnly && !e.Error {
		return false
	}
	for _, kv := range q.Attrs {
		if !slices.Contains(e.Attrs, kv) {
			return false
		}
	}
	if len(q.TextAny) > 0 {
		// An entry's text set is its Texts plus its attribute values.
		found := false
		for _, t := range q.TextAny {
			if slices.Contains(e.Texts, t) || slices.ContainsFunc(e.Attrs, func(kv KV) bool { return kv.Value == t }) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if a := q.After; a != nil {
		if e.StartNS > a.StartNS {
			return false
		}
		if e.StartNS == a.StartNS && !keyLess(e.TraceID, e.SpanID, a.TraceID, a.SpanID) {
			return false
		}
	}
	return true
}

func (m *model) search(q Query) []Hit {
	type ent struct {
		e   SpanEntry
		seq int
	}
	var sel []ent
	for i, e := range m.entries {
		if matches(e, q) {
			sel = append(sel, ent{e, i})
		}
	}
	slices.SortFunc(sel, func(a, b ent) int {
		if a.e.StartNS != b.e.StartNS {
			return int64Cmp(b.e.StartNS, a.e.StartNS)
		}
		if c := bytes.Compare(b.e.TraceID[:], a.e.TraceID[:]); c != 0 {
			return c
		}
		if a.e.SpanID != b.e.SpanID {
			return uint64Cmp(b.e.SpanID, a.e.SpanID)
		}
		if a.e.ChunkNum != b.e.ChunkNum {
			return int64Cmp(int64(a.e.ChunkNum), int64(b.e.ChunkNum))
		}
		return b.seq - a.seq
	})
	var hits []Hit
	for i, s := range sel {
		if i > 0 && sel[i-1].e.StartNS == s.e.StartNS && sel[i-1].e.TraceID == s.e.TraceID && sel[i-1].e.SpanID == s.e.SpanID {
			continue
		}
		hits = append(hits, Hit{refOf(s.e)})
	}
	return hits
}

func refOf(e SpanEntry) SpanRef {
	return SpanRef{TraceID: e.TraceID, SpanID: e.SpanID, ParentID: e.ParentID, ChunkNum: e.ChunkNum,
		Loc: e.Loc, StartNS: e.StartNS, DurationNS: e.DurationNS, Error: e.Error}
}

func (m *model) traceSpans(id [16]byte) []SpanRef {
	type k struct {
		span  uint64
		chunk uint32
	}
	latest := map[k]SpanRef{}
	for _, e := range m.entries {
		if e.TraceID == id {
			latest[k{e.SpanID, e.ChunkNum}] = refOf(e)
		}
	}
	var out []SpanRef
	for _, r := range latest {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b SpanRef) int {
		if a.StartNS != b.StartNS {
			return int64Cmp(a.StartNS, b.StartNS)
		}
		if a.ChunkNum != b.ChunkNum {
			return int64Cmp(int64(a.ChunkNum), int64(b.ChunkNum))
		}
		return uint64Cmp(a.SpanID, b.SpanID)
	})
	return out
}

// fill adds entries in batches of random size, setting the watermark to
// the running count.
func fill(t testing.TB, ix *Index, m *model, entries []SpanEntry, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < len(entries); {
		n := 1 + rng.IntN(300)
		end := min(len(entries), i+n)
		b := ix.NewBatch()
		for _, e := range entries[i:end] {
			b.AddSpan(e)
			if m != nil {
				m.add(e)
			}
		}
		b.SetWatermark(int64(end))
		if err := b.Commit(); err != nil {
			t.Fatalf("commit at %d: %v", i, err)
		}
		i = end
	}
}

func collect(t testing.TB, ix *Index, q Query) []Hit {
	t.Helper()
	var hits []Hit
	var traces []HitTrace
	if err := ix.SearchTraces(context.Background(), q, func(h Hit, tr HitTrace) bool {
		hits = append(hits, h)
		traces = append(traces, tr)
		return true
	}); err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	// The trace entries a hit comes with are what TraceSpans reads (the
	// first hits: each costs a lookup).
	for i := range min(len(hits), 20) {
		want, err := ix.TraceSpans(hits[i].TraceID)
		if err != nil {
			t.Fatal(err)
		}
		if got := traces[i].Spans(); !slices.Equal(got, want) {
			t.Fatalf("search %+v hit %d: HitTrace.Spans() = %+v, TraceSpans = %+v", q, i, got, want)
		}
	}
	return hits
}

func openTest(t testing.TB, dir string, shift int) *Index {
	t.Helper()
	ix, err := Open(dir, Options{BlockShift: shift, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func diffHits(got, want []Hit) string {
	if len(got) != len(want) {
		n := min(len(got), len(want))
		for i := 0; i < n; i++ {
			if got[i] != want[i] {
				return fmt.Sprintf("%d hits, want %d; first difference at %d: got %+v want %+v", len(got), len(want), i, got[i], want[i])
			}
		}
		return fmt.Sprintf("%d hits, want %d (prefix equal)", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("hit %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	return ""
}

// queries returns every combination of the filter options over the data
// set's time range.
func queries(entries []SpanEntry) []Query {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, e := range entries {
		lo, hi = min(lo, e.StartNS), max(hi, e.StartNS)
	}
	mid := lo + (hi-lo)/2
	times := [][2]int64{{0, 0}, {mid, 0}, {0, mid}, {mid - (hi-lo)/5, mid + (hi-lo)/5}, {hi, 0}}
	durs := []int64{0, int64(25 * time.Millisecond)}
	attrs := [][]KV{nil, {{1, 101}}, {{1, 101}, {2, 101}}, {{3, 115}}, {{1, 99999}}, {{6, attrValue(entries[len(entries)/2], 6)}}}
	texts := [][]uint64{nil, {1001}, {1017, 1200, 1250, 77}, {424242}, {115, 3}, {attrValue(entries[len(entries)/3], 6), 1050}, manyTexts()}
	var qs []Query
	for _, tr := range times {
		for _, d := range durs {
			for _, errs := range []bool{false, true} {
				for _, a := range attrs {
					for _, tx := range texts {
						qs = append(qs, Query{SinceNS: tr[0], UntilNS: tr[1], MinDurationNS: d, ErrorsOnly: errs, Attrs: a, TextAny: tx})
					}
				}
			}
		}
	}
	qs = append(qs, Query{TextFilterAll: true}, Query{TextFilterAll: true, TextAny: []uint64{1001}})
	return qs
}

func manyTexts() []uint64 {
	var ids []uint64
	for i := uint64(1000); i < 1300; i++ {
		ids = append(ids, i)
	}
	ids = append(ids, 120, 121, 122, 123, 124, 125)
	return ids
}

// attrValue returns the value of attribute key k of the entry, or 1.
func attrValue(e SpanEntry, k uint64) uint64 {
	for _, kv := range e.Attrs {
		if kv.Key == k {
			return kv.Value
		}
	}
	return 1
}

func TestSearchMatchesBruteForce(t *testing.T) {
	entries := genEntries(1, 700)
	ix := openTest(t, t.TempDir(), 6)
	defer ix.Close()
	m := &model{}
	fill(t, ix, m, entries, 2)
	if st := ix.Stats(); st.Spans != uint64(len(entries)) || st.Blocks != (st.Spans+uint64(ix.blockSize)-1)>>ix.blockShift {
		t.Fatalf("stats %+v, want %d spans", st, len(entries))
	}
	for pass, dense := range []bool{false, true, true} {
		if dense {
			ix.prefetchKeys = 1 // every multi-block conjunct looked up block by block
		}
		if pass == 2 {
			// The open block's rows instead of its in-memory index, as when
			// the block is sealed while a search runs.
			open := ix.open
			ix.open = nil
			defer func() { ix.open = open }()
		}
		nonEmpty := 0
		for qi, q := range queries(entries) {
			want := m.search(q)
			got := collect(t, ix, q)
			if d := diffHits(got, want); d != "" {
				t.Fatalf("dense=%v query %d %+v: %s", dense, qi, q, d)
			}
			if len(want) > 0 {
				nonEmpty++
			}
		}
		if nonEmpty < 100 {
			t.Fatalf("only %d queries have hits: the data set does not exercise search", nonEmpty)
		}
	}
}

func TestSearchPagination(t *testing.T) {
	entries := genEntries(3, 500)
	ix := openTest(t, t.TempDir(), 5)
	defer ix.Close()
	m := &model{}
	fill(t, ix, m, entries, 4)
	qs := queries(entries)
	for qi := 0; qi < len(qs); qi += 5 {
		q := qs[qi]
		want := m.search(q)
		pages := []int{7, 100}
		if len(want) <= 60 {
			pages = append(pages, 1)
		}
		for _, page := range pages {
			var got []Hit
			qq := q
			for round := 0; ; round++ {
				var hits []Hit
				err := ix.Search(context.Background(), qq, func(h Hit) bool {
					hits = append(hits, h)
					return len(hits) < page
				})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, hits...)
				if len(hits) < page {
					break
				}
				c := hits[len(hits)-1].Cursor()
				qq.After = &c
				if round > len(want)+2 {
					t.Fatalf("query %d page %d: pagination does not terminate", qi, page)
				}
			}
			if d := diffHits(got, want); d != "" {
				t.Fatalf("query %d page %d %+v: %s", qi, page, q, d)
			}
		}
	}
}

func TestTraceSpansAndSpan(t *testing.T) {
	entries := genEntries(5, 400)
	// Re-add a few entries at new locations: the latest must win.
	for i := 0; i < 30; i++ {
		e := entries[i*7]
		e.Loc = Location{ChunkOffset: 999_000 + int64(i), Index: 3}
		entries = append(entries, e)
	}
	ix := openTest(t, t.TempDir(), 6)
	defer ix.Close()
	m := &model{}
	fill(t, ix, m, entries, 6)
	seen := map[[16]byte]bool{}
	for _, e := range entries {
		if seen[e.TraceID] {
			continue
		}
		seen[e.TraceID] = true
		got, err := ix.TraceSpans(e.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		want := m.traceSpans(e.TraceID)
		if !slices.Equal(got, want) {
			t.Fatalf("trace %x:\n got %+v\nwant %+v", e.TraceID, got, want)
		}
		spans, err := ix.Span(e.TraceID, e.SpanID)
		if err != nil {
			t.Fatal(err)
		}
		var wantSpan []SpanRef
		for _, r := range want {
			if r.SpanID == e.SpanID {
				wantSpan = append(wantSpan, r)
			}
		}
		slices.SortStableFunc(wantSpan, func(a, b SpanRef) int { return int64Cmp(int64(a.ChunkNum), int64(b.ChunkNum)) })
		if !slices.Equal(spans, wantSpan) {
			t.Fatalf("span %x/%x: got %+v want %+v", e.TraceID, e.SpanID, spans, wantSpan)
		}
	}
	if traces := ix.Stats().Traces; traces != uint64(len(seen)) {
		t.Fatalf("traces = %d, want %d", traces, len(seen))
	}
	got, err := ix.TraceSpans([16]byte{1, 2, 3})
	if err != nil || got != nil {
		t.Fatalf("unknown trace: %v, %v", got, err)
	}

	// TraceChunks lists every trace once, in id order, with the distinct
	// chunks of its current entries: the re-added entries' old chunks are
	// not named unless another current entry lives there.
	var ids [][16]byte
	err = ix.TraceChunks(context.Background(), func(id [16]byte, offs []int64) error {
		ids = append(ids, id)
		var want []int64
		for _, r := range m.traceSpans(id) {
			want = append(want, r.Loc.ChunkOffset)
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if !slices.Equal(offs, want) {
			return fmt.Errorf("trace %x: chunks %v, want %v", id, offs, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(seen) || !slices.IsSortedFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }) {
		t.Fatalf("TraceChunks listed %d traces (sorted: %v), want %d", len(ids), slices.IsSortedFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }), len(seen))
	}
}

func TestAttrValues(t *testing.T) {
	entries := genEntries(7, 300)
	ix := openTest(t, t.TempDir(), 6)
	defer ix.Close()
	fill(t, ix, nil, entries, 8)
	for key := uint64(0); key <= 7; key++ {
		set := map[uint64]bool{}
		for _, e := range entries {
			for _, kv := range e.Attrs {
				if kv.Key == key {
					set[kv.Value] = true
				}
			}
		}
		var want []uint64
		for v := range set {
			want = append(want, v)
		}
		slices.Sort(want)
		got, err := ix.AttrValues(key, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("key %d: got %d values, want %d", key, len(got), len(want))
		}
		got, err = ix.AttrValues(key, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[:min(3, len(want))]) {
			t.Fatalf("key %d limit 3: got %v want %v", key, got, want[:min(3, len(want))])
		}
	}
}

// TestAttrKeys: the key listing equals the keys of the entries, from
// sealed blocks and the open block alike (key 1000 occurs only in the
// last entries, which stay in the open block), and a limit keeps the
// smallest.
func TestAttrKeys(t *testing.T) {
	entries := genEntries(7, 300)
	last := &entries[len(entries)-1]
	last.Attrs = append(slices.Clone(last.Attrs), KV{Key: 1000, Value: 1})
	ix := openTest(t, t.TempDir(), 6)
	defer ix.Close()
	fill(t, ix, nil, entries, 8)
	set := map[uint64]bool{}
	for _, e := range entries {
		for _, kv := range e.Attrs {
			set[kv.Key] = true
		}
	}
	var want []uint64
	for k := range set {
		want = append(want, k)
	}
	slices.Sort(want)
	if len(want) < 4 || want[len(want)-1] != 1000 {
		t.Fatalf("test entries have keys %v: want several and 1000", want)
	}
	got, err := ix.AttrKeys(0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AttrKeys(0) = %v, want %v", got, want)
	}
	if got, err = ix.AttrKeys(3); err != nil || !slices.Equal(got, want[:3]) {
		t.Fatalf("AttrKeys(3) = %v, %v; want %v", got, err, want[:3])
	}
}

func TestPersistenceAcrossReopen(t *testing.T) {
	entries := genEntries(9, 300)
	dir := t.TempDir()
	ix := openTest(t, dir, 6)
	m := &model{}
	half := len(entries) / 2
	fill(t, ix, m, entries[:half], 10)
	wm, _ := ix.Watermark()
	if wm != int64(half) {
		t.Fatalf("watermark %d, want %d", wm, half)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Watermark(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	// The block shift of an existing index wins over the option.
	ix = openTest(t, dir, 12)
	if ix.blockShift != 6 {
		t.Fatalf("block shift %d after reopen", ix.blockShift)
	}
	if wm, _ := ix.Watermark(); wm != int64(half) {
		t.Fatalf("watermark after reopen %d, want %d", wm, half)
	}
	// Continue where the watermark says, as the writer does after a crash.
	b := ix.NewBatch()
	for _, e := range entries[half:] {
		b.AddSpan(e)
		m.add(e)
	}
	b.SetWatermark(int64(len(entries)))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix = openTest(t, dir, 0)
	defer ix.Close()
	if wm, _ := ix.Watermark(); wm != int64(len(entries)) {
		t.Fatalf("watermark %d, want %d", wm, len(entries))
	}
	if st := ix.Stats(); st.Spans != uint64(len(entries)) || st.Blocks != (st.Spans+uint64(ix.blockSize)-1)>>ix.blockShift {
		t.Fatalf("stats %+v, want %d spans", st, len(entries))
	}
	for _, q := range queries(entries)[:60] {
		if d := diffHits(collect(t, ix, q), m.search(q)); d != "" {
			t.Fatalf("query %+v after reopen: %s", q, d)
		}
	}
}

func TestDeterministicRebuild(t *testing.T) {
	entries := genEntries(11, 200)
	a := openTest(t, t.TempDir(), 6)
	defer a.Close()
	b := openTest(t, t.TempDir(), 6)
	defer b.Close()
	fill(t, a, nil, entries, 12)
	fill(t, b, nil, entries, 99) // different batch boundaries
	for _, ix := range []*Index{a, b} {
		if err := ix.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := ix.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	// Same logical contents, key by key, once compacted.
	ia, _ := a.db.NewIter(nil)
	ib, _ := b.db.NewIter(nil)
	defer ia.Close()
	defer ib.Close()
	n := 0
	va, vb := ia.First(), ib.First()
	for ; va && vb; va, vb = ia.Next(), ib.Next() {
		if !bytes.Equal(ia.Key(), ib.Key()) {
			t.Fatalf("key %d: %x vs %x", n, ia.Key(), ib.Key())
		}
		if p := ia.Key()[0]; p == prefixTrace || p == prefixSeqs || p == prefixColumn {
			n++
			continue // operand boundaries follow batch boundaries
		}
		if !bytes.Equal(ia.Value(), ib.Value()) {
			t.Fatalf("key %x: values differ:\n%x\n%x", ia.Key(), ia.Value(), ib.Value())
		}
		n++
	}
	if va || vb {
		t.Fatalf("key counts differ after %d keys", n)
	}
	for _, q := range queries(entries)[:40] {
		if d := diffHits(collect(t, a, q), collect(t, b, q)); d != "" {
			t.Fatal(d)
		}
	}
}

func TestBatchConflictAndErrors(t *testing.T) {
	ix := openTest(t, t.TempDir(), 6)
	defer ix.Close()
	b1 := ix.NewBatch()
	b2 := ix.NewBatch()
	b1.AddSpan(SpanEntry{TraceID: [16]byte{1}, SpanID: 1})
	b2.AddSpan(SpanEntry{TraceID: [16]byte{2}, SpanID: 2})
	if err := b1.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b2.Commit(); !errors.Is(err, ErrBatchConflict) {
		t.Fatalf("second concurrent batch: %v", err)
	}
	if err := b1.Commit(); !errors.Is(err, ErrBatchConflict) {
		t.Fatalf("committing twice: %v", err)
	}
	b3 := ix.NewBatch()
	b3.AddSpan(SpanEntry{TraceID: [16]byte{3}, Loc: Location{ChunkOffset: -1}})
	if err := b3.Commit(); err == nil {
		t.Fatal("negative chunk offset accepted")
	}
	if st := ix.Stats(); st.Spans != 1 || st.Traces != 1 {
		t.Fatalf("stats %+v after failed commits", st)
	}
	if _, err := Open(t.TempDir(), Options{BlockShift: 30}); err == nil {
		t.Fatal("block shift 30 accepted")
	}
}

func TestCorruptIndexIsReported(t *testing.T) {
	cases := []struct {
		name  string
		key   []byte
		value []byte
	}{
		{"format", keyFormat, []byte{9, 9}},
		{"block shift", keyFormat, []byte{formatVersion, 40}},
		{"state truncated", keyState, []byte{0x80}},
		{"state trailing bytes", keyState, append(appendState(nil, state{spans: 64}), 0)},
		{"more traces than spans", keyState, appendState(nil, state{spans: 64, traces: 65})},
		{"summaries missing", keyState, appendState(nil, state{spans: 1000, tail: blockSummary{n: 1000 % 64}})},
		{"summary", numKey(nil, prefixBlock, 0), []byte{0x80}},
		{"open block rows", numKey(nil, prefixRows, 1), []byte{0, 1, 0x80}},
		{"open block rows missing", numKey(nil, prefixRows, 1), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ix := openTest(t, dir, 6)
			fill(t, ix, nil, genEntries(1, 30)[:100], 1) // one sealed block and an open one
			if err := ix.db.Set(tc.key, tc.value, pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open: %v, want ErrCorrupt", err)
			}
		})
	}
	// A damaged trace value is reported by TraceSpans and Search, naming it.
	dir := t.TempDir()
	ix := openTest(t, dir, 6)
	defer ix.Close()
	entries := genEntries(1, 5)
	fill(t, ix, nil, entries, 1)
	if err := ix.db.Set(traceKey(nil, entries[0].TraceID), []byte{0, 1, 0xff}, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.TraceSpans(entries[0].TraceID); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("TraceSpans: %v", err)
	}
	err := ix.Search(context.Background(), Query{}, func(Hit) bool { return true })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Search: %v", err)
	}
}

func TestSearchCancel(t *testing.T) {
	ix := openTest(t, t.TempDir(), 6)
	defer ix.Close()
	fill(t, ix, nil, genEntries(1, 100), 1)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := ix.Search(ctx, Query{}, func(Hit) bool {
		n++
		if n == 3 {
			cancel()
		}
		return true
	})
	if !errors.Is(err, context.Canceled) || n < 3 {
		t.Fatalf("got %v after %d hits", err, n)
	}
}

func TestConcurrentReadersDuringWrites(t *testing.T) {
	entries := genEntries(13, 400)
	ix := openTest(t, t.TempDir(), 5)
	defer ix.Close()
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 8)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			q := Query{Attrs: []KV{{1, 101}}}
			if r == 1 {
				q = Query{ErrorsOnly: true, TextAny: []uint64{1001, 1002}}
			}
			for {
				select {
				case <-done:
					return
				default:
				}
				var prev *Hit
				err := ix.Search(context.Background(), q, func(h Hit) bool {
					if prev != nil && !hitBefore(*prev, h) {
						errc <- fmt.Errorf("out of order: %+v then %+v", *prev, h)
						return false
					}
					prev = &h
					if _, err := ix.TraceSpans(h.TraceID); err != nil {
						errc <- err
						return false
					}
					return true
				})
				if err != nil {
					errc <- err
					return
				}
			}
		}(r)
	}
	m := &model{}
	fill(t, ix, m, entries, 14)
	close(done)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	q := Query{Attrs: []KV{{1, 101}}}
	if d := diffHits(collect(t, ix, q), m.search(q)); d != "" {
		t.Fatal(d)
	}
}

// TestReadYourWritesWhileSearching: after every Commit, a search finds
// exactly what the model holds (attribute, text and attribute-value-as-text
// conditions, open block included), while other goroutines search all the
// time and so extend the open block's search lists concurrently with the
// commits and with each other. Batches are small and the blocks have 32
// entries, so most searches meet a partly filled open block and many
// batches seal one.
func TestReadYourWritesWhileSearching(t *testing.T) {
	entries := genEntries(23, 150)
	ix := openTest(t, t.TempDir(), 5)
	defer ix.Close()
	queries := []Query{
		{Attrs: []KV{{1, 101}}},
		{Attrs: []KV{{2, 100}, {1, 101}}},
		{TextAny: []uint64{1001, 1002}},
		{TextAny: []uint64{101}}, // an attribute value
		{Attrs: []KV{{1, 101}}, TextAny: []uint64{1003, 102}},
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 4)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := r; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if err := ix.Search(context.Background(), queries[i%len(queries)], func(Hit) bool { return true }); err != nil {
					errc <- err
					return
				}
			}
		}(r)
	}
	m := &model{}
	rng := rand.New(rand.NewPCG(24, 1))
	for i := 0; i < len(entries); {
		end := min(len(entries), i+1+rng.IntN(12))
		b := ix.NewBatch()
		for _, e := range entries[i:end] {
			b.AddSpan(e)
			m.add(e)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		i = end
		for _, q := range queries {
			if d := diffHits(collect(t, ix, q), m.search(q)); d != "" {
				close(done)
				wg.Wait()
				t.Fatalf("after %d entries, query %+v: %s", i, q, d)
			}
		}
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	for _, q := range queries {
		if len(m.search(q)) == 0 {
			t.Fatalf("query %+v matches nothing: the test checks too little", q)
		}
	}
}

// hitBefore reports whether a strictly precedes b in search order.
func hitBefore(a, b Hit) bool {
	if a.StartNS != b.StartNS {
		return a.StartNS > b.StartNS
	}
	return keyLess(b.TraceID, b.SpanID, a.TraceID, a.SpanID)
}

func TestReadOnlyEntriesAndIntegrity(t *testing.T) {
	if _, err := OpenReadOnly(t.TempDir(), Options{}); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("empty dir: %v", err)
	}
	dir := t.TempDir()
	ix := openTest(t, dir, 6)
	entries := genEntries(15, 60)
	m := &model{}
	fill(t, ix, m, entries, 16)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if st := ro.Stats(); st.Spans != uint64(len(entries)) {
		t.Fatalf("read-only stats %+v", st)
	}
	var got []SpanRef
	if err := ro.Entries(func(r SpanRef) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	var want []SpanRef
	for _, e := range entries {
		want = append(want, refOf(e))
	}
	cmp := func(a, b SpanRef) int {
		if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
			return c
		}
		if c := uint64Cmp(a.SpanID, b.SpanID); c != 0 {
			return c
		}
		return int64Cmp(int64(a.ChunkNum), int64(b.ChunkNum))
	}
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("Entries: %d refs, want %d", len(got), len(want))
	}
	n, err := ro.CheckIntegrity()
	if err != nil || n == 0 {
		t.Fatalf("CheckIntegrity: %d keys, %v", n, err)
	}
	q := Query{Attrs: []KV{{1, 101}}}
	if d := diffHits(collect(t, ro, q), m.search(q)); d != "" {
		t.Fatal(d)
	}
	b := ro.NewBatch()
	b.AddSpan(entries[0])
	if err := b.Commit(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("commit on read-only index: %v", err)
	}
}

// Conditions that only the open block (no posting lists yet) satisfies.
func TestSearchOpenBlockOnly(t *testing.T) {
	entries := genEntries(21, 400)
	ix := openTest(t, t.TempDir(), 6)
	defer ix.Close()
	m := &model{}
	fill(t, ix, m, entries, 22)
	fresh := []SpanEntry{
		{TraceID: [16]byte{0xee}, SpanID: 1, StartNS: 5, Attrs: []KV{{77, 7777}}, Texts: []uint64{88888}},
		{TraceID: [16]byte{0xee}, SpanID: 2, ParentID: 1, StartNS: 6, Attrs: []KV{{77, 7778}}, Error: true},
	}
	b := ix.NewBatch()
	for _, e := range fresh {
		b.AddSpan(e)
		m.add(e)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if ix.Stats().Spans%64 == 0 {
		t.Skip("the fresh entries sealed their block")
	}
	for _, q := range []Query{
		{Attrs: []KV{{77, 7777}}},
		{TextAny: []uint64{88888}},
		{TextAny: []uint64{7778}},
		{Attrs: []KV{{77, 7778}}, ErrorsOnly: true},
	} {
		want := m.search(q)
		if len(want) != 1 {
			t.Fatalf("query %+v: model has %d hits", q, len(want))
		}
		if d := diffHits(collect(t, ix, q), want); d != "" {
			t.Fatalf("query %+v: %s", q, d)
		}
	}
	vals, err := ix.AttrValues(77, 0)
	if err != nil || !slices.Equal(vals, []uint64{7777, 7778}) {
		t.Fatalf("AttrValues(77) = %v, %v", vals, err)
	}
}

// TestAddDistinctSpan fills one index with AddSpan and another with
// AddDistinctSpan from the same entries, their repeats removed and their
// attribute values listed among their texts (AddDistinctSpan's contract):
// both answer every query as the model does, and their stats agree.
func TestAddDistinctSpan(t *testing.T) {
	entries := genEntries(31, 300)
	for i := range entries {
		e := &entries[i]
		var attrs []KV
		for _, kv := range e.Attrs {
			if !slices.Contains(attrs, kv) {
				attrs = append(attrs, kv)
			}
		}
		var texts []uint64
		for _, x := range e.Texts {
			if !slices.Contains(texts, x) {
				texts = append(texts, x)
			}
		}
		for _, kv := range attrs {
			if !slices.Contains(texts, kv.Value) {
				texts = append(texts, kv.Value)
			}
		}
		e.Attrs, e.Texts = attrs, texts
	}
	plain, owned := openTest(t, t.TempDir(), 6), openTest(t, t.TempDir(), 6)
	defer plain.Close()
	defer owned.Close()
	m := &model{}
	fill(t, plain, m, entries, 32)
	for i := 0; i < len(entries); i += 77 {
		b := owned.NewBatch()
		for _, e := range entries[i:min(len(entries), i+77)] {
			b.AddDistinctSpan(e)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if ps, os := plain.Stats(), owned.Stats(); ps.Spans != os.Spans || ps.Traces != os.Traces || ps.Blocks != os.Blocks {
		t.Fatalf("stats: AddSpan %+v, AddDistinctSpan %+v", ps, os)
	}
	for qi, q := range queries(entries) {
		want := m.search(q)
		if d := diffHits(collect(t, owned, q), want); d != "" {
			t.Fatalf("query %d %+v: %s", qi, q, d)
		}
	}
}
