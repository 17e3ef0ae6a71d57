package textindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
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
	for _, p := range []string{"timeout", "paymentcart-12345", "KAFKA", "ex", "zzzzzz"} {
		b.Run(p, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, _, err := ix.Search(context.Background(), p, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.StopTimer()
}
