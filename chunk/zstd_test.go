package chunk

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdChunk builds a data file holding one zstd chunk whose stored bytes are
// stored and whose lsize is lsize, with a correct CRC-32, so only the zstd
// checks can reject it.
func zstdChunk(stored []byte, lsize int) []byte {
	data := appendHeader(nil, Header{Options: Options{Zstd, true}})
	data = binary.BigEndian.AppendUint32(data, ChunkMagic)
	data = binary.BigEndian.AppendUint32(data, uint32(len(stored)))
	data = binary.BigEndian.AppendUint32(data, uint32(lsize))
	data = binary.BigEndian.AppendUint32(data, crc32.ChecksumIEEE(stored))
	return append(data, stored...)
}

// TestZstdFrameRules crafts zstd chunks that break one rule of the format
// each (docs/format/data-file.md, "Decoding"): every one is a Decompress
// corruption at the chunk's offset, from ReadChunkAt and from the Scanner.
func TestZstdFrameRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 19))
	payload := cborTrace(rng, 20000)
	second := cborTrace(rng, 3000)
	enc := func(p []byte, opts ...zstd.EOption) []byte {
		e, err := zstd.NewWriter(nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.EncodeAll(p, nil)
	}
	good := enc(payload, zstd.WithEncoderCRC(true), zstd.WithSingleSegment(true))
	// The same blocks behind a frame header without a content size.
	var gh zstd.Header
	if err := gh.Decode(good); err != nil {
		t.Fatal(err)
	}
	noSize, err := (&zstd.Header{WindowSize: 1 << 20, HasCheckSum: true}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	noSize = append(noSize, good[gh.HeaderSize:]...)
	skippable := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	skippable = binary.LittleEndian.AppendUint32(skippable, uint32(len(payload)))
	skippable = append(skippable, payload...)
	badSum := bytes.Clone(good)
	badSum[len(badSum)-1] ^= 0x01
	badBlock := bytes.Clone(good)
	badBlock[len(badBlock)/2] ^= 0x55

	for _, tc := range []struct {
		name   string
		stored []byte
		lsize  int
		detail string
	}{
		{"trailing byte", append(bytes.Clone(good), 0), len(payload), "after the end of the zstd frame"},
		{"second frame past lsize", append(bytes.Clone(good), enc(second, zstd.WithEncoderCRC(true))...), len(payload) + len(second) - 1, "content size"},
		{"second frame short of lsize", append(bytes.Clone(good), enc(second, zstd.WithEncoderCRC(true))...), len(payload) + len(second) + 1, "content size"},
		{"second frame without checksum", append(bytes.Clone(good), enc(second, zstd.WithEncoderCRC(false))...), len(payload) + len(second), "frame 1 at stored byte"},
		{"empty second frame", append(bytes.Clone(good), enc(nil, zstd.WithEncoderCRC(true), zstd.WithSingleSegment(true))...), len(payload), "no content"},
		{"no checksum", enc(payload, zstd.WithEncoderCRC(false), zstd.WithSingleSegment(true)), len(payload), "without a content checksum"},
		{"no content size", noSize, len(payload), "without a content size"},
		{"skippable frame", skippable[:min(len(skippable), len(payload)-1)], len(payload), "skippable"},
		{"content size differs", good, len(payload) - 1, "content size"},
		{"frame cut short", good[:len(good)-5], len(payload), "left"},
		{"checksum flipped", badSum, len(payload), "zstd:"},
		{"block damaged", badBlock, len(payload), "zstd"},
		{"not zstd", bytes.Repeat([]byte{0x42}, 100), 1000, "zstd frame header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := zstdChunk(tc.stored, tc.lsize)
			_, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), Options{Zstd, true}, HeaderSize)
			ce := asCorruption(t, err)
			if ce.Reason != Decompress || ce.Offset != HeaderSize || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("ReadChunkAt: %v; want %v at offset %d mentioning %q", err, Decompress, HeaderSize, tc.detail)
			}
			r := scanBytes(data, Options{Zstd, true}, nil)
			if len(r.offs) != 0 || len(r.bad) != 1 || r.bad[0].Offset != HeaderSize || r.bad[0].Reason != Decompress {
				t.Fatalf("scan: chunks %v, bad %v", r.offs, r.bad)
			}
		})
	}
	// The untouched frame reads back.
	data := zstdChunk(good, len(payload))
	if got, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), Options{Zstd, true}, HeaderSize); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("good frame: %v, equal %v", err, bytes.Equal(got, payload))
	}
}

// TestZstdWrittenFrame checks what the writer stores: one frame with its
// content size and checksum, and nothing else, and smaller than LZ4 on a
// trace payload.
// Payloads of every size class: the smallest that is compressed
// (zstdMinSize, at SpeedFastest), the smallest at zstdLevel (zstdFastMax),
// a sample, and larger than the encoder's window (zstdWindow); a smaller
// one is stored raw.
func TestZstdWrittenFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 19))
	for _, n := range []int{200, zstdMinSize - 1} {
		p := bytes.Repeat([]byte("compressible"), n)[:n]
		c, err := Encode(p, Options{Zstd, true}, nil)
		if err != nil || !c.StoredRaw() || c.LogicalSize() != n || !bytes.Equal(c.Bytes()[ChunkHeaderSize:], p) {
			t.Fatalf("%d bytes: Encode: %v, raw %v, want the payload stored raw", n, err, c.StoredRaw())
		}
		data := append(appendHeader(nil, Header{Options: Options{Zstd, true}}), c.Bytes()...)
		if got, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), Options{Zstd, true}, HeaderSize); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("%d bytes stored raw: read back: %v", n, err)
		}
	}
	for _, p := range [][]byte{cborTrace(rng, zstdMinSize), cborTrace(rng, zstdFastMax), samplePayloads(t)["zorka-tdb-sampled-tomcat-trc.cbor"], cborTrace(rng, 3*zstdWindow)} {
		c, err := Encode(p, Options{Zstd, true}, nil)
		if err != nil || c.StoredRaw() {
			t.Fatalf("%d bytes: Encode: %v, raw %v", len(p), err, c.StoredRaw())
		}
		stored := c.Bytes()[ChunkHeaderSize:]
		var h zstd.Header
		if err := h.Decode(stored); err != nil || !h.HasFCS || h.FrameContentSize != uint64(len(p)) || !h.HasCheckSum || h.DictionaryID != 0 {
			t.Fatalf("%d bytes: frame header %+v, %v", len(p), h, err)
		}
		if len(p) > zstdWindow && (h.SingleSegment || h.WindowSize > zstdWindow) {
			t.Fatalf("%d bytes: single segment %v, window %d; want the window bounded by %d", len(p), h.SingleSegment, h.WindowSize, zstdWindow)
		}
		if end, err := zstdFrameEnd(stored, h.HeaderSize); err != nil || end != len(stored) {
			t.Fatalf("%d bytes: frame ends at %d (%v), stored %d", len(p), end, err, len(stored))
		}
		data := append(appendHeader(nil, Header{Options: Options{Zstd, true}}), c.Bytes()...)
		if got, _, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), Options{Zstd, true}, HeaderSize); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("%d bytes: read back: %v", len(p), err)
		}
		// (On a tiny payload zstd's frame header and checksum outweigh
		// what it saves.)
		if l, _ := Encode(p, Options{LZ4, true}, nil); len(p) > 1000 && c.Len() >= l.Len() {
			t.Fatalf("%d bytes: zstd %d bytes, lz4 %d", len(p), c.Len(), l.Len())
		}
	}
}
