package recovery

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// goodChunk is one chunk that validated completely.
type goodChunk struct {
	off, next int64
	spans     []*trace.Span
}

// scanResult is what a scan found besides the good chunks.
type scanResult struct {
	bad []chunk.BadRegion
	// end is where the good data ends: the end of the last good chunk, or
	// the offset of a torn tail.
	end int64
	// zeroOff, zeroLen: the zero tail after the last chunk (zeroLen 0:
	// none), space the writer preallocated; the data ends at zeroOff.
	zeroOff, zeroLen int64
	err              error // I/O error or cancellation; the scan is incomplete
}

// scanConfig configures scanChunks.
type scanConfig struct {
	opt      chunk.Options
	limits   trace.Limits
	progress func(scanned int64)
}

// progressStep is how often (in scanned bytes) progress is reported.
const progressStep = 1 << 20

// scanChunks validates every chunk of the data file r (size bytes) and
// sends each good one, in file order, to out; it closes out when done.
// Validation is complete: header bounds, checksum, decompression and a full
// decode of the payload (the decoded spans are what is sent, so the payload
// is decoded once). Bad regions are reported in the result.
func scanChunks(ctx context.Context, r io.ReaderAt, size int64, cfg scanConfig, out chan<- goodChunk) scanResult {
	defer close(out)
	sc := chunk.NewScanner(r, size, cfg.opt)
	var decoded []*trace.Span
	sc.Validate = func(payload []byte) error {
		spans, err := trace.DecodeChunk(payload, cfg.limits)
		decoded = spans
		return err
	}
	res := scanResult{end: chunk.HeaderSize}
	lastReport := int64(0)
	for sc.Next() {
		off, _ := sc.Chunk()
		c := goodChunk{off: off, next: sc.Offset(), spans: decoded}
		select {
		case out <- c:
		case <-ctx.Done():
			res.err = ctx.Err()
			res.bad = sc.BadRegions()
			return res
		}
		res.end = c.next
		if cfg.progress != nil && c.next-lastReport >= progressStep {
			cfg.progress(c.next)
			lastReport = c.next
		}
	}
	res.bad = sc.BadRegions()
	if err := sc.Err(); err != nil {
		res.err = err
		return res
	}
	res.zeroOff, res.zeroLen = sc.ZeroTail()
	if n := len(res.bad); n > 0 && res.bad[n-1].Offset+res.bad[n-1].Length >= size {
		res.end = res.bad[n-1].Offset
	}
	if cfg.progress != nil {
		cfg.progress(size)
	}
	return res
}

// rawHeader is the file header as found on disk, parsed or not.
type rawHeader struct {
	bytes  []byte // the bytes present (up to HeaderSize)
	header chunk.Header
	err    error // from chunk.ParseHeader: ErrTornHeader or ErrBadHeader
}

// flags and master as stored, whatever their validity.
func (h rawHeader) storedMaster() uint32 {
	if len(h.bytes) < chunk.HeaderSize {
		return 0
	}
	return binary.BigEndian.Uint32(h.bytes[8:12])
}

func readRawHeader(r io.ReaderAt, size int64) (rawHeader, error) {
	n := min(size, chunk.HeaderSize)
	b := make([]byte, n)
	if n > 0 {
		if got, err := r.ReadAt(b, 0); got < int(n) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return rawHeader{}, fmt.Errorf("read file header: %w", err)
		}
	}
	h, err := chunk.ParseHeader(b)
	return rawHeader{bytes: b, header: h, err: err}, nil
}

// encodeHeader renders a file header (docs/format/data-file.md): magic,
// flags (compression value, 0x10 for CRC-32), master checksum, reserved 0.
func encodeHeader(opt chunk.Options, master uint32) []byte {
	b := make([]byte, chunk.HeaderSize)
	binary.BigEndian.PutUint32(b[0:4], chunk.FileMagic)
	flags := uint32(opt.Compression)
	if opt.Checksums {
		flags |= 0x10
	}
	binary.BigEndian.PutUint32(b[4:8], flags)
	binary.BigEndian.PutUint32(b[8:12], master)
	return b
}

// allOptions are the candidate options when a header cannot be trusted.
var allOptions = []chunk.Options{
	{Compression: chunk.LZ4, Checksums: true},
	{Compression: chunk.Zlib, Checksums: true},
	{Compression: chunk.Zstd, Checksums: true},
	{Compression: chunk.None, Checksums: true},
	{Compression: chunk.LZ4},
	{Compression: chunk.Zlib},
	{Compression: chunk.Zstd},
	{Compression: chunk.None},
}

// probeBytes bounds how much of the file scoring one candidate reads.
const probeBytes = 8 << 20

// countValid returns how many chunks validate completely (payload decoded)
// in the first probeBytes of the data when read with opt.
func countValid(r io.ReaderAt, size int64, opt chunk.Options, lim trace.Limits) int {
	sc := chunk.NewScanner(r, min(size, chunk.HeaderSize+probeBytes), opt)
	sc.Validate = func(p []byte) error {
		_, err := trace.DecodeChunk(p, lim)
		return err
	}
	n := 0
	for sc.Next() {
		n++
	}
	return n
}

// chooseOptions picks the options to read a data file with when its header
// is damaged or disagrees with config.props: the candidate that validates
// the most chunks, preferring (in this order) the header's own options,
// config.props' options, then allOptions.
func chooseOptions(r io.ReaderAt, size int64, prefer []chunk.Options, lim trace.Limits) (chunk.Options, int) {
	var cands []chunk.Options
	seen := map[chunk.Options]bool{}
	for _, o := range append(append([]chunk.Options(nil), prefer...), allOptions...) {
		if !seen[o] {
			seen[o] = true
			cands = append(cands, o)
		}
	}
	best, bestN := cands[0], -1
	for _, o := range cands {
		if n := countValid(r, size, o, lim); n > bestN {
			best, bestN = o, n
		}
	}
	return best, bestN
}
