package storedir

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/trace"
)

// TraceFilterFile and TraceDirFile are the names, inside an uploaded
// store's generation (objstore.FileKey(prefix, node, store, generation,
// name)), of the two objects that let a reader of the remote store answer
// a get-by-id with a few ranged GETs instead of downloading its indexes:
// TraceFilterFile is read whole on first use and kept in memory (a Bloom
// filter of the store's trace ids, the bounds of its chunks, and the first
// trace id of each block of TraceDirFile); TraceDirFile is read one block
// per lookup (the data-file offsets of the chunks holding each trace, by
// trace id). CopySealed writes both into the copy it makes (so the
// uploader lists them in the manifest like any other file); DB.TraceFilter
// and BuildTraceFilter return their bytes. They are optional: without
// them a get-by-id downloads the store's indexes, and a chunk read fetches
// a read-ahead instead of the exact chunk.
//
// TraceFilterFile format (integers big-endian):
//
//	"ZTF1"                    magic
//	probes  uint32            Bloom filter probes per trace id (7)
//	words   uint32            filter size in 64-bit words (>= 1)
//	nbounds uint32            chunk bounds that follow (>= 1)
//	nblocks uint32            TraceDirFile blocks
//	bits    words x uint64    the filter (see traceFilter: splitmix64 double hashing)
//	bounds  nbounds x uvarint the first chunk's offset, then the difference
//	                          to each next bound (> 0); chunk i spans
//	                          [bound i, bound i+1); the last bound is where
//	                          the chunk walk ended (the data file's size, or
//	                          a damaged region)
//	blocks  nblocks x (first trace id [16]byte, length uvarint): block i
//	                          starts where block i-1 ends (block 0 at 0)
//	crc     uint32            CRC-32 (IEEE) of everything before it
//
// TraceDirFile is the blocks, each a run of entries in trace-id order
// (trace id [16]byte, n uvarint, n chunk offsets: the first, then
// ascending differences, uvarint) followed by the CRC-32 (IEEE) of the
// block's entries (uint32).
const (
	TraceFilterFile = "tracefilter"
	TraceDirFile    = "tracedir"
)

const (
	traceFilterMagic = "ZTF1"
	// traceDirBlock is the target size of a TraceDirFile block: what one
	// lookup fetches.
	traceDirBlock = 4 << 10
)

// TraceFilter returns the contents of the TraceFilterFile and TraceDirFile
// objects for the sealed local store id. It reads the store's trace index
// and walks its chunk headers; the store stays served.
func (db *DB) TraceFilter(ctx context.Context, id uint32) (filter, dir []byte, err error) {
	db.mu.RLock()
	s := db.localStoreLocked(id)
	if s != nil {
		s.refs.RLock()
	}
	db.mu.RUnlock()
	if s == nil {
		return nil, nil, fmt.Errorf("trace filter of store %s: no such local store", StoreName(id))
	}
	defer s.refs.RUnlock()
	if !s.Sealed() || s.catching.Load() {
		return nil, nil, fmt.Errorf("trace filter of store %s: the store is not sealed, or its indexes are still catching up", StoreName(id))
	}
	if !s.indexesCover(s.data.Size()) {
		return nil, nil, fmt.Errorf("trace filter of store %s: %w", StoreName(id), ErrIndexBehind)
	}
	return buildTraceFilter(ctx, s.meta, s.data.Path(), s.data.Size(), s.data.Options())
}

// BuildTraceFilter is DB.TraceFilter for the store directory dir, which no
// daemon holds (ztsctl re-uploading a repaired store): it opens the
// metadata index read-only.
func BuildTraceFilter(ctx context.Context, dir string) (filter, traceDir []byte, err error) {
	meta, err := index.OpenReadOnly(filepath.Join(dir, metaDir), index.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("trace filter of %s: %w", dir, err)
	}
	defer meta.Close()
	dataPath := filepath.Join(dir, dataFile)
	f, err := os.Open(dataPath)
	if err != nil {
		return nil, nil, fmt.Errorf("trace filter of %s: %w", dir, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("trace filter of %s: %w", dir, err)
	}
	h, err := chunk.ReadHeader(f, st.Size())
	f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("trace filter of %s: %w", dataPath, err)
	}
	return buildTraceFilter(ctx, meta, dataPath, st.Size(), h.Options)
}

// dirBlock is one TraceDirFile block as TraceFilterFile lists it.
type dirBlock struct {
	first    trace.TraceID
	off, len int64
}

func buildTraceFilter(ctx context.Context, meta *index.Index, dataPath string, size int64, opt chunk.Options) ([]byte, []byte, error) {
	f := newTraceFilter(meta.Stats().Traces)
	var dir, block []byte
	var blocks []dirBlock
	flush := func() {
		if len(block) == 0 {
			return
		}
		block = binary.BigEndian.AppendUint32(block, crc32.ChecksumIEEE(block))
		blocks[len(blocks)-1].len = int64(len(block))
		dir = append(dir, block...)
		block = block[:0]
	}
	// One scan of the index's trace keys, in trace-id order: the directory's
	// blocks are sorted by trace id as they are written.
	err := meta.TraceChunks(ctx, func(id [16]byte, offs []int64) error {
		f.add(trace.TraceID(id))
		if len(block) == 0 {
			blocks = append(blocks, dirBlock{first: id, off: int64(len(dir))})
		}
		block = append(block, id[:]...)
		block = binary.AppendUvarint(block, uint64(len(offs)))
		prev := int64(0)
		for _, o := range offs {
			block = binary.AppendUvarint(block, uint64(o-prev))
			prev = o
		}
		if len(block) >= traceDirBlock {
			flush()
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("trace filter: %w", err)
	}
	flush()
	data, err := os.Open(dataPath)
	if err != nil {
		return nil, nil, fmt.Errorf("trace filter: %w", err)
	}
	defer data.Close()
	bounds, err := chunk.ChunkBounds(data, size, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("trace filter: %s: %w", dataPath, err)
	}
	return encodeTraceFilter(f, bounds, blocks), dir, nil
}

func encodeTraceFilter(f *traceFilter, bounds []int64, blocks []dirBlock) []byte {
	b := make([]byte, 0, 20+8*len(f.bits)+3*len(bounds)+18*len(blocks)+4)
	b = append(b, traceFilterMagic...)
	b = binary.BigEndian.AppendUint32(b, filterProbes)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.bits)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(bounds)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(blocks)))
	for i := range f.bits {
		b = binary.BigEndian.AppendUint64(b, f.bits[i])
	}
	prev := int64(0)
	for _, x := range bounds {
		b = binary.AppendUvarint(b, uint64(x-prev))
		prev = x
	}
	for _, bl := range blocks {
		b = append(b, bl.first[:]...)
		b = binary.AppendUvarint(b, uint64(bl.len))
	}
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

var errBadTraceFilter = errors.New("malformed trace filter")

// decodeTraceFilter parses a TraceFilterFile object; the filter it
// returns is ready.
func decodeTraceFilter(b []byte) (*traceFilter, []int64, []dirBlock, error) {
	bad := func(format string, args ...any) (*traceFilter, []int64, []dirBlock, error) {
		return nil, nil, nil, fmt.Errorf("%w: %s", errBadTraceFilter, fmt.Sprintf(format, args...))
	}
	if len(b) < 24 || string(b[:4]) != traceFilterMagic {
		return bad("no %s header", traceFilterMagic)
	}
	body := b[:len(b)-4]
	if got, want := crc32.ChecksumIEEE(body), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return bad("checksum %08x, the file says %08x", got, want)
	}
	probes := binary.BigEndian.Uint32(b[4:8])
	words := uint64(binary.BigEndian.Uint32(b[8:12]))
	nbounds := uint64(binary.BigEndian.Uint32(b[12:16]))
	nblocks := uint64(binary.BigEndian.Uint32(b[16:20]))
	if probes != filterProbes {
		return bad("%d probes at offset 4, this ztsd uses %d", probes, filterProbes)
	}
	rest := body[20:]
	if words == 0 || words > uint64(len(rest))/8 {
		return bad("%d filter words at offset 8, %d bytes follow", words, len(rest))
	}
	if nbounds == 0 || nbounds > uint64(len(rest))-words*8 {
		return bad("%d chunk bounds at offset 12", nbounds)
	}
	if nblocks > (uint64(len(rest))-words*8)/17 {
		return bad("%d directory blocks at offset 16", nblocks)
	}
	f := &traceFilter{bits: make([]uint64, words), m: words * 64}
	for i := range f.bits {
		f.bits[i] = binary.BigEndian.Uint64(rest[8*i:])
	}
	rest = rest[8*words:]
	bounds := make([]int64, 0, nbounds)
	prev := int64(0)
	for i := uint64(0); i < nbounds; i++ {
		d, n := binary.Uvarint(rest)
		if n <= 0 || d > chunk.MaxChunkSize+chunk.ChunkHeaderSize && i > 0 || d > 1<<40 {
			return bad("chunk bound %d does not decode or is out of range", i)
		}
		if i > 0 && d == 0 {
			return bad("chunk bound %d repeats the one before", i)
		}
		prev += int64(d)
		bounds = append(bounds, prev)
		rest = rest[n:]
	}
	blocks := make([]dirBlock, 0, nblocks)
	var off int64
	for i := uint64(0); i < nblocks; i++ {
		if len(rest) < 17 {
			return bad("directory block %d is cut short", i)
		}
		var bl dirBlock
		copy(bl.first[:], rest[:16])
		l, n := binary.Uvarint(rest[16:])
		if n <= 0 || l < 4 || l > 1<<30 {
			return bad("directory block %d: length does not decode or is out of range", i)
		}
		if i > 0 && bytes.Compare(bl.first[:], blocks[i-1].first[:]) <= 0 {
			return bad("directory block %d is out of trace-id order", i)
		}
		bl.off, bl.len = off, int64(l)
		off += int64(l)
		blocks = append(blocks, bl)
		rest = rest[16+n:]
	}
	if len(rest) != 0 {
		return bad("%d bytes after the directory blocks", len(rest))
	}
	f.ready.Store(true)
	return f, bounds, blocks, nil
}

// lookupDirBlock finds id's chunk offsets in one TraceDirFile block.
func lookupDirBlock(block []byte, id trace.TraceID) ([]int64, error) {
	if len(block) < 4 {
		return nil, fmt.Errorf("%w: directory block of %d bytes", errBadTraceFilter, len(block))
	}
	body := block[:len(block)-4]
	if got, want := crc32.ChecksumIEEE(body), binary.BigEndian.Uint32(block[len(block)-4:]); got != want {
		return nil, fmt.Errorf("%w: directory block checksum %08x, the block says %08x", errBadTraceFilter, got, want)
	}
	for len(body) > 0 {
		if len(body) < 17 {
			return nil, fmt.Errorf("%w: directory entry cut short", errBadTraceFilter)
		}
		match := bytes.Equal(body[:16], id[:])
		n, k := binary.Uvarint(body[16:])
		if k <= 0 || n > uint64(len(body)) {
			return nil, fmt.Errorf("%w: directory entry count does not decode", errBadTraceFilter)
		}
		body = body[16+k:]
		var offs []int64
		prev := int64(0)
		for j := uint64(0); j < n; j++ {
			d, k := binary.Uvarint(body)
			if k <= 0 || d > 1<<40 {
				return nil, fmt.Errorf("%w: directory offset does not decode", errBadTraceFilter)
			}
			prev += int64(d)
			if match {
				offs = append(offs, prev)
			}
			body = body[k:]
		}
		if match {
			return offs, nil
		}
	}
	return nil, nil
}
