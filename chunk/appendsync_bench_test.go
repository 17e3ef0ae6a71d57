package chunk

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// BenchmarkAppendSync is one unbatched write's disk work: append a chunk
// of a ~600-byte payload and make it durable (File.Sync), as the group
// commit does for a lone 1-span request.
func BenchmarkAppendSync(b *testing.B) {
	f, err := Create(filepath.Join(b.TempDir(), "traces.zts"), Options{Compression: Zstd, Checksums: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	payload := cborTrace(rng, 600)
	b.ResetTimer()
	for range b.N {
		if _, err := f.Append(payload); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
