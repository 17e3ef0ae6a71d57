package recovery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/textindex"
)

// TestRebuildEqualsWritePath rebuilds the indexes of a store the write path
// indexed (the daemon's group commits) and compares every read answer of
// the rebuilt indexes with the original's: counts and watermarks, every
// span entry, every trace's chunks, every attribute key and value, the
// search hits of every attribute pair and of every text, a few range
// searches, and every string, its id and substring searches of the text
// index.
//
// It rebuilds twice: in one index group, and in groups of 250 spans (12
// commits per index, the later ones interning strings the earlier ones
// committed).
func TestRebuildEqualsWritePath(t *testing.T) {
	orig := buildFixture(t, 19, 3000, 37)
	want := readAnswers(t, orig.store)
	for _, groupSpans := range []int{0, 250} {
		t.Run(fmt.Sprintf("group=%d", groupSpans), func(t *testing.T) {
			rebuildEqualsWritePath(t, orig, want, groupSpans)
		})
	}
}

func rebuildEqualsWritePath(t *testing.T, orig *fixture, want map[string]string, groupSpans int) {
	rebuilt := orig.clone(t)
	for _, d := range []string{MetaDir, TextDir} {
		if err := os.RemoveAll(filepath.Join(rebuilt.store, d)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := RecoverStore(context.Background(), rebuilt.store, Options{groupSpans: groupSpans})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Stores[0].IndexesRebuilt || rep.Stores[0].Spans != 3000 {
		t.Fatalf("recover: %+v", rep.Stores[0])
	}
	got := readAnswers(t, rebuilt.store)
	if len(want) != len(got) {
		t.Errorf("%d answers from the write path's indexes, %d from the rebuilt ones", len(want), len(got))
	}
	diffs := 0
	for q, w := range want {
		if g, ok := got[q]; !ok || g != w {
			if diffs++; diffs <= 5 {
				t.Errorf("%s:\n write path: %.300s\n rebuilt:    %.300s", q, w, g)
			}
		}
	}
	if diffs > 0 {
		t.Fatalf("%d of %d answers differ", diffs, len(want))
	}
	t.Logf("%d answers agree", len(want))
}

// readAnswers opens a store's two indexes read-only and returns the
// answer of every read the test compares, by question.
func readAnswers(t *testing.T, store string) map[string]string {
	t.Helper()
	meta, err := index.OpenReadOnly(filepath.Join(store, MetaDir), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	text, err := textindex.OpenReadOnly(filepath.Join(store, TextDir), textindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close()
	ctx := context.Background()
	out := map[string]string{}
	put := func(q string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %s: %v", store, q, err)
		}
		out[q] = fmt.Sprintf("%+v", v)
	}
	search := func(q index.Query) []index.Hit {
		var hits []index.Hit
		if err := meta.Search(ctx, q, func(h index.Hit) bool { hits = append(hits, h); return true }); err != nil {
			t.Fatalf("%s: search %+v: %v", store, q, err)
		}
		if len(hits) == 0 && q.Attrs != nil {
			t.Fatalf("%s: search %+v found nothing", store, q)
		}
		return hits
	}

	wm, err := meta.Watermark()
	put("meta watermark", wm, err)
	put("meta stats", meta.Stats(), nil)
	var refs []index.SpanRef
	put("entries", refs, meta.Entries(func(r index.SpanRef) error { refs = append(refs, r); return nil }))
	out["entries"] = fmt.Sprintf("%+v", refs)
	traces := map[[16]byte][]int64{}
	put("trace chunks", nil, meta.TraceChunks(ctx, func(id [16]byte, offs []int64) error {
		traces[id] = append([]int64(nil), offs...)
		return nil
	}))
	out["trace chunks"] = fmt.Sprintf("%v", traces)
	for id := range traces {
		spans, err := meta.TraceSpans(id)
		put(fmt.Sprintf("trace %x", id), spans, err)
	}
	keys, err := meta.AttrKeys(0)
	put("attribute keys", keys, err)
	for _, k := range keys {
		vals, err := meta.AttrValues(k, 0)
		put(fmt.Sprintf("values of %d", k), vals, err)
		for _, v := range vals {
			q := index.Query{Attrs: []index.KV{{Key: k, Value: v}}}
			out[fmt.Sprintf("search %d=%d", k, v)] = fmt.Sprintf("%+v", search(q))
		}
	}
	for _, q := range []index.Query{{ErrorsOnly: true}, {MinDurationNS: 5e6}, {MaxDurationNS: 1e5},
		{SinceNS: refs[len(refs)/3].StartNS, UntilNS: refs[2*len(refs)/3].StartNS}} {
		out[fmt.Sprintf("search %+v", q)] = fmt.Sprintf("%+v", search(q))
	}

	wm, err = text.Watermark()
	put("text watermark", wm, err)
	n := text.Count()
	put("text count", n, nil)
	for id := uint64(1); id <= n; id++ {
		s, err := text.String(id)
		put(fmt.Sprintf("string %d", id), s, err)
		got, ok, err := text.Lookup(s)
		put(fmt.Sprintf("lookup %q", s), fmt.Sprint(got, ok), err)
		out[fmt.Sprintf("search text %d", id)] = fmt.Sprintf("%+v", search(index.Query{TextAny: []uint64{id}}))
		if id%3 == 0 && len(s)-len(s)/3 >= 3 {
			sub := strings.ToUpper(s[len(s)/3:][:3])
			ids, trunc, err := text.Search(ctx, sub, 0)
			put(fmt.Sprintf("text search %q", sub), fmt.Sprint(ids, trunc), err)
		}
	}
	for _, sub := range []string{"a", "er", "xyzzy", "http", "SELECT"} {
		ids, trunc, err := text.Search(ctx, sub, 0)
		put(fmt.Sprintf("text search %q", sub), fmt.Sprint(ids, trunc), err)
	}
	if reflect.DeepEqual(out, map[string]string{}) {
		t.Fatal("no answers")
	}
	return out
}
