package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
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
	if fr.Frames() != 4 || len(fr.Payload()) != len(payload) {
		t.Fatalf("%d frames, %d payload bytes", fr.Frames(), len(fr.Payload()))
	}
	p := fr.Payload()
	zero := func(lo, hi int) bool { return bytes.Count(p[lo:hi], []byte{0}) == hi-lo }
	// Only the first frame is decoded by ReadFramesAt.
	if !bytes.Equal(p[:20_000], payload[:20_000]) || !zero(20_000, len(p)) {
		t.Fatal("after ReadFramesAt: want exactly the first frame decoded")
	}
	// A range inside the third frame decodes it alone.
	if end, err := fr.Fill(60_000, 60_001); err != nil || end != 90_000 {
		t.Fatalf("Fill(60000, 60001) = %d, %v; want 90000", end, err)
	}
	if !bytes.Equal(p[50_000:90_000], payload[50_000:90_000]) || !zero(20_000, 50_000) || !zero(90_000, len(p)) {
		t.Fatal("after Fill of the third frame: want frames 1 and 3 decoded, 2 and 4 not")
	}
	// A range across frames decodes each of them.
	if end, err := fr.Fill(45_000, 95_000); err != nil || end != len(payload) {
		t.Fatalf("Fill(45000, 95000) = %d, %v; want %d", end, err, len(payload))
	}
	if !bytes.Equal(p, payload) {
		t.Fatal("after filling every frame the payload differs")
	}
	if _, err := fr.Fill(10, len(p)+1); err == nil {
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
			if fr.Frames() != 1 || !bytes.Equal(fr.Payload(), im.payloads[i]) {
				t.Fatalf("%v chunk %d: %d frames, payload equal %v", opt, i, fr.Frames(), bytes.Equal(fr.Payload(), im.payloads[i]))
			}
			if end, err := fr.Fill(5, 6); err != nil || end != len(im.payloads[i]) {
				t.Fatalf("%v chunk %d: Fill = %d, %v", opt, i, end, err)
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
// was, ReadFramesAt reports the checksum before decoding anything.
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
	if _, err := fr.Fill(35_000, 59_000); err != nil || !bytes.Equal(fr.Payload()[30_000:60_000], payload[30_000:60_000]) {
		t.Fatalf("Fill of the intact second frame: %v", err)
	}
	for range 2 { // and again: a damaged frame stays damaged
		_, err = fr.Fill(61_000, 62_000)
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Offset != HeaderSize || ce.Reason != Decompress || !strings.Contains(err.Error(), want) {
			t.Fatalf("Fill of the damaged frame: %v; want decompression failed at %d naming %q", err, HeaderSize, want)
		}
	}
	if r := scanBytes(crcOK, opt, nil); len(r.bad) != 1 || r.bad[0].Reason != Decompress {
		t.Fatalf("scan: %v", r.bad)
	}

	_, _, err = ReadFramesAt(bytes.NewReader(data), int64(len(data)), opt, HeaderSize)
	if ce := asCorruption(t, err); ce.Reason != Checksum {
		t.Fatalf("ReadFramesAt with the CRC-32 of the undamaged bytes: %v; want a checksum mismatch", err)
	}
}
