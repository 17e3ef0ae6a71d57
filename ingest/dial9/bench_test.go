package dial9

import (
	"context"
	"io"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// BenchmarkReader measures the frame decoder alone; MB/s are decoded
// (decompressed) bytes.
func BenchmarkReader(b *testing.B) {
	for _, tc := range []struct {
		name string
		gzip bool
	}{{"demo-2026-05-15.bin", false}, {"demo-2026-05-15.bin", true}, {"demo-2026-04-16-optional-fields.bin", false}} {
		label := tc.name
		if tc.gzip {
			label += "/gzip"
		}
		b.Run(label, func(b *testing.B) {
			raw := rawSample(b, tc.name)
			input := raw
			if tc.gzip {
				input = readSample(b, tc.name)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			var events int64
			for b.Loop() {
				r, err := NewBytesReader(input)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := r.Next(); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
				events += r.Stats().Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkImport measures the whole import (both passes and the mapping
// to spans); MB/s are file bytes.
func BenchmarkImport(b *testing.B) {
	for _, name := range []string{"demo-2026-05-15.bin", "demo-2026-04-16-optional-fields.bin"} {
		b.Run(name, func(b *testing.B) {
			data := readSample(b, name)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var events, spans, records int64
			for b.Loop() {
				sum, err := Decode(context.Background(), name, data, ingest.Options{}, func(*trace.Span) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				events += sum.Events
				spans += sum.Details["spans"].(int64)
				records += sum.Records
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(events)/sec, "events/s")
			b.ReportMetric(float64(spans)/sec, "spans/s")
			b.ReportMetric(float64(records)/sec, "records/s")
		})
	}
}
