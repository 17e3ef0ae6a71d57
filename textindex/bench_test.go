package textindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIntern interns a repeat-heavy stream (as ingest does): 99% of
// the strings come from a working set of 5,000, the rest are new; one
// batch per 1,000 interns.
func BenchmarkIntern(b *testing.B) {
	ix, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	hot := make([]string, 5000)
	for i := range hot {
		hot[i] = fmt.Sprintf("com.example.service%d.Handler.method%d", i%50, i)
	}
	stream := make([]string, 1<<16)
	for i := range stream {
		if rng.IntN(100) == 0 {
			stream[i] = fmt.Sprintf("user-%d-request-%d", rng.Uint64(), i)
		} else {
			stream[i] = hot[rng.IntN(len(hot))]
		}
	}
	b.ResetTimer()
	batch := ix.NewBatch()
	for i := 0; i < b.N; i++ {
		batch.Intern(stream[i&(len(stream)-1)])
		if i%1000 == 999 {
			if err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
			batch = ix.NewBatch()
		}
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "interns/s")
}

// BenchmarkSearch searches a dictionary of 200,000 strings.
func BenchmarkSearch(b *testing.B) {
	ix, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"order", "payment", "user", "cart", "Timeout", "Exception", "kafka", "GET", "POST", "/api/v1/"}
	for n := 0; n < 200_000; {
		batch := ix.NewBatch()
		for i := 0; i < 5000; i++ {
			batch.Intern(fmt.Sprintf("%s%s-%d %s", words[rng.IntN(10)], words[rng.IntN(10)], rng.IntN(1_000_000), words[rng.IntN(10)]))
			n++
		}
		if err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if err := ix.Flush(); err != nil {
		b.Fatal(err)
	}
	patterns := []string{"timeout", "paymentcart-12345", "KAFKA", "ex", "zzzzzz", "-123456"}
	for _, p := range patterns {
		b.Run(p, func(b *testing.B) {
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if _, _, err := ix.Search(context.Background(), p, 100); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
	// "open-block": 12,000 more strings, all in the block of ids the last
	// one opened, so their postings are not written yet (Index.unposted):
	// every search also verifies those strings from memory.
	batch := ix.NewBatch()
	for i := 0; i < 12_000; i++ {
		batch.Intern(fmt.Sprintf("%s%s-%d %s", words[rng.IntN(10)], words[rng.IntN(10)], rng.IntN(1_000_000), words[rng.IntN(10)]))
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
	for _, p := range patterns[:2] {
		b.Run("open-block/"+p, func(b *testing.B) {
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if _, _, err := ix.Search(context.Background(), p, 100); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
	// "cold": the index reopened with a block cache of 1 MiB, far smaller
	// than the index, as with the stores of a large data directory: a
	// block a search needs is mostly read and decompressed again.
	dir := ix.dir
	if err := ix.Close(); err != nil {
		b.Fatal(err)
	}
	if ix, err = Open(dir, Options{CacheBytes: 1 << 20}); err != nil {
		b.Fatal(err)
	}
	for _, p := range patterns[1:2] {
		b.Run("cold/"+p, func(b *testing.B) {
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if _, _, err := ix.Search(context.Background(), p, 100); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
	b.Run("cold/-123456", func(b *testing.B) {
		cpu0 := processCPU()
		for i := 0; i < b.N; i++ {
			if _, _, err := ix.Search(context.Background(), "-123456", 100); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.StopTimer()
}

// processCPU is the CPU time (user + system, every thread) this process
// has used: on a machine shared with other work it measures the cost of a
// search better than wall time does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
