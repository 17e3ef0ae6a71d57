package recovery

import (
	"bytes"
	"context"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

// fuzzDataFile builds a small data file: a header and a few chunks of
// workload spans.
func fuzzDataFile(tb testing.TB, opt chunk.Options, seed uint64) []byte {
	tb.Helper()
	b := encodeHeader(opt, 0)
	spans := workload.Spans(seed, 12)
	for i := 0; i < len(spans); i += 4 {
		payload, err := trace.EncodeChunk(nil, spans[i:i+4])
		if err != nil {
			tb.Fatal(err)
		}
		c, err := chunk.Encode(payload, opt, nil)
		if err != nil {
			tb.Fatal(err)
		}
		b = append(b, c.Bytes()...)
	}
	return b
}

// FuzzScanDataFile feeds arbitrary bytes to recovery's scan of a data
// file (header parsing, option inference, the validating scan with full
// payload decoding). It must not panic, and the good chunks and bad
// regions must tile the scanned range exactly, in order.
func FuzzScanDataFile(f *testing.F) {
	for i, opt := range allOptions {
		good := fuzzDataFile(f, opt, uint64(i+1))
		f.Add(good, byte(i))
		torn := bytes.Clone(good[:len(good)-7])
		f.Add(torn, byte(i))
		flipped := bytes.Clone(good)
		flipped[len(flipped)/2] ^= 0x10
		f.Add(flipped, byte(i))
		hdr := bytes.Clone(good)
		hdr[7] ^= 0x10
		f.Add(hdr, byte(i))
		dup := append(bytes.Clone(good), good[16:]...)
		f.Add(dup, byte(i))
	}
	f.Add([]byte("ZTS0"), byte(0))
	f.Add([]byte{}, byte(0))
	f.Fuzz(func(t *testing.T, data []byte, which byte) {
		r := bytes.NewReader(data)
		size := int64(len(data))
		rh, err := readRawHeader(r, size)
		if err != nil {
			t.Fatalf("reading a header from memory: %v", err)
		}
		_ = rh.storedMaster()
		opt := allOptions[int(which)%len(allOptions)]
		if rh.err == nil && which&0x80 != 0 {
			opt = rh.header.Options
		}
		best, n := chooseOptions(r, size, []chunk.Options{opt}, trace.DefaultLimits())
		if n < 0 || countValid(r, size, best, trace.DefaultLimits()) != n {
			t.Fatalf("chooseOptions: %v with %d valid chunks is not reproducible", best, n)
		}
		ch := make(chan goodChunk, 4)
		var good []goodChunk
		done := make(chan struct{})
		go func() {
			for c := range ch {
				good = append(good, c)
			}
			close(done)
		}()
		res := scanChunks(context.Background(), r, size, scanConfig{opt: opt, limits: trace.DefaultLimits()}, ch)
		<-done
		if res.err != nil {
			t.Fatalf("scan of memory: %v", res.err)
		}
		// Good chunks and bad regions tile [HeaderSize, size).
		type span struct{ from, to int64 }
		var all []span
		for _, c := range good {
			if c.next < c.off+chunk.ChunkHeaderSize {
				t.Fatalf("good chunk [%d, %d)", c.off, c.next)
			}
			all = append(all, span{c.off, c.next})
		}
		for _, b := range res.bad {
			if b.Length <= 0 {
				t.Fatalf("empty bad region at %d", b.Offset)
			}
			all = append(all, span{b.Offset, b.Offset + b.Length})
		}
		for i := 1; i < len(all); i++ {
			for j := i; j > 0 && all[j].from < all[j-1].from; j-- {
				all[j], all[j-1] = all[j-1], all[j]
			}
		}
		pos := int64(chunk.HeaderSize)
		for _, s := range all {
			if s.from != pos {
				t.Fatalf("gap or overlap at %d (next piece starts at %d)", pos, s.from)
			}
			pos = s.to
		}
		if size > chunk.HeaderSize && pos != size {
			t.Fatalf("the pieces end at %d, the data at %d", pos, size)
		}
		if res.end < chunk.HeaderSize || res.end > max(size, chunk.HeaderSize) {
			t.Fatalf("end of good data %d outside [16, %d]", res.end, size)
		}
	})
}
