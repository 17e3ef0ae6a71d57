package migrate

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
)

// BenchmarkMigrate copies 20,000 spans (one LZ4 store) to zlib, verifying
// the result; MB/s is of the source data file.
func BenchmarkMigrate(b *testing.B) {
	spans := workload.Spans(40, 20_000)
	src := filepath.Join(b.TempDir(), "src")
	writeDataDir(b, src, spans, 1, lz4crc)
	var size int64
	for _, h := range mustManifest(b, src) {
		size += h.Size
	}
	b.SetBytes(size)
	b.ResetTimer()
	i := 0
	var copySeconds, verifySeconds float64
	for b.Loop() {
		i++
		rep, err := Run(context.Background(), Options{Sources: []string{src}, Target: filepath.Join(b.TempDir(), fmt.Sprint(i)), Compression: ptr(chunk.Zlib)})
		if err != nil {
			b.Fatal(err)
		}
		copySeconds += rep.Seconds - rep.Verify.Seconds
		verifySeconds += rep.Verify.Seconds
	}
	b.ReportMetric(float64(len(spans))*float64(i)/copySeconds, "spans/s-copy")
	b.ReportMetric(float64(len(spans))*float64(i)/verifySeconds, "spans/s-verify")
}

// BenchmarkHashPiece measures the content hash the seen-set keeps per piece.
func BenchmarkHashPiece(b *testing.B) {
	spans := workload.Spans(41, 1000)
	m := &migration{}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := m.hashPiece(spans[i%len(spans)]); err != nil {
			b.Fatal(err)
		}
	}
}

func mustManifest(tb testing.TB, dir string) []sourceStore {
	tb.Helper()
	st, err := buildManifest([]string{dir})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}
