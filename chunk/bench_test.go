package chunk

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchPayloads returns realistic CBOR-like trace payloads of 2–16 KiB.
func benchPayloads(n int) ([][]byte, int64) {
	rng := rand.New(rand.NewPCG(99, 100))
	out := make([][]byte, n)
	var total int64
	for i := range out {
		out[i] = cborTrace(rng, 2<<10+rng.IntN(14<<10))
		total += int64(len(out[i]))
	}
	return out, total
}

var benchCodecs = []Options{{None, true}, {LZ4, true}, {Zlib, true}, {Zstd, true}}

func BenchmarkEncode(b *testing.B) {
	payloads, total := benchPayloads(64)
	for _, opt := range benchCodecs {
		b.Run(opt.Compression.String(), func(b *testing.B) {
			b.SetBytes(total / int64(len(payloads)))
			var dst []byte
			var stored int64
			for i := 0; b.Loop(); i++ {
				c, err := Encode(payloads[i%len(payloads)], opt, dst)
				if err != nil {
					b.Fatal(err)
				}
				dst = c.Bytes()[:0]
				stored += c.Len()
			}
			b.ReportMetric(float64(stored)/float64(b.N)/float64(total/int64(len(payloads))), "stored/logical")
		})
	}
}

// BenchmarkAppend measures Append (encode + one pwrite, no fsync).
func BenchmarkAppend(b *testing.B) {
	payloads, total := benchPayloads(64)
	for _, opt := range benchCodecs {
		b.Run(opt.Compression.String(), func(b *testing.B) {
			f, err := Create(filepath.Join(b.TempDir(), "traces.zts"), opt)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(total / int64(len(payloads)))
			for i := 0; b.Loop(); i++ {
				if _, err := f.Append(payloads[i%len(payloads)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadChunk measures random ReadChunk (pread + CRC + decompress)
// from a file in the page cache.
func BenchmarkReadChunk(b *testing.B) {
	payloads, total := benchPayloads(64)
	for _, opt := range benchCodecs {
		b.Run(opt.Compression.String(), func(b *testing.B) {
			f, err := Create(filepath.Join(b.TempDir(), "traces.zts"), opt)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			offs := make([]int64, 2000)
			for i := range offs {
				if offs[i], err = f.Append(payloads[i%len(payloads)]); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(total / int64(len(payloads)))
			for b.Loop() {
				if _, _, err := f.ReadChunk(offs[rng.IntN(len(offs))]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanner scans a data file holding 64 MiB of payloads (page
// cache). MB/s is file bytes per second; logical-MB/s is payload bytes.
func BenchmarkScanner(b *testing.B) {
	payloads, _ := benchPayloads(256)
	for _, opt := range benchCodecs {
		b.Run(opt.Compression.String(), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "traces.zts")
			f, err := Create(path, opt)
			if err != nil {
				b.Fatal(err)
			}
			var logical int64
			for i := 0; logical < 64<<20; i++ {
				p := payloads[i%len(payloads)]
				if _, err := f.Append(p); err != nil {
					b.Fatal(err)
				}
				logical += int64(len(p))
			}
			size := f.Size()
			f.Close()
			osf, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer osf.Close()
			b.SetBytes(size)
			for b.Loop() {
				s := NewScanner(osf, size, opt)
				var n int64
				for s.Next() {
					_, p := s.Chunk()
					n += int64(len(p))
				}
				if s.Err() != nil || len(s.BadRegions()) != 0 || n != logical {
					b.Fatalf("scan: %v, bad %v, %d of %d bytes", s.Err(), s.BadRegions(), n, logical)
				}
			}
			b.ReportMetric(float64(logical)*float64(b.N)/b.Elapsed().Seconds()/1e6, "logical-MB/s")
			b.ReportMetric(float64(size)/float64(logical), "stored/logical")
		})
	}
}
