package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// lz4LeadImage is a zstd data file holding one chunk of payload cut at
// cuts as EncodeFrames writes it (an LZ4 lead frame, then zstd frames),
// after mutate (when set) changed its stored bytes; the lead frame's
// CRC-32 is computed again after mutate when fixLead is set, and the
// chunk's CRC-32 always is, so that only the change mutate made is wrong.
func lz4LeadImage(t testing.TB, payload []byte, cuts []int, mutate func(stored []byte) []byte, fixLead bool) []byte {
	t.Helper()
	c, err := EncodeFrames(payload, cuts, Options{Zstd, true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored := bytes.Clone(c.Bytes()[ChunkHeaderSize:])
	if !isLZ4Frame(stored) {
		t.Fatalf("EncodeFrames wrote no LZ4 lead frame")
	}
	if mutate != nil {
		stored = mutate(stored)
	}
	if fixLead {
		size := lz4FrameSize(stored)
		binary.LittleEndian.PutUint32(stored[8:], crc32.ChecksumIEEE(stored[12:size]))
	}
	return zstdChunk(stored, len(payload))
}

// TestLZ4LeadFrameRules crafts chunks whose LZ4 lead frame breaks one rule
// of the format each (docs/format/data-file.md, "zstd frames"): every one
// is a Decompress corruption at the chunk's offset from ReadChunkAt, the
// Scanner and ReadFramesAt (which reads only the lead frame), naming what
// is wrong.
func TestLZ4LeadFrameRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	payload := cborTrace(rng, 60_000)
	cuts := []int{20_000, 35_000, 50_000}
	u32 := func(at int, v uint32) func([]byte) []byte {
		return func(s []byte) []byte { binary.LittleEndian.PutUint32(s[at:], v); return s }
	}
	get := func(at int) uint32 {
		c, _ := EncodeFrames(payload, cuts, Options{Zstd, true}, nil)
		return binary.LittleEndian.Uint32(c.Bytes()[ChunkHeaderSize+at:])
	}
	for _, tc := range []struct {
		name    string
		mutate  func([]byte) []byte
		fixLead bool
		lsize   int // the chunk header's, when not the payload's
		detail  string
	}{
		{"block damaged, checksum kept", func(s []byte) []byte { s[lz4FrameSize(s)-5] ^= 0x5a; return s }, false, 0, "CRC-32"},
		{"checksum flipped", func(s []byte) []byte { s[8] ^= 1; return s }, false, 0, "CRC-32"},
		{"content size 0", u32(12, 0), true, 0, "content size 0"},
		{"content size one more", u32(12, get(12)+1), true, 0, ""},
		{"content size past the chunk", u32(12, uint32(len(payload)+1)), true, 0, "content size"},
		{"table entry stored size", u32(lz4FrameHead, get(lz4FrameHead)+1), true, 0, "LZ4 lead frame"},
		{"table entry payload size", u32(lz4FrameHead+4, get(lz4FrameHead+4)-1), true, 0, "LZ4 lead frame"},
		{"table of one frame less", u32(16, 2), true, 0, ""},
		{"table past the frame", u32(16, 1<<28), true, 0, "table"},
		{"frame size past the chunk", u32(4, 1<<20), false, 0, "LZ4 lead frame"},
		{"frame size under its header", u32(4, 8), false, 0, "under"},
		{"chunk's logical size differs", nil, false, len(payload) + 100, ""},
		{"LZ4 lead frame second", func(s []byte) []byte {
			// a zstd frame of the first 20,000 bytes, then the lead frame
			lead := s[:lz4FrameSize(s)]
			return append(zstdFrame(payload[:cuts[0]], len(payload), nil), lead...)
		}, false, cuts[0] + 20_000, "LZ4 lead frame after the first frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := lz4LeadImage(t, payload, cuts, tc.mutate, tc.fixLead)
			if tc.lsize != 0 {
				binary.BigEndian.PutUint32(data[HeaderSize+8:], uint32(tc.lsize))
			}
			check := func(what string, err error) {
				t.Helper()
				ce := asCorruption(t, err)
				if ce.Reason != Decompress || ce.Offset != HeaderSize || !strings.Contains(err.Error(), tc.detail) {
					t.Fatalf("%s: %v; want %v at offset %d mentioning %q", what, err, Decompress, HeaderSize, tc.detail)
				}
			}
			_, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), Options{Zstd, true}, HeaderSize)
			check("ReadChunkAt", err)
			r := scanBytes(data, Options{Zstd, true}, nil)
			if len(r.offs) != 0 || len(r.bad) != 1 || r.bad[0].Offset != HeaderSize || r.bad[0].Reason != Decompress {
				t.Fatalf("scan: chunks %v, bad %v", r.offs, r.bad)
			}
			if tc.name == "LZ4 lead frame second" {
				return // not read as a lead frame: ReadFramesAt reads it whole, as ReadChunkAt
			}
			_, _, err = ReadFramesAt(bytes.NewReader(data), int64(len(data)), Options{Zstd, true}, HeaderSize)
			check("ReadFramesAt", err)
		})
	}
	data := lz4LeadImage(t, payload, cuts, nil, false)
	if got, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), Options{Zstd, true}, HeaderSize); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("untouched chunk: %v, equal %v", err, bytes.Equal(got, payload))
	}
}

// TestReadFramesLZ4Lead: a chunk whose first frame is an LZ4 lead frame is
// read by ReadFrames as its header and the bytes the file's hint says (16
// KiB the first time, then the moving average of the lead frames' sizes
// and an eighth) and a second read when the lead frame is longer; no other frame is read
// until a Fill needs it, and every range fills as the payload. A later
// frame damaged on disk is a Decompress corruption naming it when it is
// filled, the others still read; so is damage in the lead frame, at
// ReadFrames.
func TestReadFramesLZ4Lead(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	payload := cborTrace(rng, 200_000)
	opt := Options{Zstd, true}
	path := t.TempDir() + "/traces.zts"
	var read atomic.Int64
	f, err := CreateFS(countingFS{read: &read}, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cuts := []int{90_000, 120_000, 160_000}
	c, err := EncodeFrames(payload, cuts, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	off, err := f.AppendEncoded(c)
	if err != nil {
		t.Fatal(err)
	}
	lead := int64(lz4FrameSize(c.Bytes()[ChunkHeaderSize:]))
	if lead <= leadReadBytes {
		t.Fatalf("lead frame of %d bytes, want more than %d to test a second read", lead, leadReadBytes)
	}
	read.Store(0)
	fr, next, err := f.ReadFrames(off)
	if err != nil || next != off+c.Len() || fr.Frames() != 4 || fr.Layout() != nil {
		t.Fatalf("ReadFrames: %v, next %d (want %d), %d frames, layout %v", err, next, off+c.Len(), fr.Frames(), fr.Layout())
	}
	if got := read.Load(); got != ChunkHeaderSize+lead {
		t.Fatalf("ReadFrames read %d bytes, want %d (header and lead frame)", got, ChunkHeaderSize+lead)
	}
	if hint := f.leadHint.Load(); hint != lead {
		t.Fatalf("hint %d after a lead frame of %d bytes, want %d", hint, lead, lead)
	}
	if !fr.Decoded(0) || fr.Decoded(1) || fr.Decoded(2) || fr.Decoded(3) {
		t.Fatal("ReadFrames decoded more than the lead frame")
	}
	read.Store(0)
	fr, _, err = f.ReadFrames(off)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := read.Load(), min(ChunkHeaderSize+lead+lead/8, ChunkHeaderSize+int64(len(c.Bytes())-ChunkHeaderSize)); got != want {
		t.Fatalf("second ReadFrames read %d bytes, want %d (header and the hint)", got, want)
	}
	for _, rg := range [][2]int{{0, 10}, {89_000, 90_000}, {100_000, 101_000}, {150_000, 170_000}, {199_000, 200_000}} {
		b, base, err := fr.Fill(rg[0], rg[1])
		if err != nil || !bytes.Equal(b, payload[base:base+len(b)]) || base > rg[0] || base+len(b) < rg[1] {
			t.Fatalf("Fill(%d, %d): bytes %d to %d, %v", rg[0], rg[1], base, base+len(b), err)
		}
	}

	frames, err := zstdFrames(c.Bytes()[ChunkHeaderSize:], len(payload))
	if err != nil {
		t.Fatal(err)
	}
	damage := func(at int64) {
		t.Helper()
		w, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var b [1]byte
		if _, err := w.ReadAt(b[:], at); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x5a
		if _, err := w.WriteAt(b[:], at); err != nil {
			t.Fatal(err)
		}
	}
	damage(off + ChunkHeaderSize + int64(frames[2].storedAt+frames[2].storedEnd)/2)
	fr, _, err = f.ReadFrames(off)
	if err != nil {
		t.Fatalf("ReadFrames with frame 2 damaged: %v", err)
	}
	var ce *CorruptionError
	if _, _, err := fr.Fill(130_000, 131_000); !errors.As(err, &ce) || ce.Reason != Decompress || ce.Offset != off || !strings.Contains(err.Error(), "frame 2 at stored byte") {
		t.Fatalf("Fill of damaged frame 2: %v; want a Decompress corruption at %d naming it", err, off)
	}
	if b, base, err := fr.Fill(170_000, 171_000); err != nil || !bytes.Equal(b, payload[base:base+len(b)]) {
		t.Fatalf("Fill of frame 3: %v", err)
	}
	damage(off + ChunkHeaderSize + lead/2)
	if _, _, err := f.ReadFrames(off); !errors.As(err, &ce) || ce.Reason != Decompress || ce.Offset != off || !strings.Contains(err.Error(), "CRC-32") {
		t.Fatalf("ReadFrames with the lead frame damaged: %v; want a Decompress corruption at %d", err, off)
	}
}

// TestFramesBeforeLZ4Lead reads testdata/frames-zstd-lead.zts, a data file
// the chunk package of d28ed22 wrote (before LZ4 lead frames): a chunk of
// cborTrace(PCG(31, 32), 40,000) cut at 15,000, 25,000 and 32,000 into
// four zstd frames (the first with raw literals), then a chunk of the
// next cborTrace of 9,000 bytes in one frame. Both read as they did:
// ReadFrames reads the first whole (its Layout then serves
// ReadFramesKnown), ReadChunk and the Scanner decode both.
func TestFramesBeforeLZ4Lead(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	want := [][]byte{cborTrace(rng, 40_000), cborTrace(rng, 9_000)}
	path := t.TempDir() + "/traces.zts"
	b, err := os.ReadFile("testdata/frames-zstd-lead.zts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Options() != (Options{Zstd, true}) {
		t.Fatalf("options %v", f.Options())
	}
	r := scanBytes(b, Options{Zstd, true}, nil)
	if len(r.bad) != 0 || len(r.payloads) != 2 || !bytes.Equal(r.payloads[0], want[0]) || !bytes.Equal(r.payloads[1], want[1]) {
		t.Fatalf("scan: %d chunks, bad %v", len(r.payloads), r.bad)
	}
	off := int64(HeaderSize)
	if isLZ4Frame(b[off+ChunkHeaderSize:]) {
		t.Fatal("the fixture's first chunk starts with an LZ4 lead frame")
	}
	fr, next, err := f.ReadFrames(off)
	if err != nil || fr.Frames() != 4 || fr.Layout() == nil {
		t.Fatalf("ReadFrames: %v, %d frames, layout %v", err, fr.Frames(), fr.Layout())
	}
	known, _, err := f.ReadFramesKnown(off, fr.Layout())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Frames{fr, known} {
		for _, rg := range [][2]int{{0, 15_000}, {20_000, 20_001}, {26_000, 31_000}, {39_000, 40_000}, {0, 40_000}} {
			got, base, err := x.Fill(rg[0], rg[1])
			if err != nil || !bytes.Equal(got, want[0][base:base+len(got)]) || base > rg[0] || base+len(got) < rg[1] {
				t.Fatalf("Fill(%d, %d): bytes %d to %d, %v", rg[0], rg[1], base, base+len(got), err)
			}
		}
	}
	for i, off := range []int64{off, next} {
		got, _, err := f.ReadChunk(off)
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("ReadChunk of chunk %d: %v", i, err)
		}
	}
}

// TestLeadHintAverages: the lead read hint is a moving average of the
// lead frames met, so one large lead frame among typical ones moves it by
// a sixteenth of the difference (it used to raise every later read to
// that frame's size and a quarter), a run of larger ones brings it to
// them, and it stays within [leadReadMin, leadReadMax]. A read reads an
// eighth more than the average.
func TestLeadHintAverages(t *testing.T) {
	h := nextLeadHint(0, 14_400)
	if h != 14_400 {
		t.Fatalf("first hint %d, want the first lead frame's 14400", h)
	}
	h = nextLeadHint(h, 30_400) // an outlier
	if h != 15_400 {
		t.Fatalf("hint %d after an outlier of 30400, want 15400", h)
	}
	if p := leadPrefix(h); p != 15_400+15_400/8 {
		t.Fatalf("prefix %d for a hint of %d", p, h)
	}
	for range 200 {
		h = nextLeadHint(h, 20_000)
	}
	if h < 19_900 || h > 20_000 {
		t.Fatalf("hint %d after 200 lead frames of 20000", h)
	}
	if h := nextLeadHint(0, 100); h != leadReadMin {
		t.Fatalf("hint %d for a tiny lead frame, want leadReadMin %d", h, leadReadMin)
	}
	if h := nextLeadHint(0, 10<<20); h != leadReadMax {
		t.Fatalf("hint %d for a huge lead frame, want leadReadMax %d", h, leadReadMax)
	}
	// A damaged frame's size (up to 2^32) moves the average as
	// leadReadMax does.
	if h, want := nextLeadHint(16_000, 1<<32-1), int64(16_000+(leadReadMax-16_000)/leadHintWeight); h != want {
		t.Fatalf("hint %d after a bogus lead size, want %d", h, want)
	}
}
