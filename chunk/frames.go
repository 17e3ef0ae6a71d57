package chunk

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Frames is a chunk that was read and checked (header, bounds, and the
// CRC-32 of its stored bytes and the layout of its frames; of a chunk
// whose first frame is an LZ4 lead frame only that frame, with the table
// of the others it holds) but whose
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
// They were checked against the chunk's CRC-32 when ReadFrames read them
// whole, and each frame's checksum (a zstd frame's XXH64, an LZ4 lead
// frame's CRC-32) is checked as it is decoded, so bytes that changed since
// (or, after ReadFramesKnown or of a chunk with an LZ4 lead frame, were
// never checked by the chunk's CRC-32) are a Decompress corruption of the
// frame.
//
// The payload buffers come from a pool. A Frames nobody uses any more may
// give them back with Release, after which no buffer it returned may be
// read (see Release); one that is never released leaves them to the
// garbage collector.
type Frames struct {
	off    int64 // of the chunk in its file, for errors
	size   int   // payload bytes
	reread func(b []byte, off int64) error
	mu     sync.Mutex
	whole  []byte // the whole payload, once built
	frames []zstdFrameLoc
	bufs   [][]byte // bufs[k] is frame k's payload bytes, once decoded
	layout *Layout  // of a chunk of several frames ReadFrames read whole
	// held are the pooled buffers behind whole and bufs (and those of
	// frames copied into whole by build, which a reader may still hold),
	// given back by Release; released is set by Release.
	held     []*[]byte
	released bool
}

// ReadFrames reads the chunk at off as ReadChunk does, but decompresses
// only its first frame; Fill decompresses the others when they are
// needed. Of a zstd chunk whose first frame is an LZ4 lead frame it reads
// only the header and that frame, which lists the others (see
// readFramesAt), and does not check the chunk's CRC-32. A chunk that
// fails validation yields a *CorruptionError (a damaged frame Fill
// decodes later too); an offset that cannot hold a chunk header yields an
// error wrapping ErrOutOfRange.
func (f *File) ReadFrames(off int64) (*Frames, int64, error) {
	if f.closed.Load() {
		return nil, 0, ErrClosed
	}
	bp := f.scratch()
	fr, next, err := readFramesAt(f.osf, f.size.Load(), f.opt, off, bp, &f.leadHint)
	f.bufs.Put(bp)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", f.path, err)
	}
	fr.reread = f.rereadFunc(off)
	return fr, next, nil
}

// Layout is what reading a chunk stored as several zstd frames taught a
// reader about it: its header and where each frame lies in its stored
// bytes and in its payload. A reader that keeps it (Frames.Layout) reads
// the chunk again with ReadFramesKnown, which reads the stored bytes of
// only the frames it decodes instead of the whole chunk. A Layout is
// small (16 bytes plus 8 a frame) and never changes.
type Layout struct {
	hdr [ChunkHeaderSize]byte
	// ends[k] is where frame k ends: stored bytes in the low 32 bits,
	// payload bytes in the high 32 (each frame starts where the one
	// before ends, the first at 0).
	ends []uint64
}

// Size is the memory a Layout holds, in bytes.
func (l *Layout) Size() int { return ChunkHeaderSize + 24 + 8*len(l.ends) }

func (l *Layout) frames() []zstdFrameLoc {
	out := make([]zstdFrameLoc, len(l.ends))
	var storedAt, at int
	for k, e := range l.ends {
		out[k] = zstdFrameLoc{storedAt: storedAt, storedEnd: int(uint32(e)), at: at, end: int(e >> 32)}
		storedAt, at = out[k].storedEnd, out[k].end
	}
	return out
}

// Layout returns the chunk's layout for ReadFramesKnown, or nil for a
// chunk decoded whole (one frame, another codec, stored raw), read by
// ReadFramesKnown (whose caller has it), or whose first frame is an LZ4
// lead frame (ReadFrames reads it as ReadFramesKnown would).
func (c *Frames) Layout() *Layout { return c.layout }

// ReadFramesKnown is ReadFrames for a chunk read before, whose layout l
// the caller kept from an earlier Frames of the same file and offset (a
// chunk never changes once appended). It reads the chunk's header and its
// first frame's stored bytes, not the whole chunk, and so does not check
// the chunk's CRC-32: every frame it or a later Fill decodes is checked
// by its content checksum (XXH64), as ReadFrames's later Fills are. A
// header that differs from l's or a first frame that does not decode is
// not trusted: the chunk is then read and checked whole by ReadFrames,
// whose result (a *CorruptionError for a damaged chunk) is returned.
func (f *File) ReadFramesKnown(off int64, l *Layout) (*Frames, int64, error) {
	if f.closed.Load() {
		return nil, 0, ErrClosed
	}
	fr, next, ok := readFramesKnownAt(f.osf, f.size.Load(), off, l)
	if !ok {
		return f.ReadFrames(off)
	}
	fr.reread = f.rereadFunc(off)
	return fr, next, nil
}

// ReadFramesKnownAt is File.ReadFramesKnown over a data file of the given
// size read through r.
func ReadFramesKnownAt(r io.ReaderAt, size int64, opt Options, off int64, l *Layout) (*Frames, int64, error) {
	fr, next, ok := readFramesKnownAt(r, size, off, l)
	if !ok {
		return ReadFramesAt(r, size, opt, off)
	}
	fr.reread = func(b []byte, at int64) error {
		if err := readFull(r, b, at); err != nil {
			return readError(off, err)
		}
		return nil
	}
	return fr, next, nil
}

// readFramesKnownAt reads the header and first frame of the chunk at off
// whose layout is l and decodes the frame; ok is false when the chunk
// must be read whole instead (a header other than l's, a first frame
// that does not read or decode, a chunk past size). The Frames has no
// reread function yet.
func readFramesKnownAt(r io.ReaderAt, size int64, off int64, l *Layout) (fr *Frames, next int64, ok bool) {
	h := parseChunkHeader(l.hdr[:])
	next = off + ChunkHeaderSize + int64(h.stored)
	if off < HeaderSize || next > size || len(l.ends) < 2 {
		return nil, 0, false
	}
	frames := l.frames()
	bp := storedBufs.Get().(*[]byte)
	defer putStoredBuf(bp)
	*bp = grow(*bp, ChunkHeaderSize+frames[0].storedEnd)
	b := *bp
	if err := readFull(r, b, off); err != nil || [ChunkHeaderSize]byte(b[:ChunkHeaderSize]) != l.hdr {
		return nil, 0, false
	}
	fr = &Frames{off: off, size: int(h.lsize), frames: frames, bufs: make([][]byte, len(frames))}
	if _, err := fr.frame(0, b[ChunkHeaderSize:]); err != nil {
		fr.Release()
		return nil, 0, false
	}
	return fr, next, true
}

// rereadFunc is the reread function of a Frames of the chunk at off.
func (f *File) rereadFunc(off int64) func(b []byte, at int64) error {
	return func(b []byte, at int64) error {
		if f.closed.Load() {
			return ErrClosed
		}
		if err := readFull(f.osf, b, at); err != nil {
			return fmt.Errorf("%s: %w", f.path, readError(off, err))
		}
		return nil
	}
}

// ReadFramesAt is File.ReadFrames over a data file of the given size read
// through r.
func ReadFramesAt(r io.ReaderAt, size int64, opt Options, off int64) (*Frames, int64, error) {
	fr, next, err := readFramesAt(r, size, opt, off, nil, nil)
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
// buffer). A zstd chunk whose first frame is an LZ4 lead frame is read as
// its header, that frame (which lists the others) and nothing else: one
// read of the chunk header and the first leadPrefix(hint) bytes (nil or
// no hint yet: leadReadBytes), a second one only when the lead frame is
// longer; hint then moves toward the frame's size (nextLeadHint).
// Another chunk is read whole with its CRC-32 checked.
func readFramesAt(r io.ReaderAt, size int64, opt Options, off int64, scratch *[]byte, hint *atomic.Int64) (*Frames, int64, error) {
	var h chunkHeader
	var stored []byte
	var next int64
	var err error
	if opt.Compression == Zstd {
		prefix := int64(leadReadBytes)
		if hint != nil && hint.Load() > 0 {
			prefix = leadPrefix(hint.Load())
		}
		var pre []byte
		if scratch == nil {
			scratch = new([]byte)
		}
		if h, pre, next, err = readChunkPrefixAt(r, size, opt, off, prefix, scratch); err != nil {
			return nil, 0, err
		}
		if !h.verbatim(opt) && isLZ4Frame(pre) {
			return readLZ4LeadAt(r, h, pre, off, next, scratch, hint)
		}
		stored, err = readStoredRest(r, h, pre, opt, off, scratch)
	} else {
		h, stored, next, err = readStoredAt(r, size, opt, off, scratch)
	}
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
		fr.whole = fr.payloadBuf(int(h.lsize))
		if err := frames[0].decodeInto(stored[frames[0].storedAt:frames[0].storedEnd], fr.whole, 0); err != nil {
			fr.Release()
			return nil, 0, &CorruptionError{Offset: off, Reason: Decompress, Err: err}
		}
		return fr, next, nil
	}
	fr.frames, fr.bufs = frames, make([][]byte, len(frames))
	if _, err := fr.frame(0, stored); err != nil {
		fr.Release()
		return nil, 0, err
	}
	l := &Layout{ends: make([]uint64, len(frames))}
	h.put(l.hdr[:])
	for k, z := range frames {
		l.ends[k] = uint64(z.end)<<32 | uint64(z.storedEnd)
	}
	fr.layout = l
	return fr, next, nil
}

// leadReadBytes is how many stored bytes of a zstd chunk a first read
// of it reads with its header when no earlier read of the file hinted
// otherwise (File.leadHint): about an LZ4 lead frame of a 500-span chunk
// of method-call records (~14.5 KB), whose table tells where the rest
// lies. leadReadMin and leadReadMax bound a hint.
const (
	leadReadBytes = 16 << 10
	leadReadMin   = 4 << 10
	leadReadMax   = 256 << 10
)

// The hint (File.leadHint) is a moving average of the sizes of the lead
// frames the file's reads met, each weighing 1/leadHintWeight, and a read
// reads an eighth more than it (leadPrefix): a lead frame longer than
// that costs a second read of its rest. It used to rise to the largest
// lead frame met and a quarter (and fall only below half of that): on
// the 500-span chunks of a 10M-span store of the bench workload (lead
// frames p50 14.4, p90 15.7, max 18.7 KB) every get then read ~23.2 KB
// where its lead frame was ~14.4; the average reads ~16.3 KB, with a
// second read for ~5% of the chunks (simulated over the store's lead
// frame sizes in random order). A get at 10M spans spent ~10% of the
// daemon's CPU in that pread, about in proportion to its bytes (~1.6 ns
// a byte on the shared 2-core VM, daemon profile).
const leadHintWeight = 16

// leadPrefix is how many stored bytes a read reads with a chunk's header
// when the moving average of the lead frame sizes is avg.
func leadPrefix(avg int64) int64 { return avg + avg/8 }

// nextLeadHint is the hint after a read met a lead frame of size stored
// bytes, the hint having been avg (0: none yet). A size beyond
// leadReadMax (a damaged frame's, whose read then fails) counts as
// leadReadMax.
func nextLeadHint(avg, size int64) int64 {
	size = min(size, leadReadMax)
	if avg <= 0 {
		avg = size
	} else {
		avg += (size - avg) / leadHintWeight
	}
	return min(max(avg, leadReadMin), leadReadMax)
}

// readChunkPrefixAt reads the header of the chunk at off and the first
// prefix bytes of its stored bytes (all of them when fewer) in one read
// into scratch, and checks the header and bounds as readStoredAt does;
// pre is scratch's storage past the header.
func readChunkPrefixAt(r io.ReaderAt, size int64, opt Options, off int64, prefix int64, scratch *[]byte) (h chunkHeader, pre []byte, next int64, err error) {
	if off < HeaderSize || off >= size {
		return chunkHeader{}, nil, 0, fmt.Errorf("%w: chunk offset %d, data spans [%d, %d)", ErrOutOfRange, off, HeaderSize, size)
	}
	if size-off < ChunkHeaderSize {
		return chunkHeader{}, nil, 0, &CorruptionError{Offset: off, Reason: Truncated,
			Err: fmt.Errorf("file ends %d bytes into the chunk header", size-off)}
	}
	n := min(ChunkHeaderSize+prefix, size-off)
	*scratch = grow(*scratch, int(n))
	b := *scratch
	if err := readFull(r, b, off); err != nil {
		return chunkHeader{}, nil, 0, readError(off, err)
	}
	h = parseChunkHeader(b)
	if reason, err := h.check(opt); reason != 0 {
		return chunkHeader{}, nil, 0, &CorruptionError{Offset: off, Reason: reason, Err: err}
	}
	next = off + ChunkHeaderSize + int64(h.stored)
	if next > size {
		return chunkHeader{}, nil, 0, &CorruptionError{Offset: off, Reason: Truncated,
			Err: fmt.Errorf("chunk of %d stored bytes ends at %d, past the end of the data at %d", h.stored, next, size)}
	}
	return h, b[ChunkHeaderSize:min(n, ChunkHeaderSize+int64(h.stored))], next, nil
}

// readStoredRest completes a read readChunkPrefixAt began: the stored
// bytes of the chunk whose header h and first stored bytes pre (in
// scratch's storage, after the header) were read, checked against the
// chunk's CRC-32 as readStoredAt checks them. The stored bytes of a
// verbatim chunk are a new buffer (they are its payload), else scratch's.
func readStoredRest(r io.ReaderAt, h chunkHeader, pre []byte, opt Options, off int64, scratch *[]byte) ([]byte, error) {
	var stored []byte
	if h.verbatim(opt) {
		stored = make([]byte, h.stored)
		copy(stored, pre)
	} else {
		*scratch = grow(*scratch, ChunkHeaderSize+int(h.stored))
		stored = (*scratch)[ChunkHeaderSize:]
	}
	if len(pre) < len(stored) {
		if err := readFull(r, stored[len(pre):], off+ChunkHeaderSize+int64(len(pre))); err != nil {
			return nil, readError(off, err)
		}
	}
	if reason, err := verifyStored(h, stored, opt); reason != 0 {
		return nil, &CorruptionError{Offset: off, Reason: reason, Err: err}
	}
	return stored, nil
}

// readLZ4LeadAt completes a read readChunkPrefixAt began of a chunk whose
// stored bytes start with an LZ4 lead frame (pre, in scratch's storage
// after the header): it reads the rest of that frame if pre does not hold
// it, checks it (its CRC-32, and a table that adds up to the chunk's
// header), decodes it, and returns the chunk's Frames with the frames the
// table lists, none of them read. The chunk's CRC-32 over all its stored
// bytes is not checked: each frame is checked by its own checksum when it
// is decoded, as after ReadFramesKnown. hint, when set, moves toward
// the lead frame's size (nextLeadHint).
func readLZ4LeadAt(r io.ReaderAt, h chunkHeader, pre []byte, off, next int64, scratch *[]byte, hint *atomic.Int64) (*Frames, int64, error) {
	corrupt := func(err error) (*Frames, int64, error) {
		return nil, 0, &CorruptionError{Offset: off, Reason: Decompress, Err: fmt.Errorf("frame 0 at stored byte 0: %w", err)}
	}
	lead := pre
	if len(pre) >= 8 {
		size := lz4FrameSize(pre)
		if hint != nil { // a lost update of a concurrent read does no harm
			hint.Store(nextLeadHint(hint.Load(), size))
		}
		if size > int64(len(pre)) && size <= int64(h.stored) {
			*scratch = grow(*scratch, ChunkHeaderSize+int(size))
			lead = (*scratch)[ChunkHeaderSize : ChunkHeaderSize+size]
			if err := readFull(r, lead[len(pre):], off+ChunkHeaderSize+int64(len(pre))); err != nil {
				return nil, 0, readError(off, err)
			}
		}
	}
	lf, err := parseLZ4Frame(lead, int(h.lsize))
	if err != nil {
		return corrupt(err)
	}
	frames, err := framesOfLZ4Lead(lf, int(h.stored), int(h.lsize))
	if err != nil {
		return corrupt(err)
	}
	fr := &Frames{off: off, size: int(h.lsize), frames: frames, bufs: make([][]byte, len(frames))}
	b := fr.payloadBuf(lf.content)
	if err := lf.decode(b); err != nil { // checked by parseLZ4Frame: not again
		fr.Release()
		return corrupt(err)
	}
	fr.bufs[0] = b
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
	if c.released {
		return nil, 0, fmt.Errorf("chunk at offset %d: %w", c.off, ErrReleased)
	}
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
	b := c.payloadBuf(f.end - f.at)
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
	whole := c.payloadBuf(c.size)
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
	// The frames' own buffers stay held (a reader may still use one the
	// Fill before returned) until Release.
	c.whole, c.bufs = whole, nil
	return nil
}

// ErrReleased is returned by a Fill of a Frames after its Release.
var ErrReleased = errors.New("payload buffers released")

// Release gives the payload buffers back to the pool that later reads
// take theirs from. The caller promises that nothing reads any buffer a
// Fill returned from now on, nor anything pointing into one (strings a
// decoder made of their bytes): another chunk's bytes will be decoded
// into them. A later Fill fails with ErrReleased; Release again does
// nothing.
func (c *Frames) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	for _, bp := range c.held {
		putPayloadBuf(bp)
	}
	c.held, c.whole, c.bufs = nil, nil, nil
}

// payloadBuf returns a buffer of n payload bytes with at least zstdSlack
// bytes of capacity past them, from the pool, held by c until Release;
// c.mu is held (or c not shared yet).
func (c *Frames) payloadBuf(n int) []byte {
	bp := getPayloadBuf(n + zstdSlack)
	c.held = append(c.held, bp)
	return (*bp)[:n]
}

// payloadBufs pools the buffers Frames decode payload bytes into, one pool
// per size class (payloadClass): a get at 10M spans decodes a ~52 KB first
// frame and a ~8 KB span frame, which were 70% of the bytes it allocated.
var payloadBufs [payloadClasses]sync.Pool

// Size classes of payloadBufs: class c holds buffers of payloadClassSize(c)
// bytes, from 4 KiB up to 1 MiB in steps of a quarter of a power of two
// (a buffer wastes at most a fifth of its bytes); larger ones are not pooled.
const (
	payloadClassMin = 12 // 4 KiB
	payloadClassMax = 20 // 1 MiB
	payloadClasses  = (payloadClassMax-payloadClassMin)*4 + 1
)

// payloadClass is the smallest class whose buffers hold n bytes, or -1
// when n is over the largest.
func payloadClass(n int) int {
	if n <= 1<<payloadClassMin {
		return 0
	}
	if n > 1<<payloadClassMax {
		return -1
	}
	e := bits.Len(uint(n-1)) - 1   // 2^e < n <= 2^(e+1)
	q := (n - 1 - 1<<e) >> (e - 2) // quarter steps past 2^e: 0..3
	return (e-payloadClassMin)*4 + q + 1
}

// payloadClassSize is the size of class c's buffers.
func payloadClassSize(c int) int {
	if c == 0 {
		return 1 << payloadClassMin
	}
	e, q := (c-1)/4+payloadClassMin, (c-1)%4
	return 1<<e + (q+1)<<(e-2)
}

func getPayloadBuf(n int) *[]byte {
	c := payloadClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if bp, ok := payloadBufs[c].Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, payloadClassSize(c))
	return &b
}

func putPayloadBuf(bp *[]byte) {
	// Only buffers of a class's exact size go back (getPayloadBuf makes
	// no other pooled size).
	if c := payloadClass(cap(*bp)); c >= 0 && payloadClassSize(c) == cap(*bp) {
		*bp = (*bp)[:cap(*bp)]
		payloadBufs[c].Put(bp)
	}
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
