package export

import (
	"bytes"
	"io"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// countingWriter counts bytes written.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func benchChrome(b *testing.B, format, rel string) {
	traces, nrec := loadCached(b, format, rel)
	var cw countingWriter
	if err := Chrome(&cw, traces); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(cw.n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := Chrome(io.Discard, traces); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nrec)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkChromeDial9 exports the small dial9 sample: 653 traces, 1,640
// spans, 2,897 records.
func BenchmarkChromeDial9(b *testing.B) { benchChrome(b, "dial9", "dial9/demo-2026-03-18-small.bin") }

// BenchmarkChromeBLKClient exports every trace of the BLK client WTF
// sample: 7,618 traces, 224,448 records.
func BenchmarkChromeBLKClient(b *testing.B) { benchChrome(b, "wtf", "wtf/blk-client.wtf-trace") }

func benchSVG(b *testing.B, roots []*trace.Span, nrec int) {
	var buf bytes.Buffer
	if err := SVG(&buf, roots, SVGOptions{}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := SVG(io.Discard, roots, SVGOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nrec)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkSVGDocs draws the README's picture: 685 records.
func BenchmarkSVGDocs(b *testing.B) {
	roots, n := docsTrace(b)
	benchSVG(b, roots, n)
}

// BenchmarkSVGCapped draws all 224,448 records of the BLK client sample
// as one picture, capped at DefaultSVGMaxRecords.
func BenchmarkSVGCapped(b *testing.B) {
	traces, n := loadCached(b, "wtf", "wtf/blk-client.wtf-trace")
	var roots []*trace.Span
	for _, t := range traces {
		roots = append(roots, t...)
	}
	benchSVG(b, roots, n)
}
