package trace

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

var asmTraceID = TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// recordString renders a record tree compactly for comparisons in failures.
func recordString(r *Record) string {
	if r == nil {
		return "<nil>"
	}
	var b strings.Builder
	var walk func(r *Record, depth int)
	walk = func(r *Record, depth int) {
		fmt.Fprintf(&b, "%s%s start=%d dur=%d calls=%d errs=%d open=%v", strings.Repeat("  ", depth), r.Method,
			r.StartNS, r.DurationNS, r.Calls, r.Errors, r.Open)
		for _, a := range r.Attrs {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.Text())
		}
		if r.Exception != nil {
			fmt.Fprintf(&b, " exc=%s", r.Exception.Class)
		}
		b.WriteByte('\n')
		for _, c := range r.Children {
			walk(c, depth+1)
		}
	}
	walk(r, 0)
	return b.String()
}

func attrs(kv ...string) Attrs {
	var a Attrs
	for i := 0; i+1 < len(kv); i += 2 {
		a.Set(kv[i], String(kv[i+1]))
	}
	return a
}

// The hand-built case of trace.go's convention: root R with children A
// (closed in chunk 0) and B (open at the cut, its child B1 open too).
func handBuiltPieces() []*Span {
	p0 := &Span{
		TraceID: asmTraceID, SpanID: 7, StartNS: 1000, Source: SourceZorka, Type: "http",
		Attrs: attrs("a", "1", "source.format", "zorka"),
		Root: &Record{Method: "R", Attrs: attrs("x", "1"), Open: true, Children: []*Record{
			{Method: "A", StartNS: 10, DurationNS: 5, Calls: 1},
			{Method: "B", StartNS: 20, Open: true, Attrs: attrs("b", "early"), Children: []*Record{
				{Method: "B1", StartNS: 21, Open: true},
			}},
		}},
	}
	p1 := &Span{
		TraceID: asmTraceID, SpanID: 7, ChunkNum: 1, StartNS: 1000, Source: SourceZorka,
		Attrs: attrs("b", "2"),
		Root: &Record{Method: "R", Open: true, Children: []*Record{
			{Method: "B", StartNS: 20, Open: false, DurationNS: 30, Calls: 4, Errors: 1, Attrs: attrs("b", "late", "c", "3"), Children: []*Record{
				{Method: "B1", StartNS: 21, DurationNS: 9, Calls: 2, Errors: 1, Exception: &Exception{Class: "E"}},
				{Method: "B2", StartNS: 40, DurationNS: 1, Calls: 1},
			}},
			{Method: "C", StartNS: 60, Open: true},
		}},
	}
	p2 := &Span{
		TraceID: asmTraceID, SpanID: 7, ChunkNum: 2, StartNS: 1000, Source: SourceZorka,
		DurationNS: 100, Calls: 9, Errors: 1, Error: true, ParentID: 3,
		Root: &Record{Method: "R", DurationNS: 100, Calls: 9, Errors: 1, Children: []*Record{
			{Method: "C", StartNS: 60, DurationNS: 2, Calls: 1, Children: []*Record{{Method: "C1", StartNS: 61}}},
			{Method: "D", StartNS: 80, DurationNS: 3, Calls: 1},
		}},
	}
	return []*Span{p0, p1, p2}
}

func TestAssembleChunksHandBuilt(t *testing.T) {
	pieces := handBuiltPieces()
	before := recordString(pieces[0].Root) + recordString(pieces[1].Root) + recordString(pieces[2].Root)
	// Any input order gives the same result.
	for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}} {
		in := []*Span{pieces[order[0]], pieces[order[1]], pieces[order[2]]}
		got, err := AssembleChunks(in)
		if err != nil {
			t.Fatal(err)
		}
		want := &Record{Method: "R", DurationNS: 100, Calls: 9, Errors: 1, Attrs: attrs("x", "1"), Children: []*Record{
			{Method: "A", StartNS: 10, DurationNS: 5, Calls: 1},
			{Method: "B", StartNS: 20, DurationNS: 30, Calls: 4, Errors: 1, Attrs: attrs("b", "late", "c", "3"), Children: []*Record{
				{Method: "B1", StartNS: 21, DurationNS: 9, Calls: 2, Errors: 1, Exception: &Exception{Class: "E"}},
				{Method: "B2", StartNS: 40, DurationNS: 1, Calls: 1},
			}},
			{Method: "C", StartNS: 60, DurationNS: 2, Calls: 1, Children: []*Record{{Method: "C1", StartNS: 61}}},
			{Method: "D", StartNS: 80, DurationNS: 3, Calls: 1},
		}}
		if g, w := recordString(got.Root), recordString(want); g != w {
			t.Fatalf("order %v: merged tree\n%s\nwant\n%s", order, g, w)
		}
		if got.ChunkNum != 0 || got.StartNS != 1000 || got.DurationNS != 100 || got.Calls != 9 || got.Errors != 1 ||
			got.Recs != 8 || !got.Error || got.ParentID != 3 || got.Type != "http" || got.Source != SourceZorka {
			t.Fatalf("order %v: span summary %+v", order, got)
		}
		if !got.Attrs.Equal(attrs("a", "1", "b", "2", "source.format", "zorka")) {
			t.Fatalf("order %v: attrs %v", order, got.Attrs)
		}
		if err := got.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	after := recordString(pieces[0].Root) + recordString(pieces[1].Root) + recordString(pieces[2].Root)
	if before != after {
		t.Fatalf("AssembleChunks modified its input:\n%s\nbecame\n%s", before, after)
	}
}

func TestAssembleChunksSinglePieceIsACopy(t *testing.T) {
	p := &Span{TraceID: asmTraceID, SpanID: 1, ChunkNum: 0, Calls: 3, Attrs: attrs("k", "v"),
		Root: &Record{Method: "m", Calls: 3, Children: []*Record{{Method: "c", Exception: &Exception{Class: "X"}}}}}
	got, err := AssembleChunks([]*Span{p})
	if err != nil {
		t.Fatal(err)
	}
	if got == p || got.Root == p.Root || got.Root.Children[0] == p.Root.Children[0] {
		t.Fatal("single piece not copied")
	}
	if got.Recs != 2 || got.Errors != 1 || got.Calls != 3 {
		t.Fatalf("summary %+v", got)
	}
	got.Attrs.Set("k", String("changed"))
	if v, _ := p.Attrs.Get("k"); v.Str != "v" {
		t.Fatal("attrs shared with the input")
	}
	// A bare span (no root record) assembles too.
	bare, err := AssembleChunks([]*Span{{TraceID: asmTraceID, SpanID: 2}})
	if err != nil || bare.Root != nil || bare.Recs != 0 {
		t.Fatalf("bare span: %+v, %v", bare, err)
	}
}

func TestAssembleChunksErrors(t *testing.T) {
	closed := &Span{TraceID: asmTraceID, SpanID: 1, Root: &Record{Method: "r"}}
	cont := &Span{TraceID: asmTraceID, SpanID: 1, ChunkNum: 1, Root: &Record{Method: "r"}}
	other := &Span{TraceID: asmTraceID, SpanID: 2, ChunkNum: 1, Root: &Record{Method: "r"}}
	deep := &Record{Method: "deep"}
	for r, i := deep, 0; i < MaxDepth+1; i++ {
		r.Children = []*Record{{Method: "deep"}}
		r = r.Children[0]
	}
	tests := []struct {
		name   string
		pieces []*Span
		want   string
	}{
		{"empty", nil, "no pieces"},
		{"nil piece", []*Span{closed, nil}, "piece 1 is nil"},
		{"other span", []*Span{closed, other}, "belongs to span"},
		{"duplicate chunk", []*Span{closed, {TraceID: asmTraceID, SpanID: 1}}, "appears twice"},
		{"continues closed root", []*Span{closed, cont}, "closed in an earlier chunk"},
		{"too deep", []*Span{{TraceID: asmTraceID, SpanID: 1, Root: deep}}, "deeper than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AssembleChunks(tc.pieces)
			if err == nil || !strings.Contains(err.Error(), tc.want) || got != nil {
				t.Fatalf("got %v, %v; want error containing %q", got, err, tc.want)
			}
		})
	}
}

func TestAssembleChunksGap(t *testing.T) {
	pieces := handBuiltPieces()
	pieces[2].ChunkNum = 5
	got, err := AssembleChunks(pieces)
	if !errors.Is(err, ErrMissingChunks) {
		t.Fatalf("err = %v, want ErrMissingChunks", err)
	}
	if got == nil || got.Recs != 8 || got.DurationNS != 100 {
		t.Fatalf("best-effort span %+v", got)
	}
	// Missing chunk 0 is a gap too.
	_, err = AssembleChunks(pieces[1:2])
	if !errors.Is(err, ErrMissingChunks) {
		t.Fatalf("err = %v, want ErrMissingChunks", err)
	}
}

// randomRecordTree builds a random closed record tree.
func randomRecordTree(rng *rand.Rand, depth int, n *int) *Record {
	*n++
	r := &Record{
		Method:     fmt.Sprintf("m%d", rng.Intn(50)),
		StartNS:    int64(*n) * 100,
		DurationNS: rng.Int63n(1e9),
		Calls:      rng.Int63n(100),
		Errors:     rng.Int63n(3),
	}
	for i, k := 0, rng.Intn(3); i < k; i++ {
		r.Attrs.Set(fmt.Sprintf("k%d", rng.Intn(6)), Int(rng.Int63()))
	}
	if rng.Intn(8) == 0 {
		r.Exception = &Exception{Class: fmt.Sprintf("E%d", *n), Message: "boom"}
	}
	if depth < 7 {
		for i, k := 0, rng.Intn(4); i < k && *n < 200; i++ {
			r.Children = append(r.Children, randomRecordTree(rng, depth+1, n))
		}
	}
	return r
}

// pieceSplitter cuts a whole span into streamed pieces exactly as
// trace.go's convention describes, from a depth-first event walk.
type pieceSplitter struct {
	rng    *rand.Rand
	span   *Span
	pieces []*Span
	stack  []*Record // copies in the current piece of the open originals
	origs  []*Record // the open originals
	cutP   int       // a cut happens before an event with probability 1/cutP
}

func (ps *pieceSplitter) piece() *Span { return ps.pieces[len(ps.pieces)-1] }

func (ps *pieceSplitter) maybeCut() {
	if ps.rng.Intn(ps.cutP) != 0 || len(ps.stack) == 0 {
		return
	}
	for _, c := range ps.stack {
		c.Open = true
	}
	prev := ps.piece()
	next := &Span{TraceID: prev.TraceID, SpanID: prev.SpanID, ChunkNum: prev.ChunkNum + 1, StartNS: prev.StartNS, Source: prev.Source}
	ps.pieces = append(ps.pieces, next)
	for i, o := range ps.origs {
		c := &Record{Method: o.Method, StartNS: o.StartNS, Open: true}
		if i == 0 {
			next.Root = c
		} else {
			parent := ps.stack[i-1]
			parent.Children = append(parent.Children, c)
		}
		ps.stack[i] = c
	}
}

func (ps *pieceSplitter) walk(o *Record) {
	ps.maybeCut()
	c := &Record{Method: o.Method, StartNS: o.StartNS}
	if len(ps.stack) == 0 {
		ps.piece().Root = c
	} else {
		p := ps.stack[len(ps.stack)-1]
		p.Children = append(p.Children, c)
	}
	ps.stack = append(ps.stack, c)
	ps.origs = append(ps.origs, o)
	for _, a := range o.Attrs {
		ps.maybeCut()
		ps.stack[len(ps.stack)-1].Attrs.Set(a.Key, a.Value)
	}
	for _, k := range o.Children {
		ps.walk(k)
	}
	ps.maybeCut()
	if o.Exception != nil {
		ps.stack[len(ps.stack)-1].Exception = o.Exception
		ps.maybeCut()
	}
	cur := ps.stack[len(ps.stack)-1]
	cur.DurationNS, cur.Calls, cur.Errors, cur.Open = o.DurationNS, o.Calls, o.Errors, false
	ps.stack = ps.stack[:len(ps.stack)-1]
	ps.origs = ps.origs[:len(ps.origs)-1]
}

func TestAssembleChunksRandomSplits(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	multi := 0
	for iter := 0; iter < 500; iter++ {
		n := 0
		whole := &Span{TraceID: asmTraceID, SpanID: SpanID(iter + 1), ParentID: 99, Type: "t", StartNS: 1e15,
			Source: SourceZorka, Error: rng.Intn(2) == 0, Root: randomRecordTree(rng, 1, &n)}
		whole.Attrs.Set("source.format", String("zorka"))
		whole.Attrs.Set(fmt.Sprintf("s%d", rng.Intn(3)), String("v"))
		whole.DurationNS, whole.Calls = whole.Root.DurationNS, whole.Root.Calls
		whole.FillSummary()

		ps := &pieceSplitter{rng: rng, cutP: 1 + rng.Intn(6)}
		ps.pieces = []*Span{{TraceID: whole.TraceID, SpanID: whole.SpanID, StartNS: whole.StartNS, Source: whole.Source}}
		ps.walk(whole.Root)
		// Span-level data: attributes spread over pieces, summary in the last.
		for _, a := range whole.Attrs {
			p := ps.pieces[rng.Intn(len(ps.pieces))]
			p.Attrs.Set(a.Key, a.Value)
		}
		ps.pieces[rng.Intn(len(ps.pieces))].ParentID = whole.ParentID
		ps.pieces[rng.Intn(len(ps.pieces))].Type = whole.Type
		ps.pieces[rng.Intn(len(ps.pieces))].Error = whole.Error
		last := ps.piece()
		last.DurationNS, last.Calls, last.Errors = whole.DurationNS, whole.Calls, whole.Errors
		if len(ps.pieces) > 1 {
			multi++
		}
		rng.Shuffle(len(ps.pieces), func(i, j int) { ps.pieces[i], ps.pieces[j] = ps.pieces[j], ps.pieces[i] })

		got, err := AssembleChunks(ps.pieces)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if g, w := recordString(got.Root), recordString(whole.Root); g != w {
			t.Fatalf("iter %d (%d pieces): got\n%s\nwant\n%s", iter, len(ps.pieces), g, w)
		}
		got.Root, whole.Root = nil, nil
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("iter %d: span\n%+v\nwant\n%+v", iter, got, whole)
		}
	}
	if multi < 400 {
		t.Fatalf("only %d of 500 spans were split; the test is not exercising merges", multi)
	}
}

func TestAssembleTree(t *testing.T) {
	mk := func(id, parent SpanID, start int64) *Span {
		return &Span{TraceID: asmTraceID, SpanID: id, ParentID: parent, StartNS: start}
	}
	ids := spanForestString
	root := mk(1, 0, 100)
	a := mk(2, 1, 300)
	b := mk(3, 1, 200)
	b2 := mk(9, 1, 200) // same start as b: SpanID breaks the tie
	c := mk(4, 3, 250)
	orphan := mk(5, 77, 50) // parent absent → root
	self := mk(6, 6, 10)    // names itself → root
	zero := mk(0, 1, 260)   // no span id: still a child of 1
	tests := []struct {
		name string
		in   []*Span
		want string
	}{
		{"empty", nil, ""},
		{"tree", []*Span{a, c, root, b2, b, zero}, "1(3(4) 9 0 2)"},
		{"roots", []*Span{orphan, root, self, a}, "6 5 1(2)"},
		{"nil and repeats", []*Span{nil, root, root, a, nil, a}, "1(2)"},
		{"two-cycle", []*Span{mk(11, 12, 5), mk(12, 11, 6)}, "11(12)"},
		{"three-cycle with tail", []*Span{mk(21, 23, 7), mk(22, 21, 3), mk(23, 22, 9), mk(24, 23, 1)}, "22(23(24 21))"},
		{"duplicate ids", []*Span{mk(31, 0, 5), mk(31, 0, 1), mk(32, 31, 9)}, "31(32) 31"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Stale children from an earlier assembly must not leak in.
			for _, s := range tc.in {
				if s != nil {
					s.Children = []*Span{mk(999, 0, 0)}
				}
			}
			got := AssembleTree(tc.in)
			if g := ids(got); g != tc.want {
				t.Fatalf("got %q, want %q", g, tc.want)
			}
		})
	}
}

// spanForestString renders span ids with their children in parentheses.
func spanForestString(ss []*Span) string {
	var parts []string
	for _, s := range ss {
		p := fmt.Sprint(uint64(s.SpanID))
		if len(s.Children) > 0 {
			p += "(" + spanForestString(s.Children) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func TestAssembleTreeRandomForest(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for iter := 0; iter < 200; iter++ {
		n := 1 + rng.Intn(60)
		spans := make([]*Span, n)
		parentOf := map[SpanID]SpanID{}
		for i := range spans {
			id := SpanID(i + 1)
			var parent SpanID
			if i > 0 && rng.Intn(4) != 0 {
				parent = SpanID(1 + rng.Intn(i)) // earlier span: no cycles
			} else if rng.Intn(3) == 0 {
				parent = SpanID(1000 + rng.Intn(5)) // absent
			}
			parentOf[id] = parent
			spans[i] = &Span{TraceID: asmTraceID, SpanID: id, ParentID: parent, StartNS: rng.Int63n(20)}
		}
		rng.Shuffle(n, func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		roots := AssembleTree(spans)
		count := 0
		var walk func(s *Span, parent SpanID)
		walk = func(s *Span, parent SpanID) {
			count++
			if parent != 0 && parentOf[s.SpanID] != parent {
				t.Fatalf("iter %d: span %d under %d, parent is %d", iter, s.SpanID, parent, parentOf[s.SpanID])
			}
			for i, c := range s.Children {
				if i > 0 && spanBefore(c, s.Children[i-1]) {
					t.Fatalf("iter %d: children of %d out of order", iter, s.SpanID)
				}
				walk(c, s.SpanID)
			}
		}
		for _, r := range roots {
			if p := parentOf[r.SpanID]; p != 0 && p < 1000 {
				t.Fatalf("iter %d: span %d with present parent %d is a root", iter, r.SpanID, p)
			}
			walk(r, 0)
		}
		if count != n {
			t.Fatalf("iter %d: %d spans in the forest, want %d", iter, count, n)
		}
	}
}

// A record cut before its method arrived takes method and start from its
// continuation; a first piece without a root takes the next one's.
func TestAssembleChunksLateMethodAndRoot(t *testing.T) {
	p0 := &Span{TraceID: asmTraceID, SpanID: 1, Root: &Record{Method: "r", Open: true, Children: []*Record{{Open: true}}}}
	p1 := &Span{TraceID: asmTraceID, SpanID: 1, ChunkNum: 1, Root: &Record{Method: "r", DurationNS: 9, Children: []*Record{
		{Method: "c", StartNS: 50, DurationNS: 3},
	}}}
	got, err := AssembleChunks([]*Span{p0, p1})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Root.Children; len(c) != 1 || c[0].Method != "c" || c[0].StartNS != 50 || c[0].DurationNS != 3 || c[0].Open {
		t.Fatalf("merged child %+v", got.Root.Children[0])
	}
	bare := &Span{TraceID: asmTraceID, SpanID: 1, Attrs: attrs("a", "1")}
	got, err = AssembleChunks([]*Span{bare, p1})
	if err != nil || got.Root == nil || got.Root.Method != "r" || got.Root == p1.Root || got.Recs != 2 {
		t.Fatalf("root from the second piece: %+v %v", got, err)
	}
}
