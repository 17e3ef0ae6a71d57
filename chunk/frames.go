package chunk

import (
	"fmt"
	"io"
	"sync"
)

// Frames is a chunk that was read and checked (header, bounds, CRC-32 of
// its stored bytes, and for zstd the layout of its frames) but whose
// payload is decompressed on demand, frame by frame: a reader of one span
// decompresses the frames holding the payload's string table and that
// span, not the whole chunk (EncodeFrames writes such chunks). A chunk of
// any other codec, stored raw, or of one zstd frame is decoded whole by
// ReadFrames; Fill then has nothing left to do.
//
// Each frame is decoded into a buffer of its own, so reading one span of
// a large chunk allocates the bytes of the frames it reads, not the whole
// payload. Fill returns the buffer holding a range: the frame's when the
// range lies in one frame, else one buffer of the whole payload (built,
// every frame decoded, on the first such Fill). Frames is safe for
// concurrent use, and a buffer Fill returned never changes again.
//
// A Frames keeps no stored bytes: Fill reads those of the frames it
// decodes from the file again (a chunk is never rewritten once appended).
// They were checked against the chunk's CRC-32 when ReadFrames read them,
// and each frame's content checksum (XXH64) is checked as it is decoded,
// so bytes that changed since are a Decompress corruption of the frame.
type Frames struct {
	off    int64 // of the chunk in its file, for errors
	size   int   // payload bytes
	reread func(b []byte, off int64) error
	mu     sync.Mutex
	whole  []byte // the whole payload, once built
	frames []zstdFrameLoc
	bufs   [][]byte // bufs[k] is frame k's payload bytes, once decoded
}

// ReadFrames reads the chunk at off as ReadChunk does, but decompresses
// only its first zstd frame; Fill decompresses the others when they are
// needed. A chunk that fails validation yields a *CorruptionError (a
// damaged frame Fill decodes later too); an offset that cannot hold a
// chunk header yields an error wrapping ErrOutOfRange.
func (f *File) ReadFrames(off int64) (*Frames, int64, error) {
	if f.closed.Load() {
		return nil, 0, ErrClosed
	}
	bp := f.scratch()
	fr, next, err := readFramesAt(f.osf, f.size.Load(), f.opt, off, bp)
	f.bufs.Put(bp)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", f.path, err)
	}
	fr.reread = func(b []byte, at int64) error {
		if f.closed.Load() {
			return ErrClosed
		}
		if err := readFull(f.osf, b, at); err != nil {
			return fmt.Errorf("%s: %w", f.path, readError(off, err))
		}
		return nil
	}
	return fr, next, nil
}

// ReadFramesAt is File.ReadFrames over a data file of the given size read
// through r.
func ReadFramesAt(r io.ReaderAt, size int64, opt Options, off int64) (*Frames, int64, error) {
	fr, next, err := readFramesAt(r, size, opt, off, nil)
	if err != nil {
		return nil, 0, err
	}
	fr.reread = func(b []byte, at int64) error {
		if err := readFull(r, b, at); err != nil {
			return readError(off, err)
		}
		return nil
	}
	return fr, next, nil
}

// readFramesAt is ReadFramesAt without the reread function; the stored
// bytes of a compressed chunk are read into scratch's storage (nil: a new
// buffer).
func readFramesAt(r io.ReaderAt, size int64, opt Options, off int64, scratch *[]byte) (*Frames, int64, error) {
	h, stored, next, err := readStoredAt(r, size, opt, off, scratch)
	if err != nil {
		return nil, 0, err
	}
	fr := &Frames{off: off, size: int(h.lsize)}
	if opt.Compression != Zstd || h.verbatim(opt) {
		payload, reason, err := decodeStored(h, stored, opt, nil)
		if reason != 0 {
			return nil, 0, &CorruptionError{Offset: off, Reason: reason, Err: err}
		}
		fr.whole = payload
		return fr, next, nil
	}
	frames, err := zstdFrames(stored, int(h.lsize))
	if err != nil {
		return nil, 0, &CorruptionError{Offset: off, Reason: Decompress, Err: err}
	}
	if len(frames) == 1 {
		fr.whole = make([]byte, h.lsize, int(h.lsize)+zstdSlack)
		if err := frames[0].decodeInto(stored[frames[0].storedAt:frames[0].storedEnd], fr.whole, 0); err != nil {
			return nil, 0, &CorruptionError{Offset: off, Reason: Decompress, Err: err}
		}
		return fr, next, nil
	}
	fr.frames, fr.bufs = frames, make([][]byte, len(frames))
	if _, err := fr.frame(0, stored); err != nil {
		return nil, 0, err
	}
	return fr, next, nil
}

// zstdSlack is the room a zstd output buffer keeps past the bytes it is
// to hold: with at least 16 bytes of it klauspost/compress decodes with
// its faster copies, which may write up to 15 bytes past the output (with
// exactly the room needed it uses bounds-exact copies, ~10% slower on a
// 16 KiB frame). The decoded length is checked either way.
const zstdSlack = 16

// Size is the payload's length in bytes.
func (c *Frames) Size() int { return c.size }

// Frames returns the number of frames the payload is stored in (1 for a
// chunk decoded whole).
func (c *Frames) Frames() int { return max(len(c.frames), 1) }

// Decoded reports whether frame k has been decompressed (for a chunk
// decoded whole, every frame has).
func (c *Frames) Decoded(k int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.whole != nil || (k >= 0 && k < len(c.bufs) && c.bufs[k] != nil)
}

// Fill returns a buffer holding payload bytes [base, base+len(buf)), a
// range that includes [lo, hi) (an empty range counts as the byte at lo):
// the buffer of the one frame holding [lo, hi), decompressed if it was not
// yet, else the whole payload (every frame decompressed). A frame that
// fails to decode yields a *CorruptionError (Reason Decompress) naming the
// frame and its offset in the chunk's stored bytes; it fails again at
// every later Fill that needs it.
func (c *Frames) Fill(lo, hi int) (buf []byte, base int, err error) {
	n := c.size
	if lo < 0 || lo > hi || hi > n {
		return nil, 0, fmt.Errorf("chunk at offset %d: payload bytes %d to %d asked of a payload of %d bytes", c.off, lo, hi, n)
	}
	if hi == lo {
		hi = min(lo+1, n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.whole != nil {
		return c.whole, 0, nil
	}
	// The frames are in payload order and tile it: find the frame holding
	// lo; if it also holds hi-1, the range is in it.
	k := 0
	for k+1 < len(c.frames) && c.frames[k].end <= lo {
		k++
	}
	if f := c.frames[k]; hi <= f.end {
		b, err := c.frame(k, nil)
		return b, f.at, err
	}
	if err := c.build(); err != nil {
		return nil, 0, err
	}
	return c.whole, 0, nil
}

// frame returns frame k's buffer, decoding it first if need be from
// stored, the chunk's stored bytes (nil: read from the file); c.mu is held
// (or c not shared yet).
func (c *Frames) frame(k int, stored []byte) ([]byte, error) {
	if b := c.bufs[k]; b != nil {
		return b, nil
	}
	f := c.frames[k]
	src := stored
	if src == nil {
		bp, err := c.readStored(f.storedAt, f.storedEnd)
		if err != nil {
			return nil, err
		}
		defer putStoredBuf(bp)
		src = *bp
	} else {
		src = src[f.storedAt:f.storedEnd]
	}
	b := make([]byte, f.end-f.at, f.end-f.at+zstdSlack)
	if err := f.decodeInto(src, b, k); err != nil {
		return nil, &CorruptionError{Offset: c.off, Reason: Decompress, Err: err}
	}
	c.bufs[k] = b
	return b, nil
}

// build makes c.whole the whole payload, copying the frames decoded and
// decoding the others; c.mu is held.
func (c *Frames) build() error {
	first := len(c.frames) // the first frame not decoded
	for k := range c.frames {
		if c.bufs[k] == nil {
			first = k
			break
		}
	}
	var stored []byte // the stored bytes from frame first's on
	if first < len(c.frames) {
		bp, err := c.readStored(c.frames[first].storedAt, c.frames[len(c.frames)-1].storedEnd)
		if err != nil {
			return err
		}
		defer putStoredBuf(bp)
		stored = *bp
	}
	whole := make([]byte, c.size, c.size+zstdSlack)
	for k, f := range c.frames {
		if b := c.bufs[k]; b != nil {
			copy(whole[f.at:f.end], b)
			continue
		}
		// Decoding in place may write up to zstdSlack bytes past the
		// frame: into the next frame's bytes, which are written after, or
		// past the payload into the slack.
		at := c.frames[first].storedAt
		if err := f.decodeInto(stored[f.storedAt-at:f.storedEnd-at], whole[f.at:f.end:f.end+zstdSlack], k); err != nil {
			return &CorruptionError{Offset: c.off, Reason: Decompress, Err: err}
		}
	}
	c.whole, c.bufs = whole, nil
	return nil
}

// readStored reads the chunk's stored bytes [at, end) from the file into
// a buffer of storedBufs.
func (c *Frames) readStored(at, end int) (*[]byte, error) {
	bp := storedBufs.Get().(*[]byte)
	*bp = grow(*bp, end-at)
	if err := c.reread(*bp, c.off+ChunkHeaderSize+int64(at)); err != nil {
		putStoredBuf(bp)
		return nil, err
	}
	return bp, nil
}

// storedBufs pools the buffers Frames reads stored bytes into.
var storedBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledStored bounds the buffer storedBufs keeps.
const maxPooledStored = 1 << 20

func putStoredBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledStored {
		storedBufs.Put(bp)
	}
}
