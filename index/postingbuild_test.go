package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBlockPostingsMatchNaive builds a block's posting lists from random
// rows whose attributes and texts repeat at the same positions often (the
// case blockPostings.add shortcuts) and compares them with the definition:
// one posting per attribute, one per text that is not an attribute value
// of its row. Rows range from empty to larger than smallValueRow (the
// hash-set path), and a text that is a value in one row and not in the
// next sits at the same position. Values are drawn from 40 (few lists,
// long) and from 2^20 (thousands of lists: the key table grows several
// times in the block, and the next block reuses it), and one builder
// builds both, in that order and again.
func TestBlockPostingsMatchNaive(t *testing.T) {
	var p blockPostings
	for i, values := range []int{40, 1 << 20, 40, 1 << 20} {
		t.Run(fmt.Sprintf("values=%d/%d", values, i), func(t *testing.T) { checkBlockPostings(t, &p, values, uint64(i)) })
	}
}

func checkBlockPostings(t *testing.T, p *blockPostings, values int, seed uint64) {
	rng := rand.New(rand.NewPCG(19, 1+seed))
	var rows []row
	prev := row{}
	for off := 0; off < 3000; off++ {
		var r row
		if off > 0 && rng.IntN(3) > 0 {
			// Mostly the previous row with a few positions changed.
			r.attrs, r.texts = slices.Clone(prev.attrs), slices.Clone(prev.texts)
			for i := range r.attrs {
				if rng.IntN(4) == 0 {
					r.attrs[i].Value = uint64(rng.IntN(values))
				}
			}
			for i := range r.texts {
				if rng.IntN(4) == 0 {
					r.texts[i] = uint64(rng.IntN(values))
				}
			}
		} else {
			na := rng.IntN(3 * smallValueRow)
			for i := 0; i < na; i++ {
				r.attrs = append(r.attrs, KV{Key: uint64(100 + i), Value: uint64(rng.IntN(values))})
			}
			for i, nt := 0, rng.IntN(20); i < nt; i++ {
				r.texts = append(r.texts, uint64(rng.IntN(values)))
			}
		}
		// Rows hold no repeats (Batch.add makes them distinct).
		r.attrs = distinct(new([]KV), r.attrs)
		r.texts = distinct(new([]uint64), r.texts)
		rows = append(rows, r)
		prev = r
	}

	// The builder is reused from block to block: build an unrelated block
	// first.
	p.reset()
	for off, r := range rows[:100] {
		p.add(uint32(off), row{attrs: r.attrs[:len(r.attrs)/2], texts: r.texts})
	}
	p.finish()
	p.reset()
	for off, r := range rows {
		p.add(uint32(off), r)
	}
	p.finish()
	got := map[postKey][]uint32{}
	for k, offs := range p.all {
		if _, dup := got[k]; dup {
			t.Fatalf("list %+v yielded twice", k)
		}
		got[k] = slices.Clone(offs)
	}

	want := map[postKey][]uint32{}
	for off, r := range rows {
		for _, kv := range r.attrs {
			k := postKey{prefix: prefixAttr, a: kv.Key, b: kv.Value}
			want[k] = append(want[k], uint32(off))
		}
		for _, tx := range r.texts {
			if slices.ContainsFunc(r.attrs, func(kv KV) bool { return kv.Value == tx }) {
				continue
			}
			k := postKey{prefix: prefixText, a: tx}
			want[k] = append(want[k], uint32(off))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d lists, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("list %+v = %v, want %v", k, got[k], w)
		}
	}
}

// BenchmarkBlockPostings builds the posting lists of one sealed block
// (1<<DefaultBlockShift rows) shaped like the bench workload's spans: 24
// attributes (12 of them repeated from the previous row at the same
// position, the rest drawn from 50,000 values) and 30 texts (half repeated),
// as Batch.Commit does when a block fills. ns/row is per row.
func BenchmarkBlockPostings(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 7))
	n := 1 << DefaultBlockShift
	rows := make([]row, n)
	prev := row{}
	for off := range rows {
		var r row
		for i := range 24 {
			v := uint64(rng.IntN(50_000))
			if i < 12 && off > 0 && i < len(prev.attrs) {
				v = prev.attrs[i].Value
			}
			r.attrs = append(r.attrs, KV{Key: uint64(1000 + i), Value: v})
		}
		for i := range 30 {
			v := uint64(rng.IntN(50_000))
			if i < 15 && off > 0 && i < len(prev.texts) {
				v = prev.texts[i]
			}
			r.texts = append(r.texts, v)
		}
		r.attrs = distinct(new([]KV), r.attrs)
		r.texts = distinct(new([]uint64), r.texts)
		rows[off] = r
		prev = r
	}
	var p blockPostings
	lists := 0
	for b.Loop() {
		p.reset()
		for off, r := range rows {
			p.add(uint32(off), r)
		}
		p.finish()
		lists = 0
		for range p.all {
			lists++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	b.ReportMetric(float64(lists), "lists")
}

// TestPostingKeysTable: every key gets the next position once and keeps
// it while the table grows; a reset empties the table (kept) or, past
// maxKeptSlots places, drops it, and positions start again from 0.
func TestPostingKeysTable(t *testing.T) {
	var p postingKeys[KV]
	for _, n := range []int{1000, maxKeptSlots, 10} {
		p.reset()
		if len(p.keys) != 0 || (len(p.slots) > maxKeptSlots) {
			t.Fatalf("after reset: %d keys, %d places", len(p.keys), len(p.slots))
		}
		for round := range 2 {
			for i := range n {
				k := KV{Key: uint64(i % 7), Value: uint64(i)}
				if got := p.index(k); got != int32(i) {
					t.Fatalf("n=%d round %d: key %d at %d, want %d", n, round, i, got, i)
				}
			}
		}
		if len(p.keys) != n || 2*n > len(p.slots) {
			t.Fatalf("n=%d: %d keys in %d places", n, len(p.keys), len(p.slots))
		}
	}
}
