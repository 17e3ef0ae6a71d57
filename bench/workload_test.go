package bench

import (
	"bytes"
	"math"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

func genSpans(seed uint64, n int) ([]*trace.Span, int) {
	g := NewGenerator(Workload{Seed: seed})
	var spans []*trace.Span
	traces := 0
	for len(spans) < n {
		spans = append(spans, g.Trace()...)
		traces++
	}
	return spans, traces
}

// TestWorkloadReproducible: equal seeds give byte-identical traffic,
// different seeds different traffic.
func TestWorkloadReproducible(t *testing.T) {
	a, _ := genSpans(7, 5000)
	b, _ := genSpans(7, 5000)
	c, _ := genSpans(8, 5000)
	pa, err := trace.EncodeChunk(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := trace.EncodeChunk(nil, b)
	pc, _ := trace.EncodeChunk(nil, c)
	if !bytes.Equal(pa, pb) {
		t.Fatal("two generators with seed 7 produced different spans")
	}
	if bytes.Equal(pa[:len(pc)/2], pc[:len(pc)/2]) {
		t.Fatal("seeds 7 and 8 produced the same spans")
	}
}

// TestWorkloadShape checks the workload is what the issue asks for: six
// attributes per span, 1–200 records per span on a skewed law (most small,
// some large), nested child spans, ~1% errors with exceptions, low- and
// high-cardinality attribute values, properly nested record times.
func TestWorkloadShape(t *testing.T) {
	spans, traces := genSpans(1, 60_000)
	var records, errSpans, withException, maxRecs, oneRecord, over50 int
	distinct := map[string]map[string]bool{}
	ids := map[trace.TraceID]bool{}
	byID := map[trace.SpanID]*trace.Span{}
	for _, sp := range spans {
		if err := sp.Validate(); err != nil {
			t.Fatal(err)
		}
		ids[sp.TraceID] = true
		byID[sp.SpanID] = sp
		if len(sp.Attrs) != SpanAttrs {
			t.Fatalf("span %s has %d attributes, want %d", sp.SpanID, len(sp.Attrs), SpanAttrs)
		}
		for _, a := range sp.Attrs {
			if distinct[a.Key] == nil {
				distinct[a.Key] = map[string]bool{}
			}
			distinct[a.Key][a.Value.Text()] = true
		}
		n := int(sp.Root.CountRecords())
		if n < 1 || n > 200 || int64(n) != sp.Recs {
			t.Fatalf("span %s: %d records (Recs %d), want 1..200", sp.SpanID, n, sp.Recs)
		}
		records += n
		maxRecs = max(maxRecs, n)
		if n == 1 {
			oneRecord++
		}
		if n > 50 {
			over50++
		}
		if sp.Error {
			errSpans++
			if sp.Errors == 0 {
				t.Fatalf("failed span %s has no exception", sp.SpanID)
			}
			if status, _ := sp.Attrs.Get("http.status_code"); status.Int != 500 {
				t.Fatalf("failed span %s has status %v", sp.SpanID, status)
			}
		}
		if sp.Errors > 0 {
			withException++
		}
		sp.Root.Walk(func(r *trace.Record, _ int) bool {
			for _, c := range r.Children {
				if c.StartNS < r.StartNS || c.StartNS+c.DurationNS > r.StartNS+r.DurationNS {
					t.Fatalf("span %s: child %q [%d+%d] outside its parent %q [%d+%d]", sp.SpanID,
						c.Method, c.StartNS, c.DurationNS, r.Method, r.StartNS, r.DurationNS)
				}
			}
			return true
		})
	}
	if len(ids) != traces {
		t.Fatalf("%d distinct trace ids for %d traces", len(ids), traces)
	}
	children := 0
	for _, sp := range spans {
		if sp.ParentID == 0 {
			continue
		}
		children++
		p, ok := byID[sp.ParentID]
		if !ok || p.TraceID != sp.TraceID || p.StartNS > sp.StartNS {
			t.Fatalf("span %s: parent %s missing, in another trace or starting later", sp.SpanID, sp.ParentID)
		}
	}
	n := float64(len(spans))
	mean := float64(records) / n
	errRate := float64(errSpans) / n
	t.Logf("%d spans in %d traces: %.2f records/span (max %d, %.0f%% with one, %.1f%% over 50), error rate %.4f, %d child spans",
		len(spans), traces, mean, maxRecs, 100*float64(oneRecord)/n, 100*float64(over50)/n, errRate, children)
	if mean < 8 || mean > 13 {
		t.Errorf("mean records per span %.2f, want about 10", mean)
	}
	if maxRecs < 190 || oneRecord < len(spans)/5 || over50 < len(spans)/100 {
		t.Errorf("record counts not skewed: max %d, %d spans with one record, %d over 50", maxRecs, oneRecord, over50)
	}
	if math.Abs(errRate-0.01) > 0.003 {
		t.Errorf("error rate %.4f, want 0.01", errRate)
	}
	if children < len(spans)/2 {
		t.Errorf("only %d of %d spans are children", children, len(spans))
	}
	for key, lo := range map[string]int{"service.name": 1, "http.route": 1, "http.status_code": 1, "host.name": 1} {
		if got := len(distinct[key]); got < lo || got > 100 {
			t.Errorf("%s: %d distinct values, want low cardinality", key, got)
		}
	}
	if got := len(distinct["user.id"]); got < traces*9/10 {
		t.Errorf("user.id: %d distinct values over %d traces, want high cardinality", got, traces)
	}
	if got := len(distinct["db.statement"]); got < 1000 {
		t.Errorf("db.statement: %d distinct SQL texts, want high cardinality", got)
	}
}

// TestWorkloadTimeOrder: traces start in order, TraceGapNS apart on average.
func TestWorkloadTimeOrder(t *testing.T) {
	g := NewGenerator(Workload{Seed: 3, TraceGapNS: 1000})
	var last int64
	for i := range 1000 {
		root := g.Trace()[0]
		lo, hi := WorkloadBaseNS+int64(i)*1000, WorkloadBaseNS+int64(i+1)*1000
		if root.StartNS < lo || root.StartNS >= hi || root.StartNS < last {
			t.Fatalf("trace %d starts at %d, want in [%d, %d) and after %d", i, root.StartNS, lo, hi, last)
		}
		last = root.StartNS
	}
	if g.Traces() != 1000 {
		t.Fatalf("Traces() = %d", g.Traces())
	}
}

func BenchmarkGenerator(b *testing.B) {
	g := NewGenerator(Workload{Seed: 1})
	spans := 0
	for b.Loop() {
		spans += len(g.Trace())
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}
