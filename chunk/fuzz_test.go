package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"
)

// fuzzOptions maps a fuzzer byte to one of the six valid option sets.
func fuzzOptions(b byte) Options { return allOptions[int(b)%len(allOptions)] }

// seedImages returns small valid and damaged data files for the seed corpus.
func seedImages(t testing.TB) [][]byte {
	rng := rand.New(rand.NewPCG(42, 43))
	var out [][]byte
	for _, opt := range allOptions {
		payloads := [][]byte{cborTrace(rng, 120), {}, randomBytes(rng, 24), samplePayloads(t)["traces1-1-trc.cbor"], cborTrace(rng, 200)}
		im := buildImage(t, opt, payloads)
		out = append(out, im.clone())
		torn := im.data[:len(im.data)-7]
		out = append(out, bytes.Clone(torn))
		flipped := im.clone()
		flipped[im.offs[1]+5] ^= 0x40
		out = append(out, flipped)
		zeroed := im.clone()
		clear(zeroed[im.offs[0]+20 : im.offs[3]])
		out = append(out, zeroed)
		dup := append(im.clone(), im.data[im.offs[0]:im.offs[1]]...)
		out = append(out, dup)
	}
	// A chunk stored as several zstd frames (EncodeFrames), intact and
	// with its last frame damaged under a correct CRC-32.
	framed, frameAt := framedImage(t, cborTrace(rng, 3000), []int{700, 1500, 2200})
	out = append(out, framed)
	damaged := bytes.Clone(framed)
	damaged[HeaderSize+ChunkHeaderSize+frameAt[3]+6] ^= 0x21
	binary.BigEndian.PutUint32(damaged[HeaderSize+12:], crc32.ChecksumIEEE(damaged[HeaderSize+ChunkHeaderSize:]))
	out = append(out, damaged)
	// The same payload as written before LZ4 lead frames (every frame a
	// zstd frame), intact and damaged alike; an LZ4 lead chunk whose
	// chunk CRC-32 alone is wrong, and one whose lead frame is damaged.
	payload := cborTrace(rng, 3000)
	old := append(appendHeader(nil, Header{Options: Options{Zstd, true}}), encodeZstdLead(t, payload, []int{700, 1500, 2200}).Bytes()...)
	out = append(out, old)
	damaged = bytes.Clone(old)
	damaged[len(damaged)-9] ^= 0x21
	binary.BigEndian.PutUint32(damaged[HeaderSize+12:], crc32.ChecksumIEEE(damaged[HeaderSize+ChunkHeaderSize:]))
	out = append(out, damaged)
	lead, _ := framedImage(t, payload, []int{700, 1500, 2200})
	badSum := bytes.Clone(lead)
	badSum[HeaderSize+12] ^= 0x08
	out = append(out, badSum)
	badLead := bytes.Clone(lead)
	badLead[HeaderSize+ChunkHeaderSize+30] ^= 0x08
	out = append(out, badLead)
	return out
}

// framedSeeds is how many of seedImages's last images hold one zstd chunk
// cut into frames.
const framedSeeds = 6

// FuzzScanner scans arbitrary file bytes: no panic, no hang, and the chunks
// returned plus the bad regions tile the file exactly; every returned chunk
// reads back identically through ReadChunkAt.
func FuzzScanner(f *testing.F) {
	for i, img := range seedImages(f) {
		f.Add(img, byte(0))
		f.Add(img, byte(i))
	}
	f.Add([]byte("ZTS0"), byte(0))
	f.Add([]byte{}, byte(1))
	// Zero tails: after the last chunk (the end of the data), after a torn
	// chunk, and followed by garbage.
	img := seedImages(f)[0]
	f.Add(append(bytes.Clone(img), make([]byte, 300)...), byte(0))
	f.Add(append(bytes.Clone(img[:len(img)-40]), make([]byte, 300)...), byte(0))
	f.Add(append(append(bytes.Clone(img), make([]byte, 300)...), 'x'), byte(0))
	f.Fuzz(func(t *testing.T, data []byte, optByte byte) {
		size := int64(len(data))
		opt := fuzzOptions(optByte)
		if h, err := ReadHeader(bytes.NewReader(data), size); err == nil {
			opt = h.Options
			// computeMaster must agree with the scan on clean files.
			_, _ = VerifyMaster(bytes.NewReader(data), size)
		} else if !errors.Is(err, ErrTornHeader) && !errors.Is(err, ErrBadHeader) {
			t.Fatalf("ReadHeader: unexpected error %v", err)
		}
		r := scanBytes(data, opt, nil)
		if r.err != nil {
			t.Fatalf("scan of an in-memory file: I/O error %v", r.err)
		}
		checkTiling(t, data, opt, r)
		for i, off := range r.offs {
			p, _, err := ReadChunkAt(bytes.NewReader(data), size, opt, off)
			if err != nil || !bytes.Equal(p, r.payloads[i]) {
				t.Fatalf("chunk at %d: ReadChunkAt %v, payload equal %v", off, err, bytes.Equal(p, r.payloads[i]))
			}
		}
		for _, b := range r.bad {
			if b.Reason < BadMagic || b.Reason > Payload || b.Err == nil {
				t.Fatalf("bad region without a reason: %v", b)
			}
		}
		if len(r.bad) == 0 && len(data) >= HeaderSize {
			// A zero tail ends the data: the chunk headers tile the file
			// up to it (and not past it: computeMaster is strict).
			end := size
			if r.zeroLen > 0 {
				end = r.zeroOff
				if _, err := computeMaster(bytes.NewReader(data), size, opt); err == nil {
					t.Fatalf("computeMaster accepts a zero tail of %d bytes at %d", r.zeroLen, r.zeroOff)
				}
			}
			if _, err := computeMaster(bytes.NewReader(data), end, opt); err != nil {
				t.Fatalf("clean scan but computeMaster fails: %v", err)
			}
		}
	})
}

// FuzzReadChunk reads a chunk at an arbitrary offset of arbitrary bytes: no
// panic, a bounded result, and errors are either ErrOutOfRange or a
// *CorruptionError naming the offset.
func FuzzReadChunk(f *testing.F) {
	imgs := seedImages(f)
	for i, img := range imgs[:len(imgs)-framedSeeds] {
		f.Add(img, int64(HeaderSize), byte(i/5))
	}
	for _, img := range imgs[len(imgs)-framedSeeds:] { // the framed zstd chunks
		f.Add(img, int64(HeaderSize), byte(7))
	}
	if old, err := os.ReadFile("testdata/frames-zstd-lead.zts"); err == nil {
		f.Add(old, int64(HeaderSize), byte(7))
	} else {
		f.Fatal(err)
	}
	hostile := appendHeader(nil, Header{Options: Options{LZ4, true}})
	hostile = binary.BigEndian.AppendUint32(hostile, ChunkMagic)
	hostile = binary.BigEndian.AppendUint32(hostile, 0xFFFFFFFE)
	hostile = binary.BigEndian.AppendUint32(hostile, 0xFFFFFFFE)
	hostile = binary.BigEndian.AppendUint32(hostile, 0)
	f.Add(hostile, int64(HeaderSize), byte(3))
	f.Fuzz(func(t *testing.T, data []byte, off int64, optByte byte) {
		opt := fuzzOptions(optByte)
		p, next, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), opt, off)
		// ReadFramesAt and filling every frame agree with ReadChunkAt; so
		// do the frames filled one by one before (each range the middle
		// byte of a frame, its buffer that frame).
		fr, fnext, ferr := ReadFramesAt(bytes.NewReader(data), int64(len(data)), opt, off)
		var whole []byte
		if ferr == nil && err == nil {
			for _, f := range fr.frames {
				mid := (f.at + f.end) / 2
				b, base, ferr := fr.Fill(mid, mid+1)
				if ferr != nil || base > mid || base+len(b) <= mid || base+len(b) > len(p) || !bytes.Equal(b, p[base:base+len(b)]) {
					t.Fatalf("chunk at %d: Fill(%d, %d) = bytes %d to %d, %v; want a part of the payload holding it", off, mid, mid+1, base, base+len(b), ferr)
				}
			}
		}
		if ferr == nil {
			var base int
			whole, base, ferr = fr.Fill(0, fr.Size())
			if ferr == nil && (base != 0 || len(whole) != fr.Size()) {
				t.Fatalf("chunk at %d: Fill of the whole payload gave bytes %d to %d of %d", off, base, base+len(whole), fr.Size())
			}
		}
		if ce := (*CorruptionError)(nil); ferr == nil && errors.As(err, &ce) && ce.Reason == Checksum {
			// ReadFramesAt does not check the CRC-32 of a chunk whose LZ4
			// lead frame lists its frames (each is checked by its own
			// checksum): with the CRC-32 made right, ReadChunkAt reads
			// what it read.
			fixed := bytes.Clone(data)
			stored := binary.BigEndian.Uint32(fixed[off+4:]) &^ rawBit
			binary.BigEndian.PutUint32(fixed[off+12:], crc32.ChecksumIEEE(fixed[off+ChunkHeaderSize:off+ChunkHeaderSize+int64(stored)]))
			if !isLZ4Frame(fixed[off+ChunkHeaderSize:]) {
				t.Fatalf("chunk at %d: ReadChunkAt %v, but ReadFramesAt of a chunk without an LZ4 lead frame reads it", off, err)
			}
			p, next, err = ReadChunkAt(bytes.NewReader(fixed), int64(len(fixed)), opt, off)
			data = fixed // the checks below are of the chunk as read
		}
		if (ferr == nil) != (err == nil) || (err == nil && (fnext != next || !bytes.Equal(whole, p))) {
			t.Fatalf("chunk at %d: ReadChunkAt %v, ReadFramesAt and Fill %v", off, err, ferr)
		}
		// Read again with the layout ReadFramesAt learnt, every frame
		// filled alone agrees too.
		if ferr == nil && fr.Layout() != nil {
			l := fr.Layout()
			kr, knext, kerr := ReadFramesKnownAt(bytes.NewReader(data), int64(len(data)), opt, off, l)
			if kerr != nil || knext != next || kr.Frames() != fr.Frames() {
				t.Fatalf("chunk at %d: ReadFramesKnownAt: %v, next %d (want %d), %d frames (want %d)", off, kerr, knext, next, kr.Frames(), fr.Frames())
			}
			for _, f := range kr.frames {
				b, base, kerr := kr.Fill(f.at, f.end)
				if kerr != nil || base != f.at || !bytes.Equal(b, p[f.at:f.end]) {
					t.Fatalf("chunk at %d: known layout, Fill(%d, %d) = bytes %d to %d, %v", off, f.at, f.end, base, base+len(b), kerr)
				}
			}
		}
		if err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) {
				if ce.Offset != off || ce.Reason < BadMagic || ce.Reason > Payload {
					t.Fatalf("corruption error %v for offset %d", ce, off)
				}
			} else if !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if next <= off || next > int64(len(data)) || len(p) > MaxChunkSize {
			t.Fatalf("chunk at %d: next %d, %d payload bytes, file %d bytes", off, next, len(p), len(data))
		}
		// A chunk that reads must also be found by a scan started there.
		s := NewScanner(bytes.NewReader(data), int64(len(data)), opt)
		s.SetOffset(off)
		if !s.Next() {
			t.Fatalf("scanner does not find the chunk at %d", off)
		}
		if got, q := s.Chunk(); got != off || !bytes.Equal(q, p) {
			t.Fatalf("scanner returns chunk %d, want %d", got, off)
		}
	})
}

// FuzzEncodeRoundTrip: every payload encodes and decodes back exactly, and
// never grows by more than the chunk header.
func FuzzEncodeRoundTrip(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 6 {
		f.Add(cborTrace(rng, 100*i), byte(i))
		f.Add(randomBytes(rng, 50*i), byte(i))
	}
	f.Add(cborTrace(rng, 5000), byte(4*16+7)) // zstd with checksums, 4 frames
	f.Add(cborTrace(rng, 5000), byte(3*16+6)) // zstd without checksums, 3 frames
	f.Fuzz(func(t *testing.T, payload []byte, optByte byte) {
		opt := fuzzOptions(optByte)
		// Cut into optByte/16 pieces (zstd frames; other codecs ignore cuts).
		var cuts []int
		if pieces := int(optByte / 16); pieces > 1 {
			for k := 1; k < pieces; k++ {
				cuts = append(cuts, k*len(payload)/pieces)
			}
		}
		c, err := EncodeFrames(payload, cuts, opt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Len() > int64(ChunkHeaderSize+len(payload)) {
			t.Fatalf("%d payload bytes encode to %d", len(payload), c.Len())
		}
		data := append(appendHeader(nil, Header{Options: opt}), c.Bytes()...)
		got, next, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
		if err != nil || !bytes.Equal(got, payload) || next != int64(len(data)) {
			t.Fatalf("round trip: %v, equal %v, next %d", err, bytes.Equal(got, payload), next)
		}
		fr, _, err := ReadFramesAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
		var whole []byte
		if err == nil {
			whole, _, err = fr.Fill(0, len(payload))
		}
		if err != nil || !bytes.Equal(whole, payload) {
			t.Fatalf("round trip through ReadFramesAt: %v", err)
		}
	})
}
