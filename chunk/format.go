package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Sizes and limits of the format. See docs/format/data-file.md.
const (
	// HeaderSize is the size of the file header; the first chunk starts here.
	HeaderSize = 16
	// ChunkHeaderSize is the size of a chunk header (magic, csize, lsize, cksum).
	ChunkHeaderSize = 16
	// MaxChunkSize bounds both the stored and the logical size of a chunk.
	// A larger size read from disk is corruption, never an allocation.
	MaxChunkSize = 64 << 20

	// FileMagic is "ZTS0" read as a big-endian uint32.
	FileMagic = 0x5A545330
	// ChunkMagic is "ZCH0" read as a big-endian uint32.
	ChunkMagic = 0x5A434830

	chunkMagicString = "ZCH0"

	// rawBit in the csize field marks a chunk stored uncompressed in a file
	// whose compression is LZ4, zlib or zstd (the payload did not shrink).
	rawBit = 0x80000000

	// Maximum expansion ratios, used to bound lsize by csize for compressed
	// chunks. An LZ4 block expands at most ~255x (a match-length byte of 255
	// yields 255 output bytes); deflate at most ~1032x (a 258-byte match per
	// ~2 bits). The zlib bound is generous on purpose: the 6 bytes of zlib
	// framing count into csize. A zstd block decodes to at most 128 KiB and
	// takes at least 4 stored bytes (a 3-byte block header and one RLE
	// byte), so a zstd frame expands at most 32768x.
	maxLZ4Ratio  = 255
	maxZlibRatio = 1032
	maxZstdRatio = 32768
)

// Header flag bits (big-endian uint32 at offset 4 of the file header).
const (
	flagLZ4         = 0x01
	flagZlib        = 0x02
	flagZstd        = 0x03
	compressionMask = 0x0F
	flagCRC32       = 0x10
	knownFlags      = compressionMask | flagCRC32
)

// Compression is the codec of a data file, recorded in its header flags.
type Compression uint8

// The codecs. Their values are the flag bits of the file header.
const (
	None Compression = 0
	LZ4  Compression = flagLZ4  // raw LZ4 block (no frame)
	Zlib Compression = flagZlib // zlib stream (RFC 1950)
	Zstd Compression = flagZstd // zstd frames (RFC 8878), each with its content size and checksum
)

// String returns "none", "lz4", "zlib" or "zstd".
func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case LZ4:
		return "lz4"
	case Zlib:
		return "zlib"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// ParseCompression parses "none", "lz4", "zlib" or "zstd" (case-insensitive).
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none":
		return None, nil
	case "lz4":
		return LZ4, nil
	case "zlib":
		return Zlib, nil
	case "zstd":
		return Zstd, nil
	}
	return None, fmt.Errorf("chunk: unknown compression %q (want none, lz4, zlib or zstd)", s)
}

// Options are the per-file format choices, stored in the header flags.
type Options struct {
	Compression Compression
	// Checksums stores a CRC-32 (IEEE) of each chunk's stored bytes.
	Checksums bool
}

func (o Options) String() string {
	if o.Checksums {
		return o.Compression.String() + "+crc32"
	}
	return o.Compression.String()
}

func (o Options) validate() error {
	switch o.Compression {
	case None, LZ4, Zlib, Zstd:
		return nil
	}
	return fmt.Errorf("chunk: invalid options: %v", o.Compression)
}

func (o Options) flags() uint32 {
	f := uint32(o.Compression)
	if o.Checksums {
		f |= flagCRC32
	}
	return f
}

func optionsFromFlags(flags uint32) (Options, error) {
	if flags&^knownFlags != 0 {
		return Options{}, fmt.Errorf("unknown flag bits %#x in flags %#x", flags&^knownFlags, flags)
	}
	c := Compression(flags & compressionMask)
	if c != None && c != LZ4 && c != Zlib && c != Zstd {
		return Options{}, fmt.Errorf("unknown compression %#x in flags %#x", flags&compressionMask, flags)
	}
	return Options{Compression: c, Checksums: flags&flagCRC32 != 0}, nil
}

// Errors about the file header and the file as a whole. Callers branch on
// them with errors.Is.
var (
	// ErrTornHeader: the file is shorter than the 16-byte header (a crash
	// while the file was being created). Reinitialize repairs it.
	ErrTornHeader = errors.New("chunk: torn file header")
	// ErrBadHeader: wrong magic, unknown flag bits or a non-zero reserved field.
	ErrBadHeader = errors.New("chunk: invalid file header")
	// ErrSealed: the file carries a master checksum and refuses appends.
	ErrSealed = errors.New("chunk: data file is sealed")
	// ErrClosed: the File has been closed.
	ErrClosed = errors.New("chunk: data file is closed")
	// ErrTooLarge: a payload larger than MaxChunkSize.
	ErrTooLarge = errors.New("chunk: payload too large")
	// ErrOutOfRange: an offset that cannot hold a chunk header of this file.
	ErrOutOfRange = errors.New("chunk: offset out of range")
	// ErrMasterMismatch: the master checksum in the header differs from the
	// one computed over the chunk headers.
	ErrMasterMismatch = errors.New("chunk: master checksum mismatch")
	// ErrNotSealed: the header's master checksum is 0 (the file is open).
	ErrNotSealed = errors.New("chunk: data file is not sealed")
	// ErrCorrupt matches every *CorruptionError via errors.Is.
	ErrCorrupt = errors.New("chunk: corrupt chunk")
)

// Header is the decoded 16-byte file header.
type Header struct {
	Options Options
	// Master is the master checksum: 0 while the file is open for appends.
	Master uint32
}

func appendHeader(b []byte, h Header) []byte {
	b = binary.BigEndian.AppendUint32(b, FileMagic)
	b = binary.BigEndian.AppendUint32(b, h.Options.flags())
	b = binary.BigEndian.AppendUint32(b, h.Master)
	return binary.BigEndian.AppendUint32(b, 0)
}

// ParseHeader decodes a file header from the first 16 bytes of b. Errors wrap
// ErrTornHeader (b too short) or ErrBadHeader.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d of %d bytes", ErrTornHeader, len(b), HeaderSize)
	}
	if m := binary.BigEndian.Uint32(b[0:4]); m != FileMagic {
		return Header{}, fmt.Errorf("%w: magic %08x at offset 0, want %08x (ZTS0)", ErrBadHeader, m, FileMagic)
	}
	opt, err := optionsFromFlags(binary.BigEndian.Uint32(b[4:8]))
	if err != nil {
		return Header{}, fmt.Errorf("%w: at offset 4: %s", ErrBadHeader, err)
	}
	if r := binary.BigEndian.Uint32(b[12:16]); r != 0 {
		return Header{}, fmt.Errorf("%w: reserved field at offset 12 is %08x, want 0", ErrBadHeader, r)
	}
	return Header{Options: opt, Master: binary.BigEndian.Uint32(b[8:12])}, nil
}

// ReadHeader reads and decodes the file header of a data file of the given
// size. A size below HeaderSize yields an error wrapping ErrTornHeader.
func ReadHeader(r io.ReaderAt, size int64) (Header, error) {
	if size < HeaderSize {
		return Header{}, fmt.Errorf("%w: file has %d of %d bytes", ErrTornHeader, size, HeaderSize)
	}
	var b [HeaderSize]byte
	if n, err := r.ReadAt(b[:], 0); n < HeaderSize {
		if err == io.EOF || err == nil {
			return Header{}, fmt.Errorf("%w: read %d of %d bytes", ErrTornHeader, n, HeaderSize)
		}
		return Header{}, fmt.Errorf("chunk: read file header: %w", err)
	}
	return ParseHeader(b[:])
}

// Reason classifies a corrupt chunk.
type Reason uint8

// The reasons a chunk is rejected.
const (
	// BadMagic: the 4 bytes where a chunk should start are not "ZCH0".
	BadMagic Reason = iota + 1
	// SizeOutOfBounds: csize/lsize exceed MaxChunkSize or the codec's
	// expansion bound, disagree for a stored-raw chunk, or run past the end
	// of the file while a valid chunk follows.
	SizeOutOfBounds
	// Checksum: the CRC-32 of the stored bytes differs from the header (or
	// the checksum field is non-zero in a file without checksums).
	Checksum
	// Decompress: the stored bytes do not decode to exactly lsize bytes.
	Decompress
	// Truncated: the file ends inside the chunk (a torn tail).
	Truncated
	// Payload: the decoded payload was rejected by Scanner.Validate.
	Payload
)

func (r Reason) String() string {
	switch r {
	case BadMagic:
		return "bad magic"
	case SizeOutOfBounds:
		return "size out of bounds"
	case Checksum:
		return "checksum mismatch"
	case Decompress:
		return "decompression failed"
	case Truncated:
		return "truncated"
	case Payload:
		return "invalid payload"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// CorruptionError reports a chunk that failed validation.
type CorruptionError struct {
	Offset int64 // offset of the chunk (of its ZCH0 magic, or where it was expected)
	Reason Reason
	Err    error // detail
}

func (e *CorruptionError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("chunk at offset %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("chunk at offset %d: %s: %v", e.Offset, e.Reason, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true for every CorruptionError.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// BadRegion is a byte range of a data file that holds no valid chunk, as
// found by a Scanner: [Offset, Offset+Length).
type BadRegion struct {
	Offset, Length int64
	Reason         Reason // why the chunk expected at Offset was rejected
	Err            error
}

func (b BadRegion) String() string {
	return fmt.Sprintf("bad region [%d, %d) (%d bytes): %s: %v", b.Offset, b.Offset+b.Length, b.Length, b.Reason, b.Err)
}

// chunkHeader is a decoded chunk header.
type chunkHeader struct {
	magic  uint32
	stored uint32 // number of stored bytes after the header (csize without rawBit)
	raw    bool   // stored bytes are the payload itself
	lsize  uint32
	cksum  uint32
}

func parseChunkHeader(b []byte) chunkHeader {
	csize := binary.BigEndian.Uint32(b[4:8])
	return chunkHeader{
		magic:  binary.BigEndian.Uint32(b[0:4]),
		stored: csize &^ rawBit,
		raw:    csize&rawBit != 0,
		lsize:  binary.BigEndian.Uint32(b[8:12]),
		cksum:  binary.BigEndian.Uint32(b[12:16]),
	}
}

// put writes h as parseChunkHeader reads it into b[:ChunkHeaderSize].
func (h chunkHeader) put(b []byte) {
	csize := h.stored
	if h.raw {
		csize |= rawBit
	}
	binary.BigEndian.PutUint32(b[0:4], h.magic)
	binary.BigEndian.PutUint32(b[4:8], csize)
	binary.BigEndian.PutUint32(b[8:12], h.lsize)
	binary.BigEndian.PutUint32(b[12:16], h.cksum)
}

// verbatim reports whether the stored bytes are the payload.
func (h chunkHeader) verbatim(opt Options) bool { return h.raw || opt.Compression == None }

// check validates a chunk header against the file options without looking at
// the stored bytes. It returns the Reason and detail of the first violation.
func (h chunkHeader) check(opt Options) (Reason, error) {
	if h.magic != ChunkMagic {
		return BadMagic, fmt.Errorf("magic %08x, want %08x (ZCH0)", h.magic, uint32(ChunkMagic))
	}
	if h.stored > MaxChunkSize {
		return SizeOutOfBounds, fmt.Errorf("stored size %d exceeds the maximum %d", h.stored, MaxChunkSize)
	}
	if h.lsize > MaxChunkSize {
		return SizeOutOfBounds, fmt.Errorf("logical size %d exceeds the maximum %d", h.lsize, MaxChunkSize)
	}
	if h.raw && opt.Compression == None {
		return SizeOutOfBounds, errors.New("raw bit set in a file without compression")
	}
	if h.verbatim(opt) {
		if h.stored != h.lsize {
			return SizeOutOfBounds, fmt.Errorf("uncompressed chunk with stored size %d != logical size %d", h.stored, h.lsize)
		}
	} else {
		// Writers store a chunk raw unless compression made it strictly smaller.
		if h.stored == 0 || h.stored >= h.lsize {
			return SizeOutOfBounds, fmt.Errorf("compressed chunk with stored size %d, logical size %d", h.stored, h.lsize)
		}
		ratio := uint64(maxLZ4Ratio)
		switch opt.Compression {
		case Zlib:
			ratio = maxZlibRatio
		case Zstd:
			ratio = maxZstdRatio
		}
		if uint64(h.lsize) > ratio*uint64(h.stored) {
			return SizeOutOfBounds, fmt.Errorf("logical size %d exceeds %dx the stored size %d", h.lsize, ratio, h.stored)
		}
	}
	if !opt.Checksums && h.cksum != 0 {
		return Checksum, fmt.Errorf("checksum field %08x in a file without checksums", h.cksum)
	}
	return 0, nil
}
