package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"testing"
)

func TestParseCompression(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Compression
		ok   bool
	}{
		{"none", None, true}, {"LZ4", LZ4, true}, {" zlib ", Zlib, true}, {"ZSTD", Zstd, true},
		{"", None, false}, {"gzip", None, false}, {"zstd:3", None, false},
	} {
		got, err := ParseCompression(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != map[Compression]string{None: "none", LZ4: "lz4", Zlib: "zlib", Zstd: "zstd"}[got] {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

func TestHeaderBytes(t *testing.T) {
	// The flag values follow the spec: 0x01 LZ4, 0x02 zlib, 0x10 CRC32;
	// 0x03 zstd is ztsd's own.
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{None, false}, "5a545330 00000000 00000000 00000000"},
		{Options{LZ4, true}, "5a545330 00000011 00000000 00000000"},
		{Options{Zlib, true}, "5a545330 00000012 00000000 00000000"},
		{Options{Zlib, false}, "5a545330 00000002 00000000 00000000"},
		{Options{Zstd, true}, "5a545330 00000013 00000000 00000000"},
		{Options{Zstd, false}, "5a545330 00000003 00000000 00000000"},
	} {
		b := appendHeader(nil, Header{Options: tc.opt})
		got := ""
		for i := 0; i < 16; i += 4 {
			if i > 0 {
				got += " "
			}
			got += hex4(b[i : i+4])
		}
		if got != tc.want {
			t.Errorf("header of %v = %s, want %s", tc.opt, got, tc.want)
		}
		h, err := ParseHeader(b)
		if err != nil || h.Options != tc.opt || h.Master != 0 {
			t.Errorf("ParseHeader(%s) = %+v, %v", got, h, err)
		}
	}
}

func hex4(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 8)
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func TestParseHeaderRejects(t *testing.T) {
	good := appendHeader(nil, Header{Options: Options{LZ4, true}, Master: 0xdeadbeef})
	set := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTornHeader},
		{"15 bytes", good[:15], ErrTornHeader},
		{"magic", set(0, 0x5A545331), ErrBadHeader},
		{"unknown flag bit 0x20", set(4, 0x31), ErrBadHeader},
		{"unknown flag bit 0x80000000", set(4, 0x80000001), ErrBadHeader},
		{"compression 4", set(4, 0x14), ErrBadHeader},
		{"compression 0x0f", set(4, 0x0f), ErrBadHeader},
		{"reserved", set(12, 1), ErrBadHeader},
	} {
		_, err := ParseHeader(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: ParseHeader error %v, want %v", tc.name, err, tc.want)
		}
	}
	h, err := ParseHeader(good)
	if err != nil || h.Master != 0xdeadbeef || h.Options != (Options{LZ4, true}) {
		t.Fatalf("ParseHeader(good) = %+v, %v", h, err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	samples := samplePayloads(t)
	var all []byte
	payloads := map[string][]byte{
		"empty":        {},
		"one byte":     {0x42},
		"cbor 4KiB":    cborTrace(rng, 4<<10),
		"cbor 300KiB":  cborTrace(rng, 300<<10),
		"zeros 1MiB":   make([]byte, 1<<20),
		"random 64KiB": randomBytes(rng, 64<<10),
	}
	for name, b := range samples {
		payloads[name] = b
		all = append(all, b...)
	}
	payloads["all zorka samples"] = all
	for _, opt := range allOptions {
		for name, p := range payloads {
			c, err := Encode(p, opt, nil)
			if err != nil {
				t.Fatalf("%v %s: Encode: %v", opt, name, err)
			}
			b := c.Bytes()
			h := parseChunkHeader(b)
			if h.magic != ChunkMagic || int(h.lsize) != len(p) || int(h.stored) != len(b)-ChunkHeaderSize || c.LogicalSize() != len(p) {
				t.Fatalf("%v %s: header %+v for %d payload bytes", opt, name, h, len(p))
			}
			wantSum := uint32(0)
			if opt.Checksums {
				wantSum = crc32.ChecksumIEEE(b[ChunkHeaderSize:])
			}
			if h.cksum != wantSum {
				t.Fatalf("%v %s: checksum %08x, want %08x", opt, name, h.cksum, wantSum)
			}
			if h.raw != c.StoredRaw() || (opt.Compression == None && h.raw) {
				t.Fatalf("%v %s: raw bit %v, StoredRaw %v", opt, name, h.raw, c.StoredRaw())
			}
			if !h.verbatim(opt) && h.stored >= h.lsize {
				t.Fatalf("%v %s: compressed chunk did not shrink: %d >= %d", opt, name, h.stored, h.lsize)
			}
			got, reason, err := decodeChunk(b, opt, nil)
			if reason != 0 || !bytes.Equal(got, p) {
				t.Fatalf("%v %s: decode: %v %v, %d bytes", opt, name, reason, err, len(got))
			}
		}
	}
}

func TestIncompressibleStoredRaw(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := randomBytes(rng, 10000)
	for _, opt := range []Options{{LZ4, true}, {Zlib, true}, {Zstd, true}, {LZ4, false}, {Zlib, false}, {Zstd, false}} {
		c, err := Encode(p, opt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !c.StoredRaw() || c.Len() != int64(ChunkHeaderSize+len(p)) {
			t.Fatalf("%v: random payload: raw=%v len=%d, want raw and %d", opt, c.StoredRaw(), c.Len(), ChunkHeaderSize+len(p))
		}
		if csize := binary.BigEndian.Uint32(c.Bytes()[4:8]); csize != rawBit|uint32(len(p)) {
			t.Fatalf("%v: csize field %08x, want %08x", opt, csize, rawBit|uint32(len(p)))
		}
		if !bytes.Equal(c.Bytes()[ChunkHeaderSize:], p) {
			t.Fatalf("%v: raw chunk does not hold the payload verbatim", opt)
		}
		// A compressible payload is compressed.
		q := cborTrace(rng, 10000)
		c, _ = Encode(q, opt, nil)
		if c.StoredRaw() || c.Len() >= int64(len(q)) {
			t.Fatalf("%v: CBOR payload of %d bytes stored raw=%v in %d bytes", opt, len(q), c.StoredRaw(), c.Len())
		}
	}
}

func TestEncodeReusesDst(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	p := cborTrace(rng, 8000)
	dst := make([]byte, 0, 64<<10)
	for _, opt := range allOptions {
		c, err := Encode(p, opt, dst)
		if err != nil {
			t.Fatal(err)
		}
		if &c.Bytes()[0] != &dst[:1][0] {
			t.Errorf("%v: Encode did not reuse dst", opt)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	if _, err := Encode(make([]byte, MaxChunkSize+1), Options{LZ4, true}, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized payload: %v, want ErrTooLarge", err)
	}
	if _, err := Encode([]byte("x"), Options{Compression: 7}, nil); err == nil {
		t.Errorf("invalid compression accepted")
	}
}

// TestCheckBounds covers every rule of chunkHeader.check.
func TestCheckBounds(t *testing.T) {
	hdr := func(csize, lsize, sum uint32) chunkHeader {
		var b [16]byte
		binary.BigEndian.PutUint32(b[0:], ChunkMagic)
		binary.BigEndian.PutUint32(b[4:], csize)
		binary.BigEndian.PutUint32(b[8:], lsize)
		binary.BigEndian.PutUint32(b[12:], sum)
		return parseChunkHeader(b[:])
	}
	for _, tc := range []struct {
		name string
		opt  Options
		h    chunkHeader
		want Reason
	}{
		{"none ok", Options{None, true}, hdr(10, 10, 1), 0},
		{"none raw bit", Options{None, true}, hdr(rawBit|10, 10, 1), SizeOutOfBounds},
		{"none sizes differ", Options{None, true}, hdr(10, 11, 1), SizeOutOfBounds},
		{"csize 0xFFFFFFFE", Options{LZ4, true}, hdr(0xFFFFFFFE, 0xFFFFFFFE, 1), SizeOutOfBounds},
		{"csize 0x7FFFFFFE", Options{LZ4, true}, hdr(0x7FFFFFFE, 100, 1), SizeOutOfBounds},
		{"lsize above max", Options{Zlib, true}, hdr(1000, MaxChunkSize+1, 1), SizeOutOfBounds},
		{"stored max", Options{None, true}, hdr(MaxChunkSize, MaxChunkSize, 1), 0},
		{"lz4 ok", Options{LZ4, true}, hdr(100, 25500, 1), 0},
		{"lz4 ratio", Options{LZ4, true}, hdr(100, 25501, 1), SizeOutOfBounds},
		{"zlib ratio", Options{Zlib, true}, hdr(10, 10321, 1), SizeOutOfBounds},
		{"zstd ok", Options{Zstd, true}, hdr(100, 3276800, 1), 0},
		{"zstd ratio", Options{Zstd, true}, hdr(100, 3276801, 1), SizeOutOfBounds},
		{"compressed not smaller", Options{LZ4, true}, hdr(100, 100, 1), SizeOutOfBounds},
		{"compressed empty", Options{Zlib, true}, hdr(0, 0, 1), SizeOutOfBounds},
		{"raw sizes differ", Options{Zlib, true}, hdr(rawBit|100, 101, 1), SizeOutOfBounds},
		{"raw empty", Options{Zlib, false}, hdr(rawBit, 0, 0), 0},
		{"checksum without flag", Options{LZ4, false}, hdr(100, 200, 5), Checksum},
	} {
		if got, err := tc.h.check(tc.opt); got != tc.want {
			t.Errorf("%s: check = %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestHostileSizesDoNotAllocate reads chunks whose headers claim up to 2 GiB:
// they are rejected before any allocation of that size.
func TestHostileSizesDoNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opt          Options
		csize, lsize uint32
		want         Reason
	}{
		{"csize 0xFFFFFFFE", Options{None, true}, 0xFFFFFFFE, 0xFFFFFFFE, SizeOutOfBounds},
		{"lsize 0xFFFFFFFE", Options{LZ4, true}, 100, 0xFFFFFFFE, SizeOutOfBounds},
		{"lz4 bomb 64MiB from 10 bytes", Options{LZ4, true}, 10, MaxChunkSize, SizeOutOfBounds},
		{"60MiB past a small file", Options{None, true}, 60 << 20, 60 << 20, Truncated},
		{"compressed 60MiB past a small file", Options{Zlib, true}, 60 << 20, MaxChunkSize, Truncated},
		{"zstd bomb 64MiB from 10 bytes", Options{Zstd, true}, 10, MaxChunkSize, SizeOutOfBounds},
	} {
		data := appendHeader(nil, Header{Options: tc.opt})
		data = binary.BigEndian.AppendUint32(data, ChunkMagic)
		data = binary.BigEndian.AppendUint32(data, tc.csize)
		data = binary.BigEndian.AppendUint32(data, tc.lsize)
		data = binary.BigEndian.AppendUint32(data, 0)
		data = append(data, make([]byte, 200)...)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), tc.opt, HeaderSize)
		r := scanBytes(data, tc.opt, nil)
		runtime.ReadMemStats(&after)

		if ce := asCorruption(t, err); ce.Reason != tc.want || ce.Offset != HeaderSize {
			t.Errorf("%s: ReadChunkAt: %v, want %v at %d", tc.name, err, tc.want, HeaderSize)
		}
		if len(r.offs) != 0 || len(r.bad) != 1 || r.bad[0].Reason != tc.want || r.bad[0].Offset != HeaderSize || r.bad[0].Length != int64(len(data)-HeaderSize) {
			t.Errorf("%s: scan: chunks %v, bad %v", tc.name, r.offs, r.bad)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Errorf("%s: allocated %d bytes", tc.name, alloc)
		}
	}
}
