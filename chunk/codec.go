package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// zlibLevel is the deflate level of zlib chunks. On CBOR trace payloads
// (BenchmarkEncode) klauspost/compress level 3 encodes about twice as fast as
// level 6 for about 3% more stored bytes. Readers do not depend on it.
const zlibLevel = 3

// zstdLevel is the level of zstd chunks of zstdFastMax bytes or more:
// klauspost/compress's SpeedFastest (about zstd level 1). Batched writes of
// method-call records (the bench workload, ~420 payload bytes per span,
// ~37 KiB frames) cost 3.6-4.3 µs of CPU per span to compress at
// SpeedDefault and 2.3-2.5 µs at SpeedFastest (the thread's CPU time, the
// machine shared), about a sixth of the daemon's CPU per batched span, for
// 5.1% more stored bytes (ratio 0.425 -> 0.447); on the OTLP load's chunks
// SpeedDefault saved 3% of the bytes for ~0.14 µs per span. Both stay far
// inside the space budget (≤ 60 B per 6-attribute span, ≤ 40 B per
// record); the CPU budget of batched ingest is the one not met. The output
// decodes no slower. Readers do not depend on it.
const zstdLevel = zstd.SpeedFastest

// zstdFastMax is the payload size below which zstd chunks are encoded at
// SpeedFastest without entropy coding (literals stored as they are,
// sequences with zstd's predefined tables). Such chunks come from
// unbatched writers (one small request, or a group commit of a few),
// where the encoder's tables are cold at each call and the fixed cost per
// chunk dominates: building the Huffman and FSE tables was about 60% of a
// small chunk's encoding. On the 2-span chunks of BenchmarkAppendSmall
// Concurrent's realistic spans (512 B to 8 KiB, mean 1.9 KiB) that is 38 ->
// 17 µs per chunk on the committer's path to the fsync, for 10% more
// stored bytes (ratio 0.608 -> 0.669). Batched writes fill chunks far
// larger than this (about 33 KiB under the OTLP load), which keep
// zstdLevel with entropy coding. The output is ordinary zstd: every reader
// decodes it.
const zstdFastMax = 8 << 10

// zstdWindow bounds the zstd window of the encoder, and so what each
// encoder state keeps: a payload up to this size is one segment (its
// window is the payload), a larger one is encoded with this window.
// Forcing one segment on a 1 MiB chunk cost ~18 MiB of retained heap per
// encoder state, this window ~3 MiB, for a few tenths of a percent more
// bytes on such chunks (chunks of OTLP loads are ~33 KiB, of batched
// writes ~200 KiB). Two encoders because the frame header of a payload
// under 256 bytes carries its content size only when it is one segment.
const zstdWindow = 256 << 10

// zstdMinSize is the payload size below which a zstd file stores a chunk
// raw without trying: a zstd frame spends 13 bytes on its header, block
// header and checksum, and entropy tables do not pay for themselves on so
// few bytes. On the 1-span chunks of realistic spans (BenchmarkAppendSmall
// Concurrent's payloads) those under 512 bytes compressed to 99.7% of their
// size (telemetrygen's 205-byte spans to 99.5%) for 13-20 µs of encoding
// each, on the committer's path to the fsync. Readers do not depend on it:
// any chunk of a compressed file may be stored raw (bit 31 of csize).
const zstdMinSize = 512

// The zstd encoders and the decoder are safe for concurrent
// EncodeAll/DecodeAll (each keeps up to GOMAXPROCS states) and hold nothing
// observable between calls, so each is created once, on first use.
var (
	zstdFastEncoder = sync.OnceValue(func() *zstd.Encoder { // payloads < zstdFastMax, frames of a chunk cut into several (zstdLeadFrame, zstdPieceFrame)
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true),
			zstd.WithSingleSegment(true), zstd.WithNoEntropyCompression(true))
		if err != nil {
			panic(err) // constant options
		}
		return e
	})
	zstdSmallEncoder = sync.OnceValue(func() *zstd.Encoder { // payloads ≤ zstdWindow
		return newZstdEncoder(zstd.WithSingleSegment(true))
	})
	zstdLargeEncoder = sync.OnceValue(func() *zstd.Encoder { // payloads > zstdWindow
		return newZstdEncoder(zstd.WithWindowSize(zstdWindow))
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxChunkSize),
			zstd.WithDecoderMaxWindow(MaxChunkSize), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(fmt.Sprintf("chunk: zstd decoder options: %v", err)) // constant options: a programming error
		}
		return d
	})
)

func newZstdEncoder(opt zstd.EOption) *zstd.Encoder { return newZstdEncoderLevel(zstdLevel, opt) }

func newZstdEncoderLevel(level zstd.EncoderLevel, opt zstd.EOption) *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderCRC(true), opt)
	if err != nil {
		panic(fmt.Sprintf("chunk: zstd encoder options: %v", err)) // constant options: a programming error
	}
	return e
}

// Codec scratch state is expensive to create (a zlib writer allocates about
// 1 MiB) and holds nothing observable between calls, so it is pooled.
var (
	lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}
	zlibWriters    sync.Pool // *zlibEncoder
	zlibReaders    sync.Pool // io.ReadCloser implementing zlib.Resetter
)

// zlibEncoder is a zlib writer bound to the buffer it appends to.
type zlibEncoder struct {
	zw  *zlib.Writer
	out limitedAppender
}

// EncodedChunk is a chunk ready to be written: its 16-byte header followed by
// its stored bytes, and the Options it was encoded for.
type EncodedChunk struct {
	buf []byte
	opt Options
	// ends, for a payload compressed as several zstd frames, is where
	// each frame ends (as in Layout.ends), for Layout.
	ends []uint64
}

// Bytes returns the chunk exactly as it is written to the file.
func (c EncodedChunk) Bytes() []byte { return c.buf }

// Len is the number of bytes the chunk occupies in the file.
func (c EncodedChunk) Len() int64 { return int64(len(c.buf)) }

// Options returns the options the chunk was encoded for.
func (c EncodedChunk) Options() Options { return c.opt }

// StoredRaw reports whether the payload is stored uncompressed because the
// codec did not make it smaller (always false in a file without compression).
func (c EncodedChunk) StoredRaw() bool {
	return len(c.buf) >= ChunkHeaderSize && binary.BigEndian.Uint32(c.buf[4:8])&rawBit != 0
}

// Layout returns the layout of the chunk, as ReadFrames would learn it
// from the chunk's bytes once written (Frames.Layout), for a payload
// compressed as several zstd frames whose first frame is a zstd frame;
// nil for any other chunk. A writer that keeps it for the chunk's offset
// lets the chunk's first read be a File.ReadFramesKnown (its header and
// the frames it decodes) instead of a read of the whole chunk. A chunk
// whose first frame is an LZ4 lead frame (what EncodeFrames writes when
// it cuts a payload) has none: the lead frame lists the others, so
// ReadFrames reads it so already.
func (c EncodedChunk) Layout() *Layout {
	if len(c.ends) < 2 || len(c.buf) < ChunkHeaderSize || isLZ4Frame(c.buf[ChunkHeaderSize:]) {
		return nil
	}
	l := &Layout{ends: c.ends}
	copy(l.hdr[:], c.buf)
	return l
}

// LogicalSize is the payload size.
func (c EncodedChunk) LogicalSize() int {
	if len(c.buf) < ChunkHeaderSize {
		return 0
	}
	return int(binary.BigEndian.Uint32(c.buf[8:12]))
}

// Encode compresses payload as opt prescribes, computes the checksum and
// returns the chunk (header + stored bytes) built in dst's storage, which is
// reused when large enough. A payload that does not shrink is stored raw,
// and so is a zstd payload under zstdMinSize bytes.
// Encode is pure and safe for concurrent use.
func Encode(payload []byte, opt Options, dst []byte) (EncodedChunk, error) {
	return EncodeFrames(payload, nil, opt, dst)
}

// EncodeFrames is Encode that, in a zstd file, compresses the payload as
// independent frames, one per piece between the payload offsets in cuts
// (ascending; offsets outside (0, len(payload)) or not after the previous
// one are left out), so that a reader of part of the payload decompresses
// only the frames holding that part (Frames): the first piece as an LZ4
// lead frame listing the others (a zstd frame when LZ4 does not shrink
// it), the others as zstd frames. Other codecs ignore cuts.
func EncodeFrames(payload []byte, cuts []int, opt Options, dst []byte) (EncodedChunk, error) {
	if err := opt.validate(); err != nil {
		return EncodedChunk{}, err
	}
	n := len(payload)
	if n > MaxChunkSize {
		return EncodedChunk{}, fmt.Errorf("%w: %d bytes, maximum %d", ErrTooLarge, n, MaxChunkSize)
	}
	buf := dst[:0]
	compressed := false
	var ends []uint64 // of the zstd frames, when several
	switch opt.Compression {
	case LZ4:
		bound := lz4.CompressBlockBound(n)
		buf = grow(buf, ChunkHeaderSize+bound)
		c := lz4Compressors.Get().(*lz4.Compressor)
		m, err := c.CompressBlock(payload, buf[ChunkHeaderSize:ChunkHeaderSize+bound])
		lz4Compressors.Put(c)
		if err == nil && m > 0 && m < n {
			buf = buf[:ChunkHeaderSize+m]
			compressed = true
		}
	case Zlib:
		if n > 0 {
			// Give up as soon as the output reaches the payload size.
			zs, _ := zlibWriters.Get().(*zlibEncoder)
			if zs == nil {
				zs = new(zlibEncoder)
				zs.zw, _ = zlib.NewWriterLevel(&zs.out, zlibLevel) // the level is valid
			} else {
				zs.zw.Reset(&zs.out)
			}
			zs.out = limitedAppender{buf: grow(buf, ChunkHeaderSize+n/2)[:ChunkHeaderSize], limit: ChunkHeaderSize + n - 1}
			_, err := zs.zw.Write(payload)
			if err == nil {
				err = zs.zw.Close()
			}
			buf = zs.out.buf
			zs.out = limitedAppender{}
			zlibWriters.Put(zs)
			compressed = err == nil
		}
	case Zstd:
		if n >= zstdMinSize {
			buf = grow(buf, ChunkHeaderSize+n/2)[:ChunkHeaderSize]
			from, lz4Lead := 0, false
			for _, c := range cuts {
				if c > from && c < n {
					if from == 0 {
						buf, lz4Lead = appendLZ4LeadFrame(payload[:c], laterFrames(cuts, c, n), buf)
						if !lz4Lead {
							buf = zstdLeadFrame(payload[:c], n, buf)
						}
					} else {
						buf = zstdPieceFrame(payload[from:c], n, buf)
					}
					ends = append(ends, uint64(c)<<32|uint64(len(buf)-ChunkHeaderSize))
					from = c
				}
			}
			if from == 0 {
				buf = zstdFrame(payload, n, buf)
			} else {
				buf = zstdPieceFrame(payload[from:], n, buf)
				ends = append(ends, uint64(n)<<32|uint64(len(buf)-ChunkHeaderSize))
			}
			if lz4Lead {
				finishLZ4LeadFrame(buf[ChunkHeaderSize:], ends)
			}
			if len(buf)-ChunkHeaderSize < n {
				compressed = true
			} else {
				buf, ends = buf[:ChunkHeaderSize], nil
			}
		}
	}
	if !compressed {
		buf = append(grow(buf, ChunkHeaderSize)[:ChunkHeaderSize], payload...)
	}
	stored := buf[ChunkHeaderSize:]
	csize := uint32(len(stored))
	if !compressed && opt.Compression != None {
		csize |= rawBit
	}
	var sum uint32
	if opt.Checksums {
		sum = crc32.ChecksumIEEE(stored)
	}
	binary.BigEndian.PutUint32(buf[0:4], ChunkMagic)
	binary.BigEndian.PutUint32(buf[4:8], csize)
	binary.BigEndian.PutUint32(buf[8:12], uint32(n))
	binary.BigEndian.PutUint32(buf[12:16], sum)
	return EncodedChunk{buf: buf, opt: opt, ends: ends}, nil
}

// laterFrames is the number of frames after the first of a payload of n
// bytes cut at cuts (as EncodeFrames cuts) whose first cut is at first.
func laterFrames(cuts []int, first, n int) int {
	later, from := 1, first
	for _, c := range cuts {
		if c > from && c < n {
			later++
			from = c
		}
	}
	return later
}

// zstdFrame appends p, a frame of a chunk of n payload bytes, compressed
// as one zstd frame (with its content size and checksum) to buf.
func zstdFrame(p []byte, n int, buf []byte) []byte {
	enc := zstdSmallEncoder
	switch {
	case n < zstdFastMax:
		enc = zstdFastEncoder
	case len(p) > zstdWindow:
		enc = zstdLargeEncoder
	}
	return enc().EncodeAll(p, buf)
}

// zstdLeadFrame is zstdFrame for the first frame of a chunk cut into
// several when LZ4 does not shrink it (else it is an LZ4 lead frame,
// appendLZ4LeadFrame; every chunk cut into frames before LZ4 lead frames
// began so): the frame every read of the chunk decodes (Frames decodes it
// up front; a trace payload keeps its string table and span index there,
// trace.ChunkEncoder.FrameCuts), so its literals are stored as they are
// (zstd.WithNoEntropyCompression, as zstdFastEncoder encodes small
// chunks): no Huffman table to build before its bytes. Its sequences
// (the matches) are still FSE-coded as the encoder chooses, so a decoder
// still sets up their tables. On the ~50 KB first frames of 500-span chunks of
// the bench workload that decodes in ~24 instead of ~32 µs, for ~20% more
// stored bytes of that frame (~2% of the chunk). Up to zstdWindow bytes;
// a larger first frame (not a layout the trace store writes) is encoded
// as any other frame.
func zstdLeadFrame(p []byte, n int, buf []byte) []byte {
	if len(p) > zstdWindow {
		return zstdFrame(p, n, buf)
	}
	return zstdFastEncoder().EncodeAll(p, buf)
}

// zstdPieceFrame is zstdFrame for a frame after the first of a chunk cut
// into several (a trace payload's span frames: a get decodes the one
// holding its span, after the lead frame), whose literals are stored as
// they are, as the lead frame's (zstdLeadFrame): a span frame's literals
// are mostly ids and times, random bytes that Huffman coding barely
// shrinks, and decoding them was half of the frame's time. On the ~11 KB
// span frames of 500-span chunks of the bench workload that decodes in
// ~9 instead of ~17-27 µs and encodes in ~1.9 instead of ~2.9 µs per span,
// for ~12% more stored bytes of those frames (+21 B per span of method
// -call records, +2 B per six-attribute span without records). Up to
// zstdWindow bytes; a larger frame (not a layout the trace store writes)
// is encoded as any other frame.
func zstdPieceFrame(p []byte, n int, buf []byte) []byte {
	if len(p) > zstdWindow {
		return zstdFrame(p, n, buf)
	}
	return zstdFastEncoder().EncodeAll(p, buf)
}

// grow returns b resized to n bytes, reallocating only when cap(b) < n.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n)
	copy(nb, b)
	return nb
}

var errIncompressible = errors.New("chunk: payload does not shrink")

// limitedAppender is an io.Writer that appends to buf and fails once buf
// would exceed limit bytes.
type limitedAppender struct {
	buf   []byte
	limit int
}

func (w *limitedAppender) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > w.limit {
		return 0, errIncompressible
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// verifyStored checks the stored bytes of a chunk against its checksum field.
func verifyStored(h chunkHeader, stored []byte, opt Options) (Reason, error) {
	if !opt.Checksums {
		return 0, nil
	}
	if sum := crc32.ChecksumIEEE(stored); sum != h.cksum {
		return Checksum, fmt.Errorf("CRC-32 of %d stored bytes is %08x, header says %08x", len(stored), sum, h.cksum)
	}
	return 0, nil
}

// decodeStored turns the stored bytes of a chunk whose header passed check
// into the payload. Verbatim chunks return stored itself; compressed chunks
// decode into dst's storage (reused when large enough). The result has
// exactly h.lsize bytes or the call fails with Reason Decompress.
func decodeStored(h chunkHeader, stored []byte, opt Options, dst []byte) ([]byte, Reason, error) {
	if h.verbatim(opt) {
		return stored, 0, nil
	}
	out := grow(dst[:0], int(h.lsize))
	switch opt.Compression {
	case LZ4:
		m, err := lz4.UncompressBlock(stored, out)
		if err != nil {
			return nil, Decompress, fmt.Errorf("lz4: %w", err)
		}
		if m != len(out) {
			return nil, Decompress, fmt.Errorf("lz4 block decodes to %d bytes, header says %d", m, len(out))
		}
		return out, 0, nil
	case Zlib:
		if err := inflate(stored, out); err != nil {
			return nil, Decompress, err
		}
		return out, 0, nil
	case Zstd:
		if err := unzstd(stored, out); err != nil {
			return nil, Decompress, err
		}
		return out, 0, nil
	}
	return nil, Decompress, fmt.Errorf("unknown compression %v", opt.Compression)
}

// inflate decodes the zlib stream src into exactly len(out) bytes and checks
// that the stream (with its Adler-32) ends there and consumes all of src.
func inflate(src, out []byte) error {
	br := bytes.NewReader(src)
	var zr io.ReadCloser
	if pooled, _ := zlibReaders.Get().(io.ReadCloser); pooled != nil {
		if err := pooled.(zlib.Resetter).Reset(br, nil); err != nil {
			zlibReaders.Put(pooled)
			return fmt.Errorf("zlib: %w", err)
		}
		zr = pooled
	} else {
		r, err := zlib.NewReader(br)
		if err != nil {
			return fmt.Errorf("zlib: %w", err)
		}
		zr = r
	}
	defer zlibReaders.Put(zr)
	if n, err := io.ReadFull(zr, out); err != nil {
		return fmt.Errorf("zlib stream yields %d of %d bytes: %w", n, len(out), err)
	}
	var one [1]byte
	if n, err := zr.Read(one[:]); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			return fmt.Errorf("zlib stream yields more than %d bytes", len(out))
		}
		return fmt.Errorf("zlib stream after %d bytes: %w", len(out), err)
	}
	if br.Len() != 0 {
		return fmt.Errorf("%d bytes after the end of the zlib stream", br.Len())
	}
	return nil
}

// unzstd decodes src, which must be one or more zstd frames, each
// declaring its content size and a content checksum, whose sizes add up to
// len(out), into out; the first may be an LZ4 lead frame. The frames are
// walked first (zstdFrames), so trailing bytes, a skippable frame (other
// than a first LZ4 lead frame whose table lists the frames found), a
// dictionary or a wrong size are rejected before any decoding; each frame
// is then decoded into its part of out's storage, writing at most that
// part, and its checksum verified.
func unzstd(src, out []byte) error {
	frames, err := zstdFrames(src, len(out))
	if err != nil {
		return err
	}
	for k, f := range frames {
		if err := f.decode(src, out, k); err != nil {
			return err
		}
	}
	return nil
}

// zstdFrameLoc locates one zstd frame of a chunk: its stored bytes
// src[storedAt:storedEnd] decode to payload[at:end].
type zstdFrameLoc struct {
	storedAt, storedEnd int
	at, end             int
}

// zstdFrames walks the zstd frames of the stored bytes src of a chunk
// whose payload is lsize bytes: one or more frames, each with a content
// size (not 0) and a content checksum and no dictionary, back to back up to
// the end of src, their content sizes adding up to lsize. The first may
// be an LZ4 lead frame (lz4frame.go), checked whole (its CRC-32), whose
// table must list exactly the frames found after it.
func zstdFrames(src []byte, lsize int) ([]zstdFrameLoc, error) {
	var frames []zstdFrameLoc
	var lead *lz4Frame
	at := 0
	for pos := 0; pos < len(src) || len(frames) == 0; {
		if pos == 0 && isLZ4Frame(src) {
			lf, err := parseLZ4Frame(src, lsize)
			if err != nil {
				return nil, fmt.Errorf("frame 0 at stored byte 0: %w", err)
			}
			lead = &lf
			frames = append(frames, zstdFrameLoc{storedEnd: lf.size, end: lf.content})
			pos, at = lf.size, lf.content
			continue
		}
		h, end, err := zstdFrameAt(src, pos, lsize-at)
		if err != nil {
			if pos > 0 && h == nil {
				return nil, fmt.Errorf("%d bytes after the end of the zstd frame ending at stored byte %d are not a zstd frame header: %w", len(src)-pos, pos, err)
			} else if h == nil {
				return nil, fmt.Errorf("zstd frame header: %w", err)
			}
			return nil, fmt.Errorf("zstd frame %d at stored byte %d: %w", len(frames), pos, err)
		}
		f := zstdFrameLoc{storedAt: pos, storedEnd: end, at: at, end: at + int(h.FrameContentSize)}
		frames = append(frames, f)
		pos, at = end, f.end
	}
	if at != lsize {
		return nil, fmt.Errorf("zstd frames hold %d bytes, header says %d (content size)", at, lsize)
	}
	if lead != nil {
		// The lead frame's table must say what the walk found.
		listed, err := framesOfLZ4Lead(*lead, len(src), lsize)
		if err == nil && !slices.Equal(listed, frames) {
			err = fmt.Errorf("LZ4 lead frame: its table lists %d later frames, other than the %d found", len(listed)-1, len(frames)-1)
		}
		if err != nil {
			return nil, err
		}
	}
	return frames, nil
}

// decode decodes frame k (f) of src into out[f.at:f.end], writing nothing
// outside it, and verifies its checksum.
func (f zstdFrameLoc) decode(src, out []byte, k int) error {
	if isLZ4Frame(src[f.storedAt:f.storedEnd]) {
		return f.lz4Error(decodeLZ4Frame(src[f.storedAt:f.storedEnd], out[f.at:f.end:f.end]), k)
	}
	part := out[f.at:f.at:f.end]
	got, err := zstdDecoder().DecodeAll(src[f.storedAt:f.storedEnd], part)
	if err != nil {
		return fmt.Errorf("zstd: frame %d at stored byte %d (payload bytes %d to %d): %w", k, f.storedAt, f.at, f.end, err)
	}
	if len(got) != f.end-f.at {
		return fmt.Errorf("zstd frame %d at stored byte %d yields %d bytes, its header says %d", k, f.storedAt, len(got), f.end-f.at)
	}
	if len(got) > 0 && &got[0] != &out[f.at] {
		copy(out[f.at:f.end], got) // not reached with the cap limit; kept so out always holds the payload
	}
	return nil
}

// decodeInto decodes frame k (f), whose stored bytes are src, into dst
// (len(dst) = the frame's content size), writing nothing past cap(dst),
// and verifies its checksum: an LZ4 lead frame when k is 0 and src is one,
// else a zstd frame that must be all of src and declare len(dst) bytes
// (it is checked as zstdFrames checks it: its bounds may come from a
// table or Layout). With at least zstdSlack bytes of capacity past
// len(dst) the zstd decoder may use them as scratch.
func (f zstdFrameLoc) decodeInto(src, dst []byte, k int) error {
	if isLZ4Frame(src) && k == 0 {
		return f.lz4Error(decodeLZ4Frame(src, dst), k)
	}
	// The frame's bounds may come from an LZ4 lead frame's table or a
	// Layout, not from a walk of these bytes: check it as the walk would.
	if h, end, err := zstdFrameAt(src, 0, len(dst)); err != nil || end != len(src) || h.FrameContentSize != uint64(len(dst)) {
		if err == nil {
			err = fmt.Errorf("a frame of %d bytes and %d payload bytes where %d and %d are expected", end, h.FrameContentSize, len(src), len(dst))
		}
		return fmt.Errorf("zstd frame %d at stored byte %d (payload bytes %d to %d): %w", k, f.storedAt, f.at, f.end, err)
	}
	got, err := zstdDecoder().DecodeAll(src, dst[:0])
	if err != nil {
		return fmt.Errorf("zstd: frame %d at stored byte %d (payload bytes %d to %d): %w", k, f.storedAt, f.at, f.end, err)
	}
	if len(got) != len(dst) {
		return fmt.Errorf("zstd frame %d at stored byte %d yields %d bytes, its header says %d", k, f.storedAt, len(got), len(dst))
	}
	if len(got) > 0 && &got[0] != &dst[0] {
		copy(dst, got) // not reached with the cap limit; kept so dst always holds the frame
	}
	return nil
}

// lz4Error names frame k (f), an LZ4 lead frame, in err (nil: nil).
func (f zstdFrameLoc) lz4Error(err error, k int) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("frame %d at stored byte %d (payload bytes %d to %d): %w", k, f.storedAt, f.at, f.end, err)
}

// zstdFrameAt checks the zstd frame that starts at src[pos:] against the
// rules of a chunk's frames: not a skippable frame, no dictionary, a
// content size of at least 1 and at most maxContent, a content checksum,
// and blocks that end inside src; it returns the frame's header and where
// the frame ends. h is nil when src[pos:] is no zstd frame header at all.
func zstdFrameAt(src []byte, pos, maxContent int) (h *zstd.Header, end int, err error) {
	h = new(zstd.Header)
	if err := h.Decode(src[pos:]); err != nil {
		return nil, 0, err
	}
	switch {
	case h.Skippable && h.SkippableID == lz4SkippableID:
		return h, 0, errors.New("LZ4 lead frame after the first frame")
	case h.Skippable:
		return h, 0, errors.New("skippable frame instead of a data frame")
	case h.DictionaryID != 0:
		return h, 0, fmt.Errorf("names dictionary %d", h.DictionaryID)
	case !h.HasFCS:
		return h, 0, errors.New("frame without a content size")
	case h.FrameContentSize == 0:
		return h, 0, errors.New("frame with no content")
	case h.FrameContentSize > uint64(maxContent):
		return h, 0, fmt.Errorf("content size %d, past the payload's end by %d", h.FrameContentSize, h.FrameContentSize-uint64(maxContent))
	case !h.HasCheckSum:
		return h, 0, errors.New("frame without a content checksum")
	}
	end, err = zstdFrameEnd(src, pos+h.HeaderSize)
	if err != nil {
		return h, 0, err
	}
	return h, end, nil
}

// zstdFrameEnd returns the offset just past the frame (with its 4-byte
// checksum) whose blocks start at off in src (RFC 8878 3.1.1.2).
func zstdFrameEnd(src []byte, off int) (int, error) {
	for {
		if len(src)-off < 3 {
			return 0, fmt.Errorf("zstd block header at stored byte %d: %d bytes left", off, len(src)-off)
		}
		bh := uint32(src[off]) | uint32(src[off+1])<<8 | uint32(src[off+2])<<16
		last, typ, size := bh&1 != 0, (bh>>1)&3, int(bh>>3)
		off += 3
		switch typ {
		case 1: // RLE: one byte repeated size times
			size = 1
		case 3:
			return 0, fmt.Errorf("zstd block at stored byte %d: reserved block type", off-3)
		}
		if len(src)-off < size {
			return 0, fmt.Errorf("zstd block at stored byte %d: %d bytes, %d left", off-3, size, len(src)-off)
		}
		off += size
		if last {
			if len(src)-off < 4 {
				return 0, fmt.Errorf("zstd frame checksum at stored byte %d: %d bytes left", off, len(src)-off)
			}
			return off + 4, nil
		}
	}
}
