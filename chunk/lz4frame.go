package chunk

// This file is the LZ4 lead frame: the first frame of a zstd chunk cut
// into several frames, stored as one LZ4 block inside a zstd skippable
// frame, with the table of the chunk's later frames.
//
// Why: every read of one span of such a chunk (a get by id, a search
// result) decodes its first frame, the payload's string table and span
// index (~52 KB of a 500-span chunk of method-call records), and then the
// frame holding its span. As a zstd frame (even with its literals stored
// raw) the first frame took ~34 µs to decode on this machine; as an LZ4
// block ~15 µs, for ~2.4 KB (~20%) more stored bytes of that frame (LZ4
// fast against zstd SpeedFastest: ~0.5 B per method-call record), and LZ4
// encodes it in ~60% of the time.
// And a reader that meets the chunk for the first time learned where its
// frames lie only by reading and CRC-checking all its stored bytes (~110
// KB) and walking every frame header; the table in the lead frame tells it
// from the lead frame alone, so it reads the chunk header, the lead frame
// and the frame of its span, each checked by its own checksum.
//
// Layout (little-endian, as zstd's own fields):
//
//	 0  u32  magic 0x184D2A5C: a zstd skippable frame (RFC 8878 3.1.2)
//	 4  u32  F, the bytes of the frame after this field
//	 8  u32  CRC-32 (IEEE) of the frame's bytes after this field, [12, 8+F)
//	12  u32  C, the payload bytes the frame decodes to (at least 1)
//	16  u32  N, the number of frames after this one in the chunk
//	20  N × (u32 stored bytes, u32 payload bytes) of each later frame, in order
//	20+8N    one LZ4 block (no LZ4 frame around it) decoding to exactly C bytes
//
// An LZ4 lead frame is only ever the first frame of a chunk, and it lists
// every later frame: what it says must match what the frames after it
// are. A zstd decoder that does not know it skips it (it is a skippable
// frame), so only this package's readers decode such a chunk; a ztsd
// built before it rejects a skippable frame and reads the chunk as
// corrupt.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/pierrec/lz4/v4"
)

const (
	// lz4FrameMagic is the first 4 bytes (little-endian) of an LZ4 lead
	// frame: a zstd skippable frame magic, 0x184D2A50 + 0xC.
	lz4FrameMagic = 0x184D2A5C
	// lz4SkippableID is the skippable frame id (the magic's low 4 bits)
	// zstd.Header reports for an LZ4 lead frame.
	lz4SkippableID = 0xC
	// lz4FrameHead is the size of an LZ4 lead frame before its table.
	lz4FrameHead = 20
	// lz4FrameEntry is the size of one table entry.
	lz4FrameEntry = 8
)

// isLZ4Frame reports whether src starts with an LZ4 lead frame's magic.
func isLZ4Frame(src []byte) bool {
	return len(src) >= 4 && binary.LittleEndian.Uint32(src) == lz4FrameMagic
}

// appendLZ4LeadFrame appends p, the first piece of a chunk cut into
// later+1 frames, to buf as an LZ4 lead frame whose table (later
// entries) is left zero and whose checksum is not yet computed
// (finishLZ4LeadFrame fills both once the later frames are written). ok
// is false, and buf returned unchanged, when LZ4 does not shrink p.
func appendLZ4LeadFrame(p []byte, later int, buf []byte) ([]byte, bool) {
	at := len(buf)
	tableEnd := at + lz4FrameHead + lz4FrameEntry*later
	buf = grow(buf, tableEnd+lz4.CompressBlockBound(len(p)))
	c := lz4Compressors.Get().(*lz4.Compressor)
	m, err := c.CompressBlock(p, buf[tableEnd:])
	lz4Compressors.Put(c)
	if err != nil || m <= 0 || m >= len(p) {
		return buf[:at], false
	}
	h := buf[at:tableEnd]
	binary.LittleEndian.PutUint32(h[0:], lz4FrameMagic)
	binary.LittleEndian.PutUint32(h[4:], uint32(tableEnd+m-at-8))
	binary.LittleEndian.PutUint32(h[8:], 0)
	binary.LittleEndian.PutUint32(h[12:], uint32(len(p)))
	binary.LittleEndian.PutUint32(h[16:], uint32(later))
	clear(h[lz4FrameHead:])
	return buf[:tableEnd+m], true
}

// finishLZ4LeadFrame fills the table of the LZ4 lead frame that starts
// stored (a chunk's stored bytes) from ends, the ends of every frame of
// the chunk (EncodedChunk.ends: stored bytes low, payload bytes high), and
// writes its checksum.
func finishLZ4LeadFrame(stored []byte, ends []uint64) {
	size := int(binary.LittleEndian.Uint32(stored[4:])) + 8
	t := stored[lz4FrameHead:]
	for k := 1; k < len(ends); k++ {
		e, prev := ends[k], ends[k-1]
		binary.LittleEndian.PutUint32(t[0:], uint32(e)-uint32(prev))
		binary.LittleEndian.PutUint32(t[4:], uint32(e>>32)-uint32(prev>>32))
		t = t[lz4FrameEntry:]
	}
	binary.LittleEndian.PutUint32(stored[8:], crc32.ChecksumIEEE(stored[12:size]))
}

// lz4Frame is a parsed LZ4 lead frame.
type lz4Frame struct {
	size    int    // stored bytes of the whole frame
	content int    // payload bytes it decodes to
	later   []byte // the table: N entries of lz4FrameEntry bytes
	block   []byte // the LZ4 block
}

// entry returns table entry i: the stored and payload bytes of the i-th
// frame after the lead frame.
func (f lz4Frame) entry(i int) (stored, content int) {
	e := f.later[i*lz4FrameEntry:]
	return int(binary.LittleEndian.Uint32(e)), int(binary.LittleEndian.Uint32(e[4:]))
}

// laterFrames is the number of frames after the lead frame.
func (f lz4Frame) laterFrames() int { return len(f.later) / lz4FrameEntry }

var errLZ4FrameShort = errors.New("LZ4 lead frame: fewer bytes than its size")

// lz4FrameSize returns the stored bytes of the LZ4 lead frame that starts
// src (at least 8 bytes), as its header says: not checked against
// anything.
func lz4FrameSize(src []byte) int64 {
	return int64(binary.LittleEndian.Uint32(src[4:])) + 8
}

// parseLZ4Frame parses and checks the LZ4 lead frame that starts src:
// its size within src (else errLZ4FrameShort, wrapped), its checksum, a
// content size of at least 1 and at most maxContent, a table that fits
// it. The block is not decoded.
func parseLZ4Frame(src []byte, maxContent int) (lz4Frame, error) {
	if len(src) < 8 {
		return lz4Frame{}, fmt.Errorf("%w: %d bytes", errLZ4FrameShort, len(src))
	}
	size := lz4FrameSize(src)
	if size < lz4FrameHead+1 {
		return lz4Frame{}, fmt.Errorf("LZ4 lead frame of %d bytes, under the %d of its header and a block byte", size, lz4FrameHead+1)
	}
	if size > int64(len(src)) {
		return lz4Frame{}, fmt.Errorf("%w: %d bytes, %d there", errLZ4FrameShort, size, len(src))
	}
	b := src[:size]
	if sum, want := crc32.ChecksumIEEE(b[12:]), binary.LittleEndian.Uint32(b[8:]); sum != want {
		return lz4Frame{}, fmt.Errorf("LZ4 lead frame: CRC-32 of its %d bytes is %08x, it says %08x", size-12, sum, want)
	}
	content := binary.LittleEndian.Uint32(b[12:])
	if content == 0 || int64(content) > int64(maxContent) {
		return lz4Frame{}, fmt.Errorf("LZ4 lead frame: content size %d, want 1 to %d", content, maxContent)
	}
	n := int64(binary.LittleEndian.Uint32(b[16:]))
	tableEnd := lz4FrameHead + n*lz4FrameEntry
	if tableEnd >= size {
		return lz4Frame{}, fmt.Errorf("LZ4 lead frame: a table of %d frames does not fit its %d bytes with a block", n, size)
	}
	return lz4Frame{size: int(size), content: int(content), later: b[lz4FrameHead:tableEnd], block: b[tableEnd:]}, nil
}

// decodeLZ4Frame parses the LZ4 lead frame that is src and decodes it
// into dst, which must be exactly its content size.
func decodeLZ4Frame(src, dst []byte) error {
	f, err := parseLZ4Frame(src, len(dst))
	if err == nil && f.size != len(src) {
		err = fmt.Errorf("LZ4 lead frame of %d bytes in %d stored bytes", f.size, len(src))
	}
	if err == nil && f.content != len(dst) {
		err = fmt.Errorf("LZ4 lead frame decodes to %d bytes, %d expected", f.content, len(dst))
	}
	if err == nil {
		err = f.decode(dst)
	}
	return err
}

// decode decodes the block of the parsed frame f into dst, which must be
// exactly its content size.
func (f lz4Frame) decode(dst []byte) error {
	m, err := lz4.UncompressBlock(f.block, dst)
	if err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	if m != len(dst) {
		return fmt.Errorf("LZ4 block decodes to %d bytes, its frame says %d", m, len(dst))
	}
	return nil
}

// framesOfLZ4Lead returns the frames of a chunk of stored bytes and lsize
// payload bytes whose first frame is the LZ4 lead frame f, as its table
// lists them: each later frame at least 1 byte, adding up with the lead
// frame to the chunk's stored and payload sizes.
func framesOfLZ4Lead(f lz4Frame, stored, lsize int) ([]zstdFrameLoc, error) {
	frames := make([]zstdFrameLoc, 1, 1+f.laterFrames())
	frames[0] = zstdFrameLoc{storedEnd: f.size, end: f.content}
	for i := range f.laterFrames() {
		s, c := f.entry(i)
		prev := frames[len(frames)-1]
		if s <= 0 || c <= 0 || s > stored-prev.storedEnd || c > lsize-prev.end {
			return nil, fmt.Errorf("LZ4 lead frame: table entry %d (%d stored bytes, %d payload bytes) runs past the chunk's %d stored and %d payload bytes, or is empty",
				i, s, c, stored, lsize)
		}
		frames = append(frames, zstdFrameLoc{storedAt: prev.storedEnd, storedEnd: prev.storedEnd + s, at: prev.end, end: prev.end + c})
	}
	if last := frames[len(frames)-1]; last.storedEnd != stored || last.end != lsize {
		return nil, fmt.Errorf("LZ4 lead frame: its table's frames end at stored byte %d and payload byte %d, the chunk has %d and %d",
			last.storedEnd, last.end, stored, lsize)
	}
	return frames, nil
}
