package zorka

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// diffRecord returns the first difference between two record trees.
func diffRecord(path string, got, want *trace.Record) string {
	switch {
	case got == nil && want == nil:
		return ""
	case got == nil || want == nil:
		return fmt.Sprintf("%s: got %v, want %v", path, got, want)
	}
	if got.Method != want.Method || got.StartNS != want.StartNS || got.DurationNS != want.DurationNS ||
		got.Calls != want.Calls || got.Errors != want.Errors || got.Open != want.Open {
		return fmt.Sprintf("%s: got {%q start %d dur %d calls %d errors %d open %v}, want {%q start %d dur %d calls %d errors %d open %v}",
			path, got.Method, got.StartNS, got.DurationNS, got.Calls, got.Errors, got.Open,
			want.Method, want.StartNS, want.DurationNS, want.Calls, want.Errors, want.Open)
	}
	if !got.Attrs.Equal(want.Attrs) {
		return fmt.Sprintf("%s: attrs\n got %v\nwant %v", path, got.Attrs, want.Attrs)
	}
	if !reflect.DeepEqual(got.Exception, want.Exception) {
		return fmt.Sprintf("%s: exception\n got %+v\nwant %+v", path, got.Exception, want.Exception)
	}
	if len(got.Children) != len(want.Children) {
		return fmt.Sprintf("%s: %d children, want %d", path, len(got.Children), len(want.Children))
	}
	for i := range got.Children {
		if d := diffRecord(fmt.Sprintf("%s/%d", path, i), got.Children[i], want.Children[i]); d != "" {
			return d
		}
	}
	return ""
}

func diffSpan(got, want *trace.Span) string {
	g, w := *got, *want
	g.Root, w.Root, g.Attrs, w.Attrs = nil, nil, nil, nil
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("span fields\n got %+v\nwant %+v", g, w)
	}
	if !got.Attrs.Equal(want.Attrs) {
		return fmt.Sprintf("span attrs\n got %v\nwant %v", got.Attrs, want.Attrs)
	}
	return diffRecord("root", got.Root, want.Root)
}

// featureCounts tallies what the generated traces exercised.
type featureCounts map[string]int

func (fc featureCounts) record(r *encRec, depth int) {
	if depth > fc["max depth"] {
		fc["max depth"] = depth
	}
	fc["records"]++
	if r.le {
		fc["little-endian"]++
	}
	if r.longEpilog {
		fc["16-byte epilog"]++
	}
	if r.calls >= 1<<24 {
		fc["calls >= 2^24"]++
	}
	if r.tstart&^mask40 != r.tend&^mask40 {
		fc["tick wrap"]++
	}
	switch r.ending {
	case 'b':
		fc["bare break"]++
	case 'i':
		fc["trace info end"]++
	}
	if r.begin != nil {
		fc[fmt.Sprintf("TraceBegin/%d", r.begin.n)]++
		if depth > 1 {
			fc["nested span"]++
		}
	}
	if r.flags&flagErrorMark != 0 {
		fc["error flag"]++
	}
	if r.exc != nil {
		fc["exception"]++
		if r.exc.cause != nil {
			fc["exception cause"]++
		}
	}
	if r.excRef != nil {
		fc["exception ref"]++
	}
	for _, c := range r.children {
		fc.record(c, depth+1)
	}
}

// TestEncoderRoundTrip encodes thousands of random traces with the 1.90
// test encoder, submits them (a third of them streamed in several chunks,
// some with an agent reset between chunks) and checks that every span reads
// back equal to the model, after AssembleChunks merges the pieces.
func TestEncoderRoundTrip(t *testing.T) {
	traces := 3000
	if testing.Short() {
		traces = 500
	}
	g := newEncGen(20240601)
	s := NewSessions(Options{})
	const session = "0123456789abcdef"
	fc := featureCounts{}
	var epochAgd []byte // every definition sent since the last reset
	for i := 0; i < traces; i++ {
		g.zorkaInts = g.rng.Intn(2) == 0
		reset := i == 0 || g.rng.Intn(40) == 0
		if reset {
			g.reset()
			epochAgd = nil
			fc["session reset"]++
		}
		g.agd = nil
		tops := g.randTrace(40)
		g.encodeTrace(tops)
		for _, r := range tops {
			fc.record(r, 1)
		}
		if len(g.agd) > 0 || reset {
			if err := s.SubmitAgentData(session, reset, g.agd); err != nil {
				t.Fatalf("trace %d: agent data: %v", i, err)
			}
			epochAgd = append(epochAgd, g.agd...)
		}
		var tidBytes [16]byte
		g.rng.Read(tidBytes[:])
		tidBytes[0] |= 1
		tid := hex.EncodeToString(tidBytes[:])

		var cuts []int
		if g.rng.Intn(3) == 0 {
			cuts = g.randomCuts(1 + g.rng.Intn(6))
		}
		if len(cuts) > 0 {
			fc["chunked trace"]++
		}
		var pieces []*trace.Span
		prev := 0
		for j, end := range append(cuts, len(g.trc)) {
			if j > 0 && g.rng.Intn(5) == 0 {
				// The agent resets and resends its symbols between chunks
				// (as after a store rotation): open records survive.
				if err := s.SubmitAgentData(session, true, epochAgd); err != nil {
					t.Fatalf("trace %d: resend agent data: %v", i, err)
				}
				fc["reset between chunks"]++
			}
			ps, err := s.SubmitTraceData(session, false, tid, g.trc[prev:end])
			if err != nil {
				t.Fatalf("trace %d chunk %d (bytes %d..%d of %d): %v", i, j, prev, end, len(g.trc), err)
			}
			for _, p := range ps {
				if err := p.Validate(); err != nil {
					t.Fatalf("trace %d chunk %d: %v", i, j, err)
				}
			}
			pieces = append(pieces, ps...)
			prev = end
		}

		// Group pieces per span in order of first appearance (= begin order).
		var order []trace.SpanID
		bySpan := map[trace.SpanID][]*trace.Span{}
		for _, p := range pieces {
			if _, ok := bySpan[p.SpanID]; !ok {
				order = append(order, p.SpanID)
			}
			bySpan[p.SpanID] = append(bySpan[p.SpanID], p)
		}
		exp := expectedSpans(tops)
		if len(order) != len(exp) {
			t.Fatalf("trace %d: %d spans decoded, want %d", i, len(order), len(exp))
		}
		resolveIDs(exp, order)
		for k, id := range order {
			ps := bySpan[id]
			for n, p := range ps {
				last := n == len(ps)-1
				if p.ChunkNum != uint32(n) || p.Root.Open == last {
					t.Fatalf("trace %d span %d: piece %d has chunk %d, root open %v (of %d pieces)", i, k, n, p.ChunkNum, p.Root.Open, len(ps))
				}
			}
			if len(ps) > 1 {
				fc["multi-piece span"]++
			}
			whole, err := trace.AssembleChunks(ps)
			if err != nil {
				t.Fatalf("trace %d span %d: %v", i, k, err)
			}
			want := exp[k].span
			want.TraceID = whole.TraceID
			if whole.TraceID.String() != tid {
				t.Fatalf("trace %d: trace id %s, want %s", i, whole.TraceID, tid)
			}
			if d := diffSpan(whole, want); d != "" {
				t.Fatalf("trace %d span %d (%d pieces, cuts %v):\n%s", i, k, len(ps), cuts, d)
			}
			if err := whole.Validate(); err != nil {
				t.Fatal(err)
			}
			if whole.SpanID == 0 {
				t.Fatalf("trace %d span %d: span id 0", i, k)
			}
			fc["spans"]++
		}
	}
	t.Logf("features exercised: %v", fc)
	minimum := map[string]int{
		"chunked trace": traces / 5, "multi-piece span": traces / 5, "reset between chunks": traces / 40,
		"little-endian": 100, "16-byte epilog": 100, "calls >= 2^24": 50, "tick wrap": 20, "bare break": 50,
		"trace info end": 50, "TraceBegin/1": 50, "TraceBegin/2": 50, "TraceBegin/3": 50, "nested span": 50,
		"error flag": 50, "exception": 100, "exception cause": 30, "exception ref": 30, "session reset": 5,
	}
	for k, n := range minimum {
		if fc[k] < n {
			t.Errorf("feature %q exercised %d times, want at least %d", k, fc[k], n)
		}
	}
}
