package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// testPayloads returns n compressible CBOR-like payloads of varied sizes, plus
// the real Zorka samples.
func testPayloads(t testing.TB, n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var out [][]byte
	for i := range n {
		out = append(out, cborTrace(rng, 200+rng.IntN(3000)+i))
	}
	for _, name := range []string{"traces1-1-trc.cbor", "zorka-tdb-sampled-tomcat-trc.cbor", "zorka-tdb-sampled-tomcat-agd.cbor"} {
		out = append(out, samplePayloads(t)[name])
	}
	return out
}

func TestScannerCleanFile(t *testing.T) {
	for _, opt := range allOptions {
		im := buildImage(t, opt, testPayloads(t, 20, 1))
		r := scanBytes(im.data, opt, wellformedSequence)
		if r.err != nil || len(r.bad) != 0 {
			t.Fatalf("%v: clean file: err %v, bad %v", opt, r.err, r.bad)
		}
		if !slices.Equal(r.offs, im.offs) {
			t.Fatalf("%v: offsets %v, want %v", opt, r.offs, im.offs)
		}
		for i := range r.payloads {
			if !bytes.Equal(r.payloads[i], im.payloads[i]) {
				t.Fatalf("%v: payload %d differs", opt, i)
			}
		}
		if r.end != int64(len(im.data)) {
			t.Fatalf("%v: Offset() = %d at the end, want %d", opt, r.end, len(im.data))
		}
	}
}

// TestScannerCorruptHeaderFields flips each field of one chunk header in the
// middle of a file: exactly that chunk is reported, with the right Reason and
// offset, and every other chunk is returned.
func TestScannerCorruptHeaderFields(t *testing.T) {
	const victim = 4
	type corruption struct {
		name   string
		mutate func(h []byte)
		want   map[Compression]Reason // by compression of the file
	}
	all := func(r Reason) map[Compression]Reason {
		return map[Compression]Reason{None: r, LZ4: r, Zlib: r, Zstd: r}
	}
	add := func(off int, delta uint32) func([]byte) {
		return func(h []byte) { binary.BigEndian.PutUint32(h[off:], binary.BigEndian.Uint32(h[off:])+delta) }
	}
	set := func(off int, v uint32) func([]byte) {
		return func(h []byte) { binary.BigEndian.PutUint32(h[off:], v) }
	}
	corruptions := []corruption{
		{"magic bit flip", func(h []byte) { h[1] ^= 0x04 }, all(BadMagic)},
		{"magic zeroed", set(0, 0), all(BadMagic)},
		{"csize 0xFFFFFFFE", set(4, 0xFFFFFFFE), all(SizeOutOfBounds)},
		{"csize 0x7FFFFFFE", set(4, 0x7FFFFFFE), all(SizeOutOfBounds)},
		{"csize raw bit flipped", func(h []byte) { h[4] ^= 0x80 }, all(SizeOutOfBounds)},
		{"csize +1", add(4, 1), map[Compression]Reason{None: SizeOutOfBounds, LZ4: Checksum, Zlib: Checksum, Zstd: Checksum}},
		{"csize -1", add(4, 0xFFFFFFFF), map[Compression]Reason{None: SizeOutOfBounds, LZ4: Checksum, Zlib: Checksum, Zstd: Checksum}},
		{"lsize +1", add(8, 1), map[Compression]Reason{None: SizeOutOfBounds, LZ4: Decompress, Zlib: Decompress, Zstd: Decompress}},
		{"lsize -1", add(8, 0xFFFFFFFF), map[Compression]Reason{None: SizeOutOfBounds, LZ4: Decompress, Zlib: Decompress, Zstd: Decompress}},
		{"lsize 0xFFFFFFFE", set(8, 0xFFFFFFFE), all(SizeOutOfBounds)},
		{"cksum bit flip", func(h []byte) { h[14] ^= 0x10 }, all(Checksum)},
	}
	for _, opt := range []Options{{None, true}, {LZ4, true}, {Zlib, true}, {Zstd, true}} {
		im := buildImage(t, opt, testPayloads(t, 10, 2))
		for _, c := range corruptions {
			t.Run(fmt.Sprintf("%v/%s", opt, c.name), func(t *testing.T) {
				data := im.clone()
				off := im.offs[victim]
				c.mutate(data[off : off+ChunkHeaderSize])
				want := c.want[opt.Compression]

				r := scanBytes(data, opt, nil)
				checkTiling(t, data, opt, r)
				wantOffs := slices.Delete(slices.Clone(im.offs), victim, victim+1)
				if !slices.Equal(r.offs, wantOffs) {
					t.Fatalf("chunks %v, want %v", r.offs, wantOffs)
				}
				wantBad := BadRegion{Offset: off, Length: im.end(victim) - off, Reason: want}
				if len(r.bad) != 1 || r.bad[0].Offset != wantBad.Offset || r.bad[0].Length != wantBad.Length || r.bad[0].Reason != want {
					t.Fatalf("bad regions %v, want [%v]", r.bad, wantBad)
				}
				_, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), opt, off)
				if ce := asCorruption(t, err); ce.Reason != want || ce.Offset != off {
					t.Fatalf("ReadChunkAt: %v, want %v at %d", err, want, off)
				}
			})
		}
	}
}

// TestScannerPayloadBitFlip flips every 97th bit of one chunk's stored bytes.
func TestScannerPayloadBitFlip(t *testing.T) {
	const victim = 3
	for _, opt := range []Options{{None, true}, {LZ4, true}, {Zlib, true}, {Zstd, true}} {
		im := buildImage(t, opt, testPayloads(t, 8, 3))
		from, to := im.offs[victim]+ChunkHeaderSize, im.end(victim)
		for bit := from * 8; bit < to*8; bit += 97 {
			data := im.clone()
			data[bit/8] ^= 1 << (bit % 8)
			r := scanBytes(data, opt, nil)
			if len(r.bad) != 1 || r.bad[0].Reason != Checksum || r.bad[0].Offset != im.offs[victim] || r.bad[0].Length != to-im.offs[victim] {
				t.Fatalf("%v: bit %d flipped: bad %v", opt, bit, r.bad)
			}
			if len(r.offs) != len(im.offs)-1 {
				t.Fatalf("%v: bit %d flipped: %d chunks, want %d", opt, bit, len(r.offs), len(im.offs)-1)
			}
		}
	}
}

// TestScannerTruncatedTail cuts the file at every byte offset inside the last
// chunk: all earlier chunks are returned and the last one is reported as
// Truncated at its offset (where recovery cuts).
func TestScannerTruncatedTail(t *testing.T) {
	for _, opt := range allOptions {
		im := buildImage(t, opt, testPayloads(t, 5, 4)[:5])
		last := len(im.offs) - 1
		lastOff := im.offs[last]
		for cut := lastOff + 1; cut < int64(len(im.data)); cut++ {
			data := im.data[:cut]
			r := scanBytes(data, opt, nil)
			checkTiling(t, data, opt, r)
			if !slices.Equal(r.offs, im.offs[:last]) {
				t.Fatalf("%v: cut at %d: chunks %v, want %v", opt, cut, r.offs, im.offs[:last])
			}
			if len(r.bad) != 1 || r.bad[0] != (BadRegion{Offset: lastOff, Length: cut - lastOff, Reason: Truncated, Err: r.bad[0].Err}) {
				t.Fatalf("%v: cut at %d: bad %v, want Truncated at %d", opt, cut, r.bad, lastOff)
			}
			_, _, err := ReadChunkAt(bytes.NewReader(data), cut, opt, lastOff)
			if ce := asCorruption(t, err); ce.Reason != Truncated || ce.Offset != lastOff {
				t.Fatalf("%v: cut at %d: ReadChunkAt %v", opt, cut, err)
			}
		}
		// Cutting exactly at a chunk boundary leaves a clean file.
		r := scanBytes(im.data[:lastOff], opt, nil)
		if len(r.bad) != 0 || len(r.offs) != last {
			t.Fatalf("%v: cut at a boundary: chunks %v bad %v", opt, r.offs, r.bad)
		}
	}
}

// TestScannerZeroedRegion zeroes 4 KiB in the middle of a file: the chunks it
// touches form one bad region, every chunk outside it is returned.
func TestScannerZeroedRegion(t *testing.T) {
	for _, opt := range []Options{{None, true}, {LZ4, true}, {Zlib, true}, {Zstd, true}, {LZ4, false}, {Zlib, false}, {Zstd, false}} {
		im := buildImage(t, opt, testPayloads(t, 40, 5))
		for _, zstart := range []int64{im.offs[10] + 100, im.offs[12], int64(len(im.data)) / 2} {
			zend := zstart + 4096
			data := im.clone()
			clear(data[zstart:zend])
			r := scanBytes(data, opt, nil)
			checkTiling(t, data, opt, r)
			var want []int64
			firstHit, firstAfter := int64(-1), int64(-1)
			for i, off := range im.offs {
				end := im.end(i)
				switch {
				case end <= zstart:
					want = append(want, off)
				case off >= zend:
					want = append(want, off)
					if firstAfter < 0 {
						firstAfter = off
					}
				case firstHit < 0:
					firstHit = off
				}
			}
			if !slices.Equal(r.offs, want) {
				t.Fatalf("%v: zeroed [%d,%d): chunks %v, want %v", opt, zstart, zend, r.offs, want)
			}
			if len(r.bad) != 1 || r.bad[0].Offset != firstHit || r.bad[0].Offset+r.bad[0].Length != firstAfter {
				t.Fatalf("%v: zeroed [%d,%d): bad %v, want [%d,%d)", opt, zstart, zend, r.bad, firstHit, firstAfter)
			}
			if reason := r.bad[0].Reason; reason == Truncated || reason == Payload {
				t.Fatalf("%v: zeroed region reported as %v", opt, reason)
			}
		}
	}
}

func TestScannerGarbageAppended(t *testing.T) {
	garbage := map[string][]byte{
		"text":         []byte("this is not a chunk, just some text that ended up at the end of the file\n"),
		"fake magic":   append([]byte("ZCH0\x00\x00\x00\x10\x00\x00\x00\x10\x00\x00\x00\x00"), bytes.Repeat([]byte{7}, 40)...),
		"three bytes":  {1, 2, 3},
		"magic prefix": []byte("ZCH"),
	}
	for _, opt := range allOptions {
		im := buildImage(t, opt, testPayloads(t, 6, 6))
		for name, g := range garbage {
			data := append(im.clone(), g...)
			r := scanBytes(data, opt, nil)
			checkTiling(t, data, opt, r)
			want := BadMagic
			if name == "magic prefix" {
				want = Truncated // indistinguishable from a torn header
			}
			if name == "fake magic" {
				switch {
				case opt == Options{None, false}:
					// Without compression and checksums a well-formed
					// header is all there is to check: the fake chunk is
					// accepted and the 40-16 bytes after it are garbage.
					fake := int64(len(im.data))
					if !slices.Equal(r.offs, append(slices.Clone(im.offs), fake)) || len(r.bad) != 1 ||
						r.bad[0].Offset != fake+32 || r.bad[0].Reason != BadMagic {
						t.Fatalf("%v %s: chunks %v bad %v", opt, name, r.offs, r.bad)
					}
					continue
				case opt.Compression == None:
					want = Checksum
				default:
					want = SizeOutOfBounds // a compressed chunk that does not shrink
				}
			}
			if !slices.Equal(r.offs, im.offs) || len(r.bad) != 1 || r.bad[0].Offset != int64(len(im.data)) ||
				r.bad[0].Length != int64(len(g)) || r.bad[0].Reason != want {
				t.Fatalf("%v %s: chunks %v bad %v, want %v at %d", opt, name, r.offs, r.bad, want, len(im.data))
			}
		}
	}
}

func TestScannerDuplicateChunk(t *testing.T) {
	for _, opt := range allOptions {
		im := buildImage(t, opt, testPayloads(t, 6, 7))
		dup := im.data[im.offs[2]:im.end(2)]
		data := slices.Concat(im.data[:im.end(2)], dup, im.data[im.end(2):])
		r := scanBytes(data, opt, nil)
		checkTiling(t, data, opt, r)
		if len(r.bad) != 0 || len(r.offs) != len(im.offs)+1 {
			t.Fatalf("%v: duplicate: %d chunks, bad %v", opt, len(r.offs), r.bad)
		}
		if !bytes.Equal(r.payloads[2], r.payloads[3]) || !bytes.Equal(r.payloads[2], im.payloads[2]) {
			t.Fatalf("%v: duplicated payload differs", opt)
		}
	}
}

// TestScannerSizePastEndThenValid: a header whose sizes are plausible but run
// past the end of the file is Truncated only when nothing valid follows.
func TestScannerSizePastEndThenValid(t *testing.T) {
	opt := Options{None, true}
	im := buildImage(t, opt, testPayloads(t, 6, 8))
	grow := func(data []byte, i int) {
		h := data[im.offs[i] : im.offs[i]+ChunkHeaderSize]
		binary.BigEndian.PutUint32(h[4:], 1<<20)
		binary.BigEndian.PutUint32(h[8:], 1<<20)
	}
	data := im.clone()
	grow(data, 2)
	r := scanBytes(data, opt, nil)
	if len(r.bad) != 1 || r.bad[0].Reason != SizeOutOfBounds || r.bad[0].Offset != im.offs[2] || len(r.offs) != len(im.offs)-1 {
		t.Fatalf("middle chunk: chunks %v bad %v", r.offs, r.bad)
	}
	data = im.clone()
	last := len(im.offs) - 1
	grow(data, last)
	r = scanBytes(data, opt, nil)
	if len(r.bad) != 1 || r.bad[0].Reason != Truncated || r.bad[0].Offset != im.offs[last] || len(r.offs) != last {
		t.Fatalf("last chunk: chunks %v bad %v", r.offs, r.bad)
	}
}

// wellformedSequence checks that b is a sequence of well-formed CBOR items
// (the Zorka agent bodies are sequences; their tags 2 and 3 are not bignums,
// so a semantic decoder would reject them).
func wellformedSequence(b []byte) error {
	for off := 0; off < len(b); {
		n, err := wellformedItem(b[off:], 0)
		if err != nil {
			return fmt.Errorf("CBOR item at %d: %w", off, err)
		}
		off += n
	}
	return nil
}

var errCBOR = errors.New("malformed CBOR")

// wellformedItem returns the length of the CBOR item at the start of b.
func wellformedItem(b []byte, depth int) (int, error) {
	if depth > 64 || len(b) == 0 {
		return 0, errCBOR
	}
	major, info := b[0]>>5, b[0]&31
	n, arg := 1, uint64(info)
	switch {
	case info < 24:
	case info <= 27:
		w := 1 << (info - 24)
		if len(b) < 1+w {
			return 0, errCBOR
		}
		arg = 0
		for _, c := range b[1 : 1+w] {
			arg = arg<<8 | uint64(c)
		}
		n += w
	case info == 31 && major >= 2 && major <= 5:
		for { // indefinite length: items until the break byte
			if n >= len(b) {
				return 0, errCBOR
			}
			if b[n] == 0xff {
				return n + 1, nil
			}
			m, err := wellformedItem(b[n:], depth+1)
			if err != nil {
				return 0, err
			}
			n += m
		}
	default:
		return 0, errCBOR
	}
	switch major {
	case 2, 3:
		if arg > uint64(len(b)-n) {
			return 0, errCBOR
		}
		return n + int(arg), nil
	case 4, 5, 6:
		items := arg
		if major == 5 {
			items *= 2
		}
		if major == 6 {
			items = 1
		}
		for range items {
			m, err := wellformedItem(b[n:], depth+1)
			if err != nil {
				return 0, err
			}
			n += m
		}
	}
	return n, nil
}

// TestScannerValidate: a chunk whose payload fails Validate (checksum intact)
// is a Payload bad region; the real CBOR samples pass.
func TestScannerValidate(t *testing.T) {
	payloads := testPayloads(t, 4, 9)
	payloads[2] = []byte{0x9f, 0x01, 0x02} // unterminated indefinite array
	for _, opt := range allOptions {
		im := buildImage(t, opt, payloads)
		r := scanBytes(im.data, opt, wellformedSequence)
		if len(r.bad) != 1 || r.bad[0].Reason != Payload || r.bad[0].Offset != im.offs[2] || r.bad[0].Length != im.end(2)-im.offs[2] {
			t.Fatalf("%v: bad %v", opt, r.bad)
		}
		if len(r.offs) != len(im.offs)-1 {
			t.Fatalf("%v: %d chunks", opt, len(r.offs))
		}
	}
}

// TestScannerSetOffset starts a scan at a watermark.
func TestScannerSetOffset(t *testing.T) {
	opt := Options{LZ4, true}
	im := buildImage(t, opt, testPayloads(t, 10, 10))
	s := NewScanner(bytes.NewReader(im.data), int64(len(im.data)), opt)
	s.SetOffset(im.offs[7])
	var got []int64
	for s.Next() {
		off, _ := s.Chunk()
		info := s.Info()
		if info.Offset != off || info.LogicalSize != int64(len(im.payloads[slices.Index(im.offs, off)])) {
			t.Fatalf("Info %+v", info)
		}
		got = append(got, off)
	}
	if !slices.Equal(got, im.offs[7:]) {
		t.Fatalf("chunks %v, want %v", got, im.offs[7:])
	}
}

// errReaderAt fails every read at or past failAt.
type errReaderAt struct {
	data   []byte
	failAt int64
}

var errInjected = errors.New("injected I/O error")

func (r errReaderAt) ReadAt(b []byte, off int64) (int, error) {
	if off+int64(len(b)) > r.failAt {
		return 0, errInjected
	}
	return copy(b, r.data[off:]), nil
}

func TestScannerIOError(t *testing.T) {
	opt := Options{Zlib, true}
	im := buildImage(t, opt, testPayloads(t, 3, 11))
	s := NewScanner(errReaderAt{im.data, 100}, int64(len(im.data)), opt)
	if s.Next() {
		t.Fatal("Next succeeded over a failing reader")
	}
	if !errors.Is(s.Err(), errInjected) || len(s.BadRegions()) != 0 {
		t.Fatalf("Err %v, bad %v", s.Err(), s.BadRegions())
	}
}

// TestScannerShrunkFile: the reader holds fewer bytes than the size given.
func TestScannerShrunkFile(t *testing.T) {
	opt := Options{LZ4, true}
	im := buildImage(t, opt, testPayloads(t, 3, 12))
	size := int64(len(im.data))
	cut := im.offs[2] + 5
	r := NewScanner(bytes.NewReader(im.data[:cut]), size, opt)
	n := 0
	for r.Next() {
		n++
	}
	if r.Err() != nil || n != 2 || len(r.BadRegions()) != 1 || r.BadRegions()[0].Reason != Truncated || r.BadRegions()[0].Offset != im.offs[2] {
		t.Fatalf("chunks %d, err %v, bad %v", n, r.Err(), r.BadRegions())
	}
}
