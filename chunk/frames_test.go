package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// framedImage is a zstd data file holding one chunk of payload compressed
// as frames cut at cuts, and the offsets in its stored bytes where each
// frame starts.
func framedImage(t testing.TB, payload []byte, cuts []int) (data []byte, frameAt []int) {
	t.Helper()
	opt := Options{Zstd, true}
	c, err := EncodeFrames(payload, cuts, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	data = append(appendHeader(nil, Header{Options: opt}), c.Bytes()...)
	frames, err := zstdFrames(c.Bytes()[ChunkHeaderSize:], len(payload))
	if err != nil {
		t.Fatalf("frames of an encoded chunk: %v", err)
	}
	for _, f := range frames {
		frameAt = append(frameAt, f.storedAt)
	}
	return data, frameAt
}

// encodeZstdLead encodes payload cut at cuts (each inside it, ascending)
// as EncodeFrames did before LZ4 lead frames: every frame a zstd frame
// (the first as zstdLeadFrame writes it), with the frame ends Layout
// needs; a zstd file with checksums.
func encodeZstdLead(t testing.TB, payload []byte, cuts []int) EncodedChunk {
	t.Helper()
	n := len(payload)
	buf := make([]byte, ChunkHeaderSize)
	var ends []uint64
	from := 0
	for _, c := range append(cuts, n) {
		if from == 0 {
			buf = zstdLeadFrame(payload[:c], n, buf)
		} else {
			buf = zstdPieceFrame(payload[from:c], n, buf)
		}
		ends = append(ends, uint64(c)<<32|uint64(len(buf)-ChunkHeaderSize))
		from = c
	}
	if len(buf)-ChunkHeaderSize >= n {
		t.Fatalf("payload of %d bytes does not shrink", n)
	}
	chunkHeader{magic: ChunkMagic, stored: uint32(len(buf) - ChunkHeaderSize), lsize: uint32(n),
		cksum: crc32.ChecksumIEEE(buf[ChunkHeaderSize:])}.put(buf)
	return EncodedChunk{buf: buf, opt: Options{Zstd, true}, ends: ends}
}

// TestEncodeFrames: a payload cut into frames is one zstd frame per piece,
// reads back whole through ReadChunkAt and the Scanner, and ReadFramesAt
// decodes only the frames a Fill asks for.
func TestEncodeFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	payload := cborTrace(rng, 150_000)
	cuts := []int{20_000, 50_000, 50_000, 90_000, 0, 200_000} // a repeat, 0 and one past the end are left out
	data, frameAt := framedImage(t, payload, cuts)
	if len(frameAt) != 4 {
		t.Fatalf("%d frames, want 4 (cut at 20000, 50000, 90000)", len(frameAt))
	}
	opt := Options{Zstd, true}
	got, next, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
	if err != nil || !bytes.Equal(got, payload) || next != int64(len(data)) {
		t.Fatalf("ReadChunkAt: %v, equal %v, next %d", err, bytes.Equal(got, payload), next)
	}
	r := scanBytes(data, opt, nil)
	if len(r.bad) != 0 || len(r.payloads) != 1 || !bytes.Equal(r.payloads[0], payload) {
		t.Fatalf("scan: %d bad regions, %d chunks", len(r.bad), len(r.payloads))
	}

	fr, next, err := ReadFramesAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
	if err != nil || next != int64(len(data)) {
		t.Fatalf("ReadFramesAt: %v, next %d", err, next)
	}
	if fr.Frames() != 4 || fr.Size() != len(payload) {
		t.Fatalf("%d frames, %d payload bytes", fr.Frames(), fr.Size())
	}
	decoded := func() (d []bool) {
		for k := range 4 {
			d = append(d, fr.Decoded(k))
		}
		return d
	}
	// Only the first frame is decoded by ReadFramesAt.
	if d := decoded(); !d[0] || d[1] || d[2] || d[3] {
		t.Fatalf("after ReadFramesAt: frames decoded %v, want only the first", d)
	}
	// A range inside a frame is that frame's own buffer.
	fill := func(lo, hi, wantBase, wantEnd int) {
		t.Helper()
		b, base, err := fr.Fill(lo, hi)
		if err != nil || base != wantBase || base+len(b) != wantEnd || !bytes.Equal(b, payload[base:base+len(b)]) {
			t.Fatalf("Fill(%d, %d) = bytes %d to %d, %v; want the payload's bytes %d to %d", lo, hi, base, base+len(b), err, wantBase, wantEnd)
		}
	}
	fill(0, 20_000, 0, 20_000)
	fill(60_000, 60_001, 50_000, 90_000)
	fill(90_000, 90_000, 90_000, len(payload)) // an empty range is the byte at lo
	if d := decoded(); !d[0] || d[1] || !d[2] || !d[3] {
		t.Fatalf("after Fill of the third and fourth frames: frames decoded %v", d)
	}
	// A range across frames is the whole payload, every frame decoded,
	// and so is every range after it.
	fill(45_000, 95_000, 0, len(payload))
	fill(60_000, 60_001, 0, len(payload))
	if d := decoded(); !d[0] || !d[1] || !d[2] || !d[3] {
		t.Fatalf("after Fill across frames: frames decoded %v", d)
	}
	if _, _, err := fr.Fill(10, len(payload)+1); err == nil {
		t.Fatal("Fill past the payload: no error")
	}
}

// TestReadFramesWhole: a zstd chunk of one frame (every chunk written
// before frames existed), a raw chunk and chunks of the other codecs read
// through ReadFramesAt whole, and EncodeFrames ignores cuts for them.
func TestReadFramesWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	payloads := [][]byte{cborTrace(rng, 80_000), randomBytes(rng, 3000)}
	for _, opt := range allOptions {
		im := buildImage(t, opt, payloads)
		for i, off := range im.offs {
			fr, next, err := ReadFramesAt(bytes.NewReader(im.data), int64(len(im.data)), opt, off)
			if err != nil || next != im.end(i) {
				t.Fatalf("%v chunk %d: %v, next %d", opt, i, err, next)
			}
			if fr.Frames() != 1 || fr.Size() != len(im.payloads[i]) || !fr.Decoded(0) {
				t.Fatalf("%v chunk %d: %d frames, %d bytes", opt, i, fr.Frames(), fr.Size())
			}
			if b, base, err := fr.Fill(5, 6); err != nil || base != 0 || !bytes.Equal(b, im.payloads[i]) {
				t.Fatalf("%v chunk %d: Fill = bytes %d to %d, %v", opt, i, base, base+len(b), err)
			}
		}
		if opt.Compression == Zstd {
			continue
		}
		plain, _ := Encode(payloads[0], opt, nil)
		cut, _ := EncodeFrames(payloads[0], []int{1000, 40_000}, opt, nil)
		if !bytes.Equal(plain.Bytes(), cut.Bytes()) {
			t.Fatalf("%v: EncodeFrames with cuts differs from Encode", opt)
		}
	}
}

// TestFramesDamagedFrame: a frame whose bytes are damaged (the CRC-32
// recomputed over them, so only zstd can tell) is a Decompress corruption
// at the chunk's offset naming the frame and where it is in the stored
// bytes, from ReadChunkAt and from the Fill that needs it; the frames
// before it still read through ReadFramesAt. With the CRC-32 left as it
// was, ReadChunkAt and the Scanner report the checksum; ReadFramesAt,
// which reads the LZ4 lead frame and none of the others, does not read
// the damage until a Fill decodes it; of a chunk whose first frame is a
// zstd frame (written before LZ4 lead frames), ReadFramesAt reads the
// whole chunk and reports the checksum before decoding anything.
func TestFramesDamagedFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	payload := cborTrace(rng, 120_000)
	data, frameAt := framedImage(t, payload, []int{30_000, 60_000, 90_000})
	opt := Options{Zstd, true}
	stored := data[HeaderSize+ChunkHeaderSize:]
	mid := (frameAt[2] + frameAt[3]) / 2
	stored[mid] ^= 0x5a
	crcOK := bytes.Clone(data)
	binary.BigEndian.PutUint32(crcOK[HeaderSize+12:], crc32.ChecksumIEEE(crcOK[HeaderSize+ChunkHeaderSize:]))

	want := "frame 2 at stored byte " + strconv.Itoa(frameAt[2])
	_, _, err := ReadChunkAt(bytes.NewReader(crcOK), int64(len(crcOK)), opt, HeaderSize)
	if ce := asCorruption(t, err); ce.Offset != HeaderSize || ce.Reason != Decompress || !strings.Contains(err.Error(), want) {
		t.Fatalf("ReadChunkAt: %v; want decompression failed at %d naming %q", err, HeaderSize, want)
	}
	fr, _, err := ReadFramesAt(bytes.NewReader(crcOK), int64(len(crcOK)), opt, HeaderSize)
	if err != nil {
		t.Fatalf("ReadFramesAt with a damaged third frame: %v", err)
	}
	if b, base, err := fr.Fill(35_000, 59_000); err != nil || base != 30_000 || !bytes.Equal(b, payload[30_000:60_000]) {
		t.Fatalf("Fill of the intact second frame: %v", err)
	}
	for range 2 { // and again: a damaged frame stays damaged
		_, _, err = fr.Fill(61_000, 62_000)
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Offset != HeaderSize || ce.Reason != Decompress || !strings.Contains(err.Error(), want) {
			t.Fatalf("Fill of the damaged frame: %v; want decompression failed at %d naming %q", err, HeaderSize, want)
		}
	}
	if r := scanBytes(crcOK, opt, nil); len(r.bad) != 1 || r.bad[0].Reason != Decompress {
		t.Fatalf("scan: %v", r.bad)
	}

	_, _, err = ReadChunkAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
	if ce := asCorruption(t, err); ce.Reason != Checksum {
		t.Fatalf("ReadChunkAt with the CRC-32 of the undamaged bytes: %v; want a checksum mismatch", err)
	}
	if r := scanBytes(data, opt, nil); len(r.bad) != 1 || r.bad[0].Reason != Checksum {
		t.Fatalf("scan with the CRC-32 of the undamaged bytes: %v", r.bad)
	}
	fr, _, err = ReadFramesAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
	if err != nil {
		t.Fatalf("ReadFramesAt with the CRC-32 of the undamaged bytes: %v", err)
	}
	if _, _, err = fr.Fill(61_000, 62_000); !strings.Contains(err.Error(), want) {
		t.Fatalf("its Fill of the damaged frame: %v; want %q", err, want)
	}

	old := encodeZstdLead(t, payload, []int{30_000, 60_000, 90_000})
	oldData := append(appendHeader(nil, Header{Options: opt}), old.Bytes()...)
	oldData[len(oldData)-100] ^= 0x5a
	_, _, err = ReadFramesAt(bytes.NewReader(oldData), int64(len(oldData)), opt, HeaderSize)
	if ce := asCorruption(t, err); ce.Reason != Checksum {
		t.Fatalf("ReadFramesAt of a chunk with a zstd first frame, damaged: %v; want a checksum mismatch", err)
	}
}

// TestFramesReread: a Frames keeps no stored bytes; the frames Fill
// decodes after ReadFramesAt are read from the file again, so bytes that
// changed since (the CRC-32 was checked at ReadFramesAt) are a Decompress
// corruption naming the frame, while the other frames still read; a read
// that fails is returned as is.
func TestFramesReread(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	payload := cborTrace(rng, 120_000)
	data, frameAt := framedImage(t, payload, []int{30_000, 60_000, 90_000})
	opt := Options{Zstd, true}
	r := &flakyReader{data: data}
	fr, _, err := ReadFramesAt(r, int64(len(data)), opt, HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	stored := data[HeaderSize+ChunkHeaderSize:]
	stored[(frameAt[2]+frameAt[3])/2] ^= 0x5a
	want := "frame 2 at stored byte " + strconv.Itoa(frameAt[2])
	_, _, err = fr.Fill(61_000, 62_000)
	if ce := asCorruption(t, err); ce.Offset != HeaderSize || ce.Reason != Decompress || !strings.Contains(err.Error(), want) {
		t.Fatalf("Fill of the frame changed since: %v; want decompression failed naming %q", err, want)
	}
	if b, base, err := fr.Fill(35_000, 59_000); err != nil || base != 30_000 || !bytes.Equal(b, payload[30_000:60_000]) {
		t.Fatalf("Fill of an intact frame: bytes %d to %d, %v", base, base+len(b), err)
	}
	r.fail = errors.New("injected read error")
	if _, _, err := fr.Fill(95_000, 96_000); !errors.Is(err, r.fail) {
		t.Fatalf("Fill with the read failing: %v, want the read's error", err)
	}
	r.fail = nil
	if b, base, err := fr.Fill(95_000, 96_000); err != nil || !bytes.Equal(b, payload[base:base+len(b)]) {
		t.Fatalf("Fill once the read works again: %v", err)
	}
}

// flakyReader is a ReaderAt over data that fails with fail when set.
type flakyReader struct {
	data []byte
	fail error
}

func (r *flakyReader) ReadAt(b []byte, off int64) (int, error) {
	if r.fail != nil {
		return 0, r.fail
	}
	return bytes.NewReader(r.data).ReadAt(b, off)
}

// TestFramesFileClosed: a Fill that needs a frame of a closed File's chunk
// fails with ErrClosed; the frames already decoded still read.
func TestFramesFileClosed(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	payload := cborTrace(rng, 120_000)
	opt := Options{Zstd, true}
	f, err := Create(t.TempDir()+"/traces.zts", opt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := EncodeFrames(payload, []int{30_000, 60_000, 90_000}, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	off, err := f.AppendEncoded(c)
	if err != nil {
		t.Fatal(err)
	}
	fr, _, err := f.ReadFrames(off)
	if err != nil {
		t.Fatal(err)
	}
	if b, base, err := fr.Fill(40_000, 41_000); err != nil || !bytes.Equal(b, payload[base:base+len(b)]) {
		t.Fatalf("Fill: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fr.Fill(70_000, 71_000); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fill of a frame not decoded after Close: %v, want ErrClosed", err)
	}
	if b, base, err := fr.Fill(40_000, 41_000); err != nil || !bytes.Equal(b, payload[base:base+len(b)]) {
		t.Fatalf("Fill of a decoded frame after Close: %v", err)
	}
}

// countingFS counts the bytes its files read.
type countingFS struct {
	OSFS
	read *atomic.Int64
}

func (c countingFS) OpenFile(name string, flag int, perm fs.FileMode) (OSFile, error) {
	f, err := c.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.read}, nil
}

type countingFile struct {
	OSFile
	read *atomic.Int64
}

func (c countingFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.OSFile.ReadAt(b, off)
	c.read.Add(int64(n))
	return n, err
}

// TestReadFramesKnown: a chunk whose first frame is a zstd frame (as
// written before LZ4 lead frames) read again with the Layout of an
// earlier ReadFrames reads its header and first frame only, and fills every range
// as before; a frame damaged on disk since is a Decompress corruption when
// it is filled (its XXH64), and the others still read; a damaged first
// frame or header is not trusted: the chunk is read whole and its CRC-32
// mismatch reported, as ReadFrames reports it. A chunk decoded whole has
// no Layout.
func TestReadFramesKnown(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 19))
	payload := cborTrace(rng, 120_000)
	opt := Options{Zstd, true}
	path := t.TempDir() + "/traces.zts"
	var read atomic.Int64
	f, err := CreateFS(countingFS{read: &read}, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := encodeZstdLead(t, payload, []int{30_000, 60_000, 90_000})
	off, err := f.AppendEncoded(c)
	if err != nil {
		t.Fatal(err)
	}
	one, err := EncodeFrames(payload[:5000], nil, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	oneOff, err := f.AppendEncoded(one)
	if err != nil {
		t.Fatal(err)
	}
	if fr, _, err := f.ReadFrames(oneOff); err != nil || fr.Layout() != nil {
		t.Fatalf("a chunk of one frame: %v, layout %v; want none", err, fr.Layout())
	}
	first, _, err := f.ReadFrames(off)
	if err != nil {
		t.Fatal(err)
	}
	l := first.Layout()
	if l == nil || len(l.ends) != 4 {
		t.Fatalf("layout %+v, want 4 frames", l)
	}
	frames, err := zstdFrames(c.Bytes()[ChunkHeaderSize:], len(payload))
	if err != nil {
		t.Fatal(err)
	}
	read.Store(0)
	fr, next, err := f.ReadFramesKnown(off, l)
	if err != nil || next != off+c.Len() {
		t.Fatalf("ReadFramesKnown: %v, next %d, want %d", err, next, off+c.Len())
	}
	if got, want := read.Load(), int64(ChunkHeaderSize+frames[0].storedEnd); got != want {
		t.Fatalf("ReadFramesKnown read %d bytes, want %d (header and first frame)", got, want)
	}
	if fr.Layout() != nil || fr.Frames() != 4 || !fr.Decoded(0) || fr.Decoded(1) {
		t.Fatalf("ReadFramesKnown: layout %v, %d frames, decoded %v %v", fr.Layout(), fr.Frames(), fr.Decoded(0), fr.Decoded(1))
	}
	for _, r := range [][2]int{{0, 10}, {31_000, 32_000}, {59_000, 61_000}, {119_000, 120_000}} {
		b, base, err := fr.Fill(r[0], r[1])
		if err != nil || !bytes.Equal(b, payload[base:base+len(b)]) || base > r[0] || base+len(b) < r[1] {
			t.Fatalf("Fill(%d, %d): bytes %d to %d, %v", r[0], r[1], base, base+len(b), err)
		}
	}

	damage := func(at int64, b []byte) {
		t.Helper()
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
	}
	// Frame 2 damaged: read anyway, its Fill fails, the others read.
	damage(off+ChunkHeaderSize+int64(frames[2].storedAt+frames[2].storedEnd)/2, []byte{0x5a, 0xa5, 0x5a, 0xa5})
	fr, _, err = f.ReadFramesKnown(off, l)
	if err != nil {
		t.Fatalf("ReadFramesKnown with frame 2 damaged: %v", err)
	}
	var ce *CorruptionError
	if _, _, err := fr.Fill(61_000, 62_000); !errors.As(err, &ce) || ce.Reason != Decompress || ce.Offset != off {
		t.Fatalf("Fill of damaged frame 2: %v; want a Decompress corruption at %d", err, off)
	}
	if b, base, err := fr.Fill(95_000, 96_000); err != nil || !bytes.Equal(b, payload[base:base+len(b)]) {
		t.Fatalf("Fill of frame 3: %v", err)
	}
	// Frame 0 damaged: read whole, the CRC-32 mismatch reported.
	damage(off+ChunkHeaderSize+int64(frames[0].storedEnd)/2, []byte{0x5a, 0xa5, 0x5a, 0xa5})
	if _, _, err := f.ReadFramesKnown(off, l); !errors.As(err, &ce) || ce.Reason != Checksum || ce.Offset != off {
		t.Fatalf("ReadFramesKnown with frame 0 damaged: %v; want a checksum mismatch at %d", err, off)
	}
	// A header that is not the one the layout holds: read whole.
	hb := c.Bytes()[:ChunkHeaderSize]
	bad := append([]byte(nil), hb...)
	bad[13] ^= 0x40 // its CRC-32
	damage(off, bad)
	if _, _, err := f.ReadFramesKnown(off, l); !errors.As(err, &ce) || ce.Reason != Checksum || ce.Offset != off {
		t.Fatalf("ReadFramesKnown with another header: %v; want a checksum mismatch at %d", err, off)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.ReadFramesKnown(off, l); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadFramesKnown after Close: %v, want ErrClosed", err)
	}
}

// literalsType returns the Literals_Block_Type (RFC 8878 3.1.1.3.1: 0 raw,
// 1 RLE, 2 Huffman-compressed, 3 treeless) of the first block of the zstd
// frame that starts src, or -1 when that block is not a compressed block.
func literalsType(t *testing.T, src []byte) int {
	t.Helper()
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		t.Fatal(err)
	}
	if !h.FirstBlock.OK || !h.FirstBlock.Compressed {
		return -1
	}
	return int(src[h.HeaderSize+3] & 3)
}

// TestEncodeFramesLeadFrame: in a chunk cut into frames, the first (which
// every read decodes) is an LZ4 lead frame listing the others, and the
// span frames are zstd frames without entropy coding (their literals
// stored raw); a chunk of one frame is a zstd frame with Huffman literals;
// every frame decodes. Chunks written before (every frame entropy-coded;
// every frame a zstd frame with raw literals) read the same through
// ReadFramesAt, its Fills, ReadFramesKnownAt and ReadChunkAt.
func TestEncodeFramesLeadFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	payload := cborTrace(rng, 120_000)
	cuts := []int{50_000, 70_000, 90_000}
	data, frameAt := framedImage(t, payload, cuts)
	stored := data[HeaderSize+ChunkHeaderSize:]
	if len(frameAt) != 4 {
		t.Fatalf("%d frames, want 4", len(frameAt))
	}
	lead, err := parseLZ4Frame(stored, len(payload))
	if err != nil || lead.size != frameAt[1] || lead.content != cuts[0] || lead.laterFrames() != 3 {
		t.Fatalf("lead frame: %+v, %v; want an LZ4 lead frame of %d stored bytes, %d payload bytes, 3 later frames", lead, err, frameAt[1], cuts[0])
	}
	for i := range 3 {
		st, c := lead.entry(i)
		end := len(stored)
		if i+2 < len(frameAt) {
			end = frameAt[i+2]
		}
		cend := len(payload)
		if i+1 < len(cuts) {
			cend = cuts[i+1]
		}
		if st != end-frameAt[i+1] || c != cend-cuts[i] {
			t.Fatalf("lead frame's table entry %d: %d stored, %d payload bytes; want %d and %d", i, st, c, end-frameAt[i+1], cend-cuts[i])
		}
	}
	for k := 1; k < len(frameAt); k++ {
		if lt := literalsType(t, stored[frameAt[k]:]); lt != 0 {
			t.Fatalf("frame %d: literals block type %d, want 0 (raw)", k, lt)
		}
	}
	whole, err := Encode(payload, Options{Zstd, true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lt := literalsType(t, whole.Bytes()[ChunkHeaderSize:]); lt != 2 {
		t.Fatalf("chunk of one frame: literals block type %d, want 2 (Huffman)", lt)
	}

	// The same payload as written before: every frame by zstdFrame.
	var old []byte
	from := 0
	for _, c := range append(cuts, len(payload)) {
		old = zstdFrame(payload[from:c], len(payload), old)
		from = c
	}
	if lt := literalsType(t, old); lt != 2 {
		t.Fatalf("old lead frame: literals block type %d, want 2", lt)
	}
	// And as written before LZ4 lead frames: every frame a zstd frame
	// with raw literals.
	rawLead := encodeZstdLead(t, payload, cuts)
	if lt := literalsType(t, rawLead.Bytes()[ChunkHeaderSize:]); lt != 0 {
		t.Fatalf("raw-literals lead frame: literals block type %d, want 0", lt)
	}
	files := map[string][]byte{"new": data, "old": zstdChunk(old, len(payload)),
		"raw lead": append(appendHeader(nil, Header{Options: Options{Zstd, true}}), rawLead.Bytes()...)}
	for name, file := range files {
		r := bytes.NewReader(file)
		fr, _, err := ReadFramesAt(r, int64(len(file)), Options{Zstd, true}, HeaderSize)
		if err != nil || fr.Frames() != 4 {
			t.Fatalf("%s: ReadFramesAt: %v, %d frames", name, err, fr.Frames())
		}
		if (fr.Layout() == nil) != (name == "new") {
			t.Fatalf("%s: layout %+v; want one only of a chunk with a zstd first frame", name, fr.Layout())
		}
		for _, rg := range [][2]int{{0, 50_000}, {60_000, 60_001}, {100_000, 120_000}} {
			b, base, err := fr.Fill(rg[0], rg[1])
			if err != nil || !bytes.Equal(b, payload[base:base+len(b)]) {
				t.Fatalf("%s: Fill(%d, %d): %v", name, rg[0], rg[1], err)
			}
		}
		if l := fr.Layout(); l != nil {
			known, _, err := ReadFramesKnownAt(r, int64(len(file)), Options{Zstd, true}, HeaderSize, l)
			if err != nil || known.Layout() != nil {
				t.Fatalf("%s: ReadFramesKnownAt: %v (read whole: %v)", name, err, known.Layout() != nil)
			}
			if b, base, err := known.Fill(70_000, 90_000); err != nil || base != 70_000 || !bytes.Equal(b, payload[70_000:90_000]) {
				t.Fatalf("%s: known Fill: bytes from %d, %v", name, base, err)
			}
		}
		got, _, err := ReadChunkAt(r, int64(len(file)), Options{Zstd, true}, HeaderSize)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("%s: ReadChunkAt: %v", name, err)
		}
	}
}

// TestPayloadClasses: every size up to 1 MiB gets the smallest class whose
// buffers hold it, wasting at most a fifth of the buffer; larger sizes get
// no class.
func TestPayloadClasses(t *testing.T) {
	prev := 0
	for c := range payloadClasses {
		size := payloadClassSize(c)
		if size <= prev {
			t.Fatalf("class %d: %d bytes, not more than class %d's %d", c, size, c-1, prev)
		}
		for _, n := range []int{prev + 1, (prev + size) / 2, size} {
			if got := payloadClass(n); got != c {
				t.Fatalf("payloadClass(%d) = %d, want %d (classes %d and %d bytes)", n, got, c, prev, size)
			}
			if c > 0 && n == prev+1 && float64(size-n) > 0.2*float64(size) {
				t.Fatalf("class %d of %d bytes for %d bytes wastes more than a fifth", c, size, n)
			}
		}
		prev = size
	}
	if prev != 1<<20 {
		t.Fatalf("largest class %d bytes, want 1 MiB", prev)
	}
	if c := payloadClass(1<<20 + 1); c != -1 {
		t.Fatalf("payloadClass(1 MiB + 1) = %d, want -1", c)
	}
}

// TestFramesRelease: Release gives every buffer a Frames decoded into
// (each frame's, and the whole payload built from them) back to the pool,
// and a Fill after it fails with ErrReleased instead of returning bytes
// that another chunk's read may be decoding into. A Frames over a chunk
// of one frame releases its payload too.
func TestFramesRelease(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	payload := cborTrace(rng, 120_000)
	data, _ := framedImage(t, payload, []int{30_000, 60_000, 90_000})
	opt := Options{Zstd, true}
	fr, _, err := ReadFramesAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	b, base, err := fr.Fill(65_000, 66_000)
	if err != nil || base != 60_000 || !bytes.Equal(b, payload[60_000:90_000]) {
		t.Fatalf("Fill: bytes from %d, %v", base, err)
	}
	if _, _, err := fr.Fill(25_000, 35_000); err != nil { // across frames: builds the whole payload
		t.Fatal(err)
	}
	if len(fr.held) != 3 { // frames 0 and 2, then the whole payload
		t.Fatalf("%d buffers held, want 3", len(fr.held))
	}
	held := append([]*[]byte(nil), fr.held...)
	fr.Release()
	for i, bp := range held {
		if c := payloadClass(cap(*bp)); c < 0 || payloadClassSize(c) != cap(*bp) || len(*bp) != cap(*bp) {
			t.Fatalf("buffer %d: len %d cap %d, not a whole buffer of a class", i, len(*bp), cap(*bp))
		}
	}
	if _, _, err := fr.Fill(65_000, 66_000); !errors.Is(err, ErrReleased) {
		t.Fatalf("Fill after Release: %v, want ErrReleased", err)
	}
	fr.Release() // again: nothing

	one, _ := framedImage(t, payload[:5000], nil)
	fr, _, err = ReadFramesAt(bytes.NewReader(one), int64(len(one)), opt, HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	if b, _, err := fr.Fill(0, 5000); err != nil || !bytes.Equal(b, payload[:5000]) || len(fr.held) != 1 {
		t.Fatalf("one frame: %v, %d buffers held", err, len(fr.held))
	}
	fr.Release()
	if _, _, err := fr.Fill(0, 1); !errors.Is(err, ErrReleased) {
		t.Fatalf("Fill after Release: %v, want ErrReleased", err)
	}
}

// TestEncodedChunkLayout: the layout an encoder gives for a chunk of
// several zstd frames whose first is a zstd frame (EncodedChunk.Layout;
// chunks written before LZ4 lead frames) is the one ReadFrames learns
// from the chunk's bytes once written, and ReadFramesKnown with it reads
// the header and first frame only and fills every range as a read of the
// whole chunk does. A chunk of one frame, stored raw, of another codec,
// or whose lead frame is an LZ4 lead frame (it lists the frames itself)
// has none.
func TestEncodedChunkLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	payload := cborTrace(rng, 120_000)
	opt := Options{Zstd, true}
	path := t.TempDir() + "/traces.zts"
	var read atomic.Int64
	f, err := CreateFS(countingFS{read: &read}, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Cuts out of order or out of range are left out, as EncodeFrames says.
	lc, err := EncodeFrames(payload, []int{0, 40_000, 30_000, 70_000, 200_000}, opt, nil)
	if err != nil || !isLZ4Frame(lc.Bytes()[ChunkHeaderSize:]) || lc.Layout() != nil {
		t.Fatalf("a chunk cut into frames: %v, LZ4 lead frame %v, layout %+v; want an LZ4 lead frame and no layout",
			err, isLZ4Frame(lc.Bytes()[ChunkHeaderSize:]), lc.Layout())
	}
	if frames, err := zstdFrames(lc.Bytes()[ChunkHeaderSize:], len(payload)); err != nil || len(frames) != 3 {
		t.Fatalf("its frames: %d, %v; want 3", len(frames), err)
	}
	c := encodeZstdLead(t, payload, []int{40_000, 70_000})
	l := c.Layout()
	if l == nil || len(l.ends) != 3 {
		t.Fatalf("layout of a chunk of 3 frames: %+v", l)
	}
	off, err := f.AppendEncoded(c)
	if err != nil {
		t.Fatal(err)
	}
	fr, _, err := f.ReadFrames(off)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fr.Layout(), l) {
		t.Fatalf("encoder's layout %+v, ReadFrames's %+v", l, fr.Layout())
	}
	read.Store(0)
	known, _, err := f.ReadFramesKnown(off, l)
	if err != nil || known.Layout() != nil {
		t.Fatalf("ReadFramesKnown: %v (read whole: %v)", err, known.Layout() != nil)
	}
	if got, want := read.Load(), int64(ChunkHeaderSize+int(uint32(l.ends[0]))); got != want {
		t.Fatalf("ReadFramesKnown read %d bytes, want %d (header and first frame)", got, want)
	}
	for _, rg := range [][2]int{{0, 40_000}, {45_000, 45_001}, {70_000, 120_000}, {10, 100_000}} {
		b, base, err := known.Fill(rg[0], rg[1])
		if err != nil || !bytes.Equal(b, payload[base:base+len(b)]) || base > rg[0] || base+len(b) < rg[1] {
			t.Fatalf("Fill(%d, %d): bytes %d to %d, %v", rg[0], rg[1], base, base+len(b), err)
		}
	}
	for name, opt := range map[string]Options{"lz4": {LZ4, true}, "zlib": {Zlib, true}, "none": {None, true}} {
		if c, err := EncodeFrames(payload, []int{40_000, 70_000}, opt, nil); err != nil || c.Layout() != nil {
			t.Fatalf("%s: %v, layout %+v; want none", name, err, c.Layout())
		}
	}
	if c, err := EncodeFrames(payload, nil, opt, nil); err != nil || c.Layout() != nil {
		t.Fatalf("one frame: %v, layout %+v; want none", err, c.Layout())
	}
	noise := make([]byte, 100_000)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	if c, err := EncodeFrames(noise, []int{40_000, 70_000}, opt, nil); err != nil || !c.StoredRaw() || c.Layout() != nil {
		t.Fatalf("stored raw: %v, raw %v, layout %+v; want none", err, c.StoredRaw(), c.Layout())
	}
}
