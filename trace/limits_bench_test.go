package trace_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// BenchmarkCheckSpansRealistic: the ingest limits check of a request's
// spans (realistic traces: 10 spans of 6 attributes and 20 records each),
// which every write runs before storing; it should allocate nothing for
// spans within the limits.
func BenchmarkCheckSpansRealistic(b *testing.B) {
	spans := realisticSpans(rand.New(rand.NewPCG(1, 2)), 50)
	var lim trace.IngestLimits
	b.ReportAllocs()
	for b.Loop() {
		if err := lim.CheckSpans(spans); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
}
