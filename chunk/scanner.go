package chunk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// scanWindow is how much the Scanner reads ahead with one ReadAt.
const scanWindow = 1 << 20

// Scanner reads the chunks of a data file in file order. It never stops at a
// bad chunk: it records a BadRegion and resynchronises on the next ZCH0 magic
// whose chunk validates completely (header bounds, checksum, decompression,
// Validate), so every intact chunk after damage is still returned. The good
// chunks and the bad regions together tile the scanned range exactly.
//
//	s := chunk.NewScanner(r, size, hdr.Options)
//	for s.Next() {
//		off, payload := s.Chunk()
//		...
//	}
//	if err := s.Err(); err != nil { ... } // I/O error
//	for _, bad := range s.BadRegions() { ... }
//
// Where a chunk is expected and every byte from there to the end is zero,
// the data ends (the zero tail a File preallocates ahead of its appends,
// see ZeroTail): that is no bad region, and Next returns false. Zeros
// followed by any non-zero byte are damage like any other bad bytes.
//
// A torn tail (the file ends inside a chunk whose header is otherwise valid,
// or inside a chunk header) is the last bad region, with Reason Truncated and
// the offset of that chunk: where the caller cuts. Any last bad region that
// reaches the end of the data has no valid chunk after it; a crash can also
// leave such a tail with another reason (e.g. a chunk written only partly
// into preallocated zeros, or blocks that were allocated but never written:
// bad magic or checksum), so recovery may cut at its offset too. In a file without
// checksums resynchronisation is best effort: an uncompressed chunk is
// accepted on its header alone.
//
// Cost: every candidate magic that passes the header checks is verified by
// reading its stored bytes, so a crafted file full of plausible headers can
// make resynchronisation quadratic in its size; real damage is not like that.
type Scanner struct {
	r    io.ReaderAt
	size int64
	opt  Options

	// Validate, when set, is applied to every decoded payload; an error
	// rejects the chunk with Reason Payload (e.g. a CBOR well-formedness
	// check). It must not retain the payload.
	Validate func(payload []byte) error

	pos int64 // where the next chunk is expected
	// zeroOff, zeroLen: the zero tail found where a chunk was expected.
	zeroOff, zeroLen int64
	cur              scannedChunk
	bad              []BadRegion
	err              error
	done             bool

	win    []byte // window of the file: win[i] is the byte at winOff+i
	winOff int64
	out    []byte // decompression buffer
}

type scannedChunk struct {
	off, end int64
	payload  []byte
	hdr      chunkHeader
}

// ChunkInfo describes the chunk a Scanner is positioned on.
type ChunkInfo struct {
	Offset      int64 // offset of the ZCH0 magic
	StoredSize  int64 // bytes after the header
	LogicalSize int64 // payload bytes
	Raw         bool  // stored uncompressed in a compressed file
}

// NewScanner returns a Scanner over the chunks in [HeaderSize, size) of a
// data file with the given options (see ReadHeader).
func NewScanner(r io.ReaderAt, size int64, opt Options) *Scanner {
	return &Scanner{r: r, size: size, opt: opt, pos: HeaderSize}
}

// SetOffset positions the scanner at off (a chunk boundary, e.g. an index
// watermark) and forgets the current chunk. Bad regions found so far stay.
func (s *Scanner) SetOffset(off int64) {
	s.pos = max(off, HeaderSize)
	s.cur = scannedChunk{}
	s.done = false
}

// Next advances to the next valid chunk, recording bad regions on the way.
// It returns false at the end of the data or on an I/O error (see Err).
func (s *Scanner) Next() bool {
	s.cur = scannedChunk{}
	if s.done || s.err != nil {
		return false
	}
	p := s.pos
	if p >= s.size {
		s.done = true
		return false
	}
	c, reason, cerr := s.decodeAt(p)
	if s.err != nil {
		return false
	}
	if reason == 0 {
		s.cur = c
		s.pos = c.end
		return true
	}
	if s.zerosToEnd(p) {
		// A preallocated tail: the data ends here.
		s.zeroOff, s.zeroLen = p, s.size-p
		s.pos = p
		s.done = true
		return false
	}
	if s.err != nil {
		return false
	}
	q, ok := s.resync(p + 1)
	if s.err != nil {
		return false
	}
	if !ok {
		s.bad = append(s.bad, BadRegion{Offset: p, Length: s.size - p, Reason: reason, Err: cerr})
		s.pos = s.size
		s.done = true
		return false
	}
	if reason == Truncated {
		// The chunk claims bytes past the end, yet a valid chunk follows:
		// its size is corrupt, the file is not torn here.
		reason = SizeOutOfBounds
		cerr = fmt.Errorf("%v, but a valid chunk follows at %d", cerr, q.off)
	}
	s.bad = append(s.bad, BadRegion{Offset: p, Length: q.off - p, Reason: reason, Err: cerr})
	s.cur = q
	s.pos = q.end
	return true
}

// Chunk returns the offset and payload of the current chunk. The payload is
// valid only until the next call to Next; copy it to keep it.
func (s *Scanner) Chunk() (off int64, payload []byte) { return s.cur.off, s.cur.payload }

// Info describes the current chunk.
func (s *Scanner) Info() ChunkInfo {
	return ChunkInfo{
		Offset:      s.cur.off,
		StoredSize:  int64(s.cur.hdr.stored),
		LogicalSize: int64(s.cur.hdr.lsize),
		Raw:         s.cur.hdr.raw,
	}
}

// ZeroTail returns where the zero tail of the scanned range starts and its
// length (n is 0 when there is none): the bytes from off to the end are
// all zero and start where a chunk was expected, so they are not a chunk
// but space the writer preallocated (File), and the data ends at off. It
// is known once Next has returned false.
func (s *Scanner) ZeroTail() (off, n int64) { return s.zeroOff, s.zeroLen }

// zerosToEnd reports whether every byte in [p, size) is zero.
func (s *Scanner) zerosToEnd(p int64) bool {
	for off := p; off < s.size; {
		n := int(min(scanWindow, s.size-off))
		b, ok := s.view(off, n)
		if !ok || !allZero(b) {
			return false
		}
		off += int64(n)
	}
	return p < s.size
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Offset returns where scanning continues: just past the current chunk after
// Next returned true, the end of the data after it returned false (unless
// Err is set).
func (s *Scanner) Offset() int64 { return s.pos }

// BadRegions returns the bad regions found so far, in file order.
func (s *Scanner) BadRegions() []BadRegion { return s.bad }

// Err returns the first I/O error. Corruption is not an error here; it is
// reported by BadRegions.
func (s *Scanner) Err() error { return s.err }

// decodeAt validates and decodes the chunk at p. A non-zero Reason rejects
// it; s.err is set on I/O errors.
func (s *Scanner) decodeAt(p int64) (scannedChunk, Reason, error) {
	remain := s.size - p
	if remain < ChunkHeaderSize {
		b, ok := s.view(p, int(remain))
		if !ok {
			return scannedChunk{}, Truncated, fmt.Errorf("file shrank to %d bytes", s.size)
		}
		if isMagicPrefix(b) {
			return scannedChunk{}, Truncated, fmt.Errorf("file ends %d bytes into the chunk header", remain)
		}
		return scannedChunk{}, BadMagic, fmt.Errorf("%d trailing bytes %x", remain, b)
	}
	hb, ok := s.view(p, ChunkHeaderSize)
	if !ok {
		return scannedChunk{}, Truncated, fmt.Errorf("file shrank to %d bytes", s.size)
	}
	h := parseChunkHeader(hb)
	if reason, err := h.check(s.opt); reason != 0 {
		return scannedChunk{}, reason, err
	}
	end := p + ChunkHeaderSize + int64(h.stored)
	if end > s.size {
		return scannedChunk{}, Truncated, fmt.Errorf("chunk of %d stored bytes ends at %d, past the end of the data at %d", h.stored, end, s.size)
	}
	stored, ok := s.view(p+ChunkHeaderSize, int(h.stored))
	if !ok {
		return scannedChunk{}, Truncated, fmt.Errorf("file shrank to %d bytes", s.size)
	}
	if reason, err := verifyStored(h, stored, s.opt); reason != 0 {
		return scannedChunk{}, reason, err
	}
	payload, reason, err := decodeStored(h, stored, s.opt, s.out)
	if reason != 0 {
		return scannedChunk{}, reason, err
	}
	if !h.verbatim(s.opt) {
		s.out = payload[:0]
	}
	if s.Validate != nil {
		if err := s.Validate(payload); err != nil {
			return scannedChunk{}, Payload, err
		}
	}
	return scannedChunk{off: p, end: end, payload: payload, hdr: h}, 0, nil
}

// resync finds the first offset >= from holding a ZCH0 magic whose chunk
// validates, and returns that chunk.
func (s *Scanner) resync(from int64) (scannedChunk, bool) {
	for from+ChunkHeaderSize <= s.size && s.err == nil {
		var b []byte
		if from >= s.winOff && from+int64(len(chunkMagicString)) <= s.winOff+int64(len(s.win)) {
			b = s.win[from-s.winOff:] // search what the window already holds
		} else {
			var ok bool
			if b, ok = s.view(from, int(min(scanWindow, s.size-from))); !ok {
				return scannedChunk{}, false
			}
		}
		i := bytes.Index(b, []byte(chunkMagicString))
		if i < 0 {
			// Keep the last 3 bytes: a magic may straddle the window end.
			from += int64(len(b) - (len(chunkMagicString) - 1))
			continue
		}
		cand := from + int64(i)
		if c, reason, _ := s.decodeAt(cand); reason == 0 {
			return c, true
		}
		from = cand + 1
	}
	return scannedChunk{}, false
}

// view returns the n bytes at off, with off+n <= s.size. It reads through the
// window, refilling it when needed. If the file turns out shorter than size,
// size shrinks and ok is false; an I/O error sets s.err.
func (s *Scanner) view(off int64, n int) ([]byte, bool) {
	if off >= s.winOff && off+int64(n) <= s.winOff+int64(len(s.win)) {
		i := int(off - s.winOff)
		return s.win[i : i+n], true
	}
	want := int(min(max(int64(n), scanWindow), s.size-off))
	if cap(s.win) < want {
		s.win = make([]byte, want)
	}
	s.win = s.win[:want]
	got, err := s.r.ReadAt(s.win, off)
	if got < want {
		if err != nil && err != io.EOF {
			s.err = fmt.Errorf("chunk: scan: read %d bytes at offset %d: %w", want, off, err)
		}
		s.size = off + int64(got)
	}
	s.win, s.winOff = s.win[:got], off
	if got < n {
		return nil, false
	}
	return s.win[:n], true
}

// isMagicPrefix reports whether b is a prefix of "ZCH0" or starts with it.
func isMagicPrefix(b []byte) bool {
	m := []byte(chunkMagicString)
	if len(b) < len(m) {
		return bytes.Equal(b, m[:len(b)])
	}
	return bytes.Equal(b[:len(m)], m)
}
