package chunk

import (
	"fmt"
	"io"
)

// ChunkBounds walks the chunk headers of a data file of the given size read
// through r (HeaderSize to size, stored bytes skipped, not verified) and
// returns the offset of every chunk followed by the offset where the walk
// ended: chunk i spans [bounds[i], bounds[i+1]). The walk stops early, with
// the bounds found so far, at the first header that fails its check or runs
// past size (a damaged region: readers fall back to reading the header
// there); end < size says so. Only an I/O error is returned as an error.
// It is what a reader of a remote data file needs to fetch any chunk in one
// ranged read.
func ChunkBounds(r io.ReaderAt, size int64, opt Options) (bounds []int64, err error) {
	var hb [ChunkHeaderSize]byte
	off := int64(HeaderSize)
	for off < size && size-off >= ChunkHeaderSize {
		if err := readFull(r, hb[:], off); err != nil {
			return nil, fmt.Errorf("chunk bounds: header at %d: %w", off, err)
		}
		h := parseChunkHeader(hb[:])
		if reason, _ := h.check(opt); reason != 0 {
			break
		}
		next := off + ChunkHeaderSize + int64(h.stored)
		if next > size {
			break
		}
		bounds = append(bounds, off)
		off = next
	}
	return append(bounds, off), nil
}
