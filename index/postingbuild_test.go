package index

import (
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
// next sits at the same position.
func TestBlockPostingsMatchNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	var rows []row
	prev := row{}
	for off := 0; off < 3000; off++ {
		var r row
		if off > 0 && rng.IntN(3) > 0 {
			// Mostly the previous row with a few positions changed.
			r.attrs, r.texts = slices.Clone(prev.attrs), slices.Clone(prev.texts)
			for i := range r.attrs {
				if rng.IntN(4) == 0 {
					r.attrs[i].Value = uint64(rng.IntN(40))
				}
			}
			for i := range r.texts {
				if rng.IntN(4) == 0 {
					r.texts[i] = uint64(rng.IntN(40))
				}
			}
		} else {
			na := rng.IntN(3 * smallValueRow)
			for i := 0; i < na; i++ {
				r.attrs = append(r.attrs, KV{Key: uint64(100 + i), Value: uint64(rng.IntN(40))})
			}
			for i, nt := 0, rng.IntN(20); i < nt; i++ {
				r.texts = append(r.texts, uint64(rng.IntN(40)))
			}
		}
		// Rows hold no repeats (Batch.add makes them distinct).
		r.attrs = distinct(new([]KV), r.attrs)
		r.texts = distinct(new([]uint64), r.texts)
		rows = append(rows, r)
		prev = r
	}

	var p blockPostings
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
