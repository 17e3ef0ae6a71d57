package chunk

import (
	"bytes"
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
// Payload returns the payload buffer, lsize bytes, in which the bytes of
// frames not decoded yet are zeros: a reader calls Fill for a range before
// it reads it. Frames is safe for concurrent use; Fill writes only frames
// not decoded yet, and only under its lock, so bytes a Fill returned for
// never change again.
type Frames struct {
	off    int64 // of the chunk in its file, for errors
	buf    []byte
	mu     sync.Mutex
	stored []byte // nil once every frame is decoded
	frames []zstdFrameLoc
	done   []bool
	left   int // frames not decoded yet
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
	return fr, next, nil
}

// ReadFramesAt is File.ReadFrames over a data file of the given size read
// through r.
func ReadFramesAt(r io.ReaderAt, size int64, opt Options, off int64) (*Frames, int64, error) {
	return readFramesAt(r, size, opt, off, nil)
}

// readFramesAt is ReadFramesAt; the stored bytes of a compressed chunk are
// read into scratch's storage (nil: a new buffer) and copied out only when
// the Frames keeps them (a chunk of several frames).
func readFramesAt(r io.ReaderAt, size int64, opt Options, off int64, scratch *[]byte) (*Frames, int64, error) {
	h, stored, next, err := readStoredAt(r, size, opt, off, scratch)
	if err != nil {
		return nil, 0, err
	}
	fr := &Frames{off: off}
	if opt.Compression != Zstd || h.verbatim(opt) {
		payload, reason, err := decodeStored(h, stored, opt, nil)
		if reason != 0 {
			return nil, 0, &CorruptionError{Offset: off, Reason: reason, Err: err}
		}
		fr.buf = payload
		return fr, next, nil
	}
	frames, err := zstdFrames(stored, int(h.lsize))
	if err != nil {
		return nil, 0, &CorruptionError{Offset: off, Reason: Decompress, Err: err}
	}
	fr.buf = make([]byte, h.lsize)
	if len(frames) > 1 && scratch != nil {
		stored = bytes.Clone(stored) // kept until every frame is decoded
	}
	fr.stored, fr.frames, fr.done, fr.left = stored, frames, make([]bool, len(frames)), len(frames)
	if _, err := fr.Fill(0, 1); err != nil {
		return nil, 0, err
	}
	return fr, next, nil
}

// Payload returns the payload buffer (see Frames): len is the chunk's
// logical size; only ranges Fill returned for hold their bytes.
func (c *Frames) Payload() []byte { return c.buf }

// Frames returns the number of frames the payload is stored in (1 for a
// chunk decoded whole).
func (c *Frames) Frames() int { return max(len(c.frames), 1) }

// Fill decompresses the frames holding payload bytes [lo, hi) that are not
// decoded yet (an empty range counts as the byte at lo) and returns end:
// payload bytes [lo, end) are now in the buffer, end being at least the
// end of the frame holding byte hi-1. A frame that fails to decode yields a
// *CorruptionError (Reason Decompress) naming the frame and its offset in
// the chunk's stored bytes; it fails again at every later Fill.
func (c *Frames) Fill(lo, hi int) (int, error) {
	n := len(c.buf)
	if lo < 0 || lo > hi || hi > n {
		return 0, fmt.Errorf("chunk at offset %d: payload bytes %d to %d asked of a payload of %d bytes", c.off, lo, hi, n)
	}
	if hi == lo {
		hi = min(lo+1, n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left == 0 {
		return n, nil
	}
	// The frames are in payload order and tile it: find the first frame
	// ending after lo.
	k := 0
	for k < len(c.frames) && c.frames[k].end <= lo {
		k++
	}
	end := hi
	for ; k < len(c.frames) && c.frames[k].at < hi; k++ {
		f := c.frames[k]
		end = f.end
		if c.done[k] {
			continue
		}
		if err := f.decode(c.stored, c.buf, k); err != nil {
			return 0, &CorruptionError{Offset: c.off, Reason: Decompress, Err: err}
		}
		c.done[k] = true
		if c.left--; c.left == 0 {
			c.stored = nil
		}
	}
	return end, nil
}
