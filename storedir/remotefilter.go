package storedir

import (
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

// TraceFilterFile is the name, inside an uploaded store's generation
// (objstore.FileKey(prefix, node, store, generation, TraceFilterFile)), of
// the object that lets a reader of the remote store skip it for a trace
// it does not hold and read any chunk with one ranged GET. The uploader
// writes the bytes DB.TraceFilter (or BuildTraceFilter, for a store
// directory no daemon holds) returns, lists the object in the manifest
// like every other file, and the reader checks it against the manifest's
// SHA-256. It is optional: without it a get-by-id downloads the store's
// indexes to look, and a chunk read fetches a read-ahead instead of the
// exact chunk.
//
// Format (integers big-endian):
//
//	"ZTF1"                    magic
//	probes  uint32            Bloom filter probes per trace id (7)
//	words   uint32            filter size in 64-bit words (>= 1)
//	nbounds uint32            chunk bounds that follow (>= 1)
//	bits    words x uint64    the filter (see traceFilter: splitmix64 double hashing)
//	bounds  nbounds x uvarint the first chunk's offset, then the difference
//	                          to each next bound (> 0); chunk i spans
//	                          [bound i, bound i+1); the last bound is where
//	                          the chunk walk ended (the data file's size, or
//	                          a damaged region)
//	crc     uint32            CRC-32 (IEEE) of everything before it
const TraceFilterFile = "tracefilter"

const traceFilterMagic = "ZTF1"

// TraceFilter returns the contents of the TraceFilterFile object for the
// sealed local store id: a Bloom filter of its trace ids (about 10 bits
// per trace) and the bounds of its chunks. It reads the store's whole
// trace-id index and walks its chunk headers; the store stays served.
func (db *DB) TraceFilter(ctx context.Context, id uint32) ([]byte, error) {
	db.mu.RLock()
	s := db.localStoreLocked(id)
	if s != nil {
		s.refs.RLock()
	}
	db.mu.RUnlock()
	if s == nil {
		return nil, fmt.Errorf("trace filter of store %s: no such local store", StoreName(id))
	}
	defer s.refs.RUnlock()
	if !s.Sealed() || s.catching.Load() {
		return nil, fmt.Errorf("trace filter of store %s: the store is not sealed, or its indexes are still catching up", StoreName(id))
	}
	return buildTraceFilter(ctx, s.meta, s.data.Path(), s.data.Size(), s.data.Options())
}

// BuildTraceFilter is DB.TraceFilter for the store directory dir, which no
// daemon holds (ztsctl re-uploading a repaired store): it opens the
// metadata index read-only.
func BuildTraceFilter(ctx context.Context, dir string) ([]byte, error) {
	meta, err := index.OpenReadOnly(filepath.Join(dir, metaDir), index.Options{})
	if err != nil {
		return nil, fmt.Errorf("trace filter of %s: %w", dir, err)
	}
	defer meta.Close()
	dataPath := filepath.Join(dir, dataFile)
	f, err := os.Open(dataPath)
	if err != nil {
		return nil, fmt.Errorf("trace filter of %s: %w", dir, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trace filter of %s: %w", dir, err)
	}
	h, err := chunk.ReadHeader(f, st.Size())
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("trace filter of %s: %w", dataPath, err)
	}
	return buildTraceFilter(ctx, meta, dataPath, st.Size(), h.Options)
}

func buildTraceFilter(ctx context.Context, meta *index.Index, dataPath string, size int64, opt chunk.Options) ([]byte, error) {
	f := newTraceFilter(meta.Stats().Traces)
	if err := meta.TraceIDs(ctx, func(id [16]byte) { f.add(trace.TraceID(id)) }); err != nil {
		return nil, fmt.Errorf("trace filter: trace ids: %w", err)
	}
	data, err := os.Open(dataPath)
	if err != nil {
		return nil, fmt.Errorf("trace filter: %w", err)
	}
	defer data.Close()
	bounds, err := chunk.ChunkBounds(data, size, opt)
	if err != nil {
		return nil, fmt.Errorf("trace filter: %s: %w", dataPath, err)
	}
	return encodeTraceFilter(f, bounds), nil
}

func encodeTraceFilter(f *traceFilter, bounds []int64) []byte {
	b := make([]byte, 0, 16+8*len(f.bits)+3*len(bounds)+4)
	b = append(b, traceFilterMagic...)
	b = binary.BigEndian.AppendUint32(b, filterProbes)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.bits)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(bounds)))
	for i := range f.bits {
		b = binary.BigEndian.AppendUint64(b, f.bits[i])
	}
	prev := int64(0)
	for _, x := range bounds {
		b = binary.AppendUvarint(b, uint64(x-prev))
		prev = x
	}
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

var errBadTraceFilter = errors.New("malformed trace filter")

// decodeTraceFilter parses a TraceFilterFile object; the filter it
// returns is ready.
func decodeTraceFilter(b []byte) (*traceFilter, []int64, error) {
	bad := func(format string, args ...any) (*traceFilter, []int64, error) {
		return nil, nil, fmt.Errorf("%w: %s", errBadTraceFilter, fmt.Sprintf(format, args...))
	}
	if len(b) < 20 || string(b[:4]) != traceFilterMagic {
		return bad("no %s header", traceFilterMagic)
	}
	body := b[:len(b)-4]
	if got, want := crc32.ChecksumIEEE(body), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return bad("checksum %08x, the file says %08x", got, want)
	}
	probes := binary.BigEndian.Uint32(b[4:8])
	words := uint64(binary.BigEndian.Uint32(b[8:12]))
	nbounds := uint64(binary.BigEndian.Uint32(b[12:16]))
	if probes != filterProbes {
		return bad("%d probes at offset 4, this ztsd uses %d", probes, filterProbes)
	}
	rest := body[16:]
	if words == 0 || words > uint64(len(rest))/8 {
		return bad("%d filter words at offset 8, %d bytes follow", words, len(rest))
	}
	if nbounds == 0 || nbounds > uint64(len(rest))-words*8 {
		return bad("%d chunk bounds at offset 12", nbounds)
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
	if len(rest) != 0 {
		return bad("%d bytes after the chunk bounds", len(rest))
	}
	f.ready.Store(true)
	return f, bounds, nil
}
