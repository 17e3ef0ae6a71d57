package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// zorkaSamples is where the real Zorka agent captures live, relative to this
// package directory.
const zorkaSamples = "../../shared/testdata/zorka"

// samplePayloads returns the real CBOR bodies of the Zorka samples.
func samplePayloads(t testing.TB) map[string][]byte {
	t.Helper()
	names := []string{
		"traces1-0-agd.cbor", "traces1-1-trc.cbor",
		"zorka-tdb-sampled-tomcat-agd.cbor", "zorka-tdb-sampled-tomcat-trc.cbor",
		"zico2-traces1-0-agd.cbor", "zico2-traces1-1-trc.cbor",
	}
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(zorkaSamples, n))
		if err != nil {
			t.Fatalf("read sample: %v", err)
		}
		out[n] = b
	}
	return out
}

// allOptions is every compression × checksum combination.
var allOptions = []Options{
	{None, false}, {None, true}, {LZ4, false}, {LZ4, true}, {Zlib, false}, {Zlib, true}, {Zstd, false}, {Zstd, true},
}

// cborTrace builds a CBOR-like trace payload of about size bytes, shaped like
// what storedir writes: a tag-0x08 array of records, each a tag-0x02 map with
// small integer keys and values, string refs (tag 6 around an id), a few
// repeated attribute strings, and nested child records.
func cborTrace(rng *rand.Rand, size int) []byte {
	attrs := []string{"http.url", "/index.jsp", "http.method", "GET", "component", "http", "db.statement",
		"SELECT * FROM orders WHERE id = ?", "http.status_code", "org.apache.catalina.core.StandardEngineValve"}
	b := make([]byte, 0, size+256)
	b = append(b, 0xc8, 0x9f) // tag 8, indefinite array
	for len(b) < size {
		b = append(b, 0xc2, 0xa6) // tag 2, map(6)
		for k := 1; k <= 6; k++ {
			b = append(b, byte(k))
			switch k {
			case 1:
				b = cborUint(b, 0, rng.Uint64N(1<<40))
			case 5, 6:
				b = cborUint(b, 0, rng.Uint64N(5000))
			case 3:
				b = append(b, 0xc6)
				b = cborUint(b, 0, rng.Uint64N(300))
			default:
				b = cborUint(b, 0, rng.Uint64N(24))
			}
		}
		if rng.IntN(3) == 0 {
			// tag 3, map(2) of attributes: 2 keys and 2 values
			b = append(b, 0xc3, 0xa2)
			for range 4 {
				s := attrs[rng.IntN(len(attrs))]
				b = cborUint(b, 3, uint64(len(s)))
				b = append(b, s...)
			}
		}
	}
	return append(b, 0xff)
}

func cborUint(b []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v < 1<<8:
		return append(b, m|24, byte(v))
	case v < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(v))
	case v < 1<<32:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), v)
}

// randomBytes returns n incompressible bytes.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// image is an in-memory data file built with Encode.
type image struct {
	opt      Options
	data     []byte
	offs     []int64 // chunk offsets
	payloads [][]byte
}

func buildImage(t testing.TB, opt Options, payloads [][]byte) *image {
	t.Helper()
	im := &image{opt: opt, data: appendHeader(nil, Header{Options: opt})}
	for _, p := range payloads {
		c, err := Encode(p, opt, nil)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		im.offs = append(im.offs, int64(len(im.data)))
		im.data = append(im.data, c.Bytes()...)
		im.payloads = append(im.payloads, p)
	}
	return im
}

// end returns the offset just past chunk i.
func (im *image) end(i int) int64 {
	if i+1 < len(im.offs) {
		return im.offs[i+1]
	}
	return int64(len(im.data))
}

func (im *image) clone() []byte { return bytes.Clone(im.data) }

// scanResult is everything a Scanner reported.
type scanResult struct {
	offs     []int64
	payloads [][]byte
	bad      []BadRegion
	err      error
	end      int64
	// zeroOff, zeroLen: the zero tail (Scanner.ZeroTail).
	zeroOff, zeroLen int64
}

func scanBytes(data []byte, opt Options, validate func([]byte) error) scanResult {
	s := NewScanner(bytes.NewReader(data), int64(len(data)), opt)
	s.Validate = validate
	var r scanResult
	for s.Next() {
		off, p := s.Chunk()
		if s.Offset() <= off {
			panic("scanner did not advance")
		}
		r.offs = append(r.offs, off)
		r.payloads = append(r.payloads, bytes.Clone(p))
	}
	r.bad, r.err, r.end = s.BadRegions(), s.Err(), s.Offset()
	r.zeroOff, r.zeroLen = s.ZeroTail()
	return r
}

// checkTiling asserts that good chunks, bad regions and the zero tail tile
// [HeaderSize, size).
func checkTiling(t testing.TB, data []byte, opt Options, r scanResult) {
	t.Helper()
	type span struct{ from, to int64 }
	var spans []span
	bi := 0
	for _, off := range r.offs {
		for bi < len(r.bad) && r.bad[bi].Offset < off {
			spans = append(spans, span{r.bad[bi].Offset, r.bad[bi].Offset + r.bad[bi].Length})
			bi++
		}
		_, next, err := ReadChunkAt(bytes.NewReader(data), int64(len(data)), opt, off)
		if err != nil {
			t.Fatalf("chunk %d returned by the scanner does not read back: %v", off, err)
		}
		spans = append(spans, span{off, next})
	}
	for ; bi < len(r.bad); bi++ {
		spans = append(spans, span{r.bad[bi].Offset, r.bad[bi].Offset + r.bad[bi].Length})
	}
	if r.zeroLen > 0 {
		if !allZero(data[r.zeroOff:]) || r.zeroOff+r.zeroLen != int64(len(data)) {
			t.Fatalf("zero tail [%d,+%d) of a %d-byte file is not all the zeros that end it", r.zeroOff, r.zeroLen, len(data))
		}
		spans = append(spans, span{r.zeroOff, r.zeroOff + r.zeroLen})
	}
	pos := int64(HeaderSize)
	if len(data) < HeaderSize {
		pos = int64(len(data))
	}
	for _, s := range spans {
		if s.from != pos || s.to <= s.from {
			t.Fatalf("chunks and bad regions do not tile the file: span [%d,%d) at position %d (bad %v)", s.from, s.to, pos, r.bad)
		}
		pos = s.to
	}
	if pos < int64(len(data)) && len(data) >= HeaderSize {
		t.Fatalf("scan covered [%d,%d) of %d bytes", HeaderSize, pos, len(data))
	}
}

// faultFS wraps OSFS with injectable failures.
type faultFS struct {
	OSFS
	mu    sync.Mutex
	files []*faultFile
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (OSFile, error) {
	osf, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	ff := &faultFile{OSFile: osf}
	f.mu.Lock()
	f.files = append(f.files, ff)
	f.mu.Unlock()
	return ff, nil
}

// faultFile fails writes after writing at most writeLimit bytes (when
// writeErr is set) and fails Truncate when truncateErr is set.
type faultFile struct {
	OSFile
	mu          sync.Mutex
	writeErr    error
	writeLimit  int
	truncateErr error
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	werr, limit := f.writeErr, f.writeLimit
	f.mu.Unlock()
	if werr != nil {
		n, _ := f.OSFile.WriteAt(b[:min(limit, len(b))], off)
		return n, werr
	}
	return f.OSFile.WriteAt(b, off)
}

func (f *faultFile) Truncate(size int64) error {
	f.mu.Lock()
	terr := f.truncateErr
	f.mu.Unlock()
	if terr != nil {
		return terr
	}
	return f.OSFile.Truncate(size)
}

func (f *faultFile) set(writeErr error, writeLimit int, truncateErr error) {
	f.mu.Lock()
	f.writeErr, f.writeLimit, f.truncateErr = writeErr, writeLimit, truncateErr
	f.mu.Unlock()
}

func asCorruption(t testing.TB, err error) *CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *CorruptionError", err)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("errors.Is(%v, ErrCorrupt) is false", err)
	}
	return ce
}

// decodeChunk validates and decodes one complete chunk held in b (header and
// exactly its stored bytes). dst is scratch for decompression.
func decodeChunk(b []byte, opt Options, dst []byte) ([]byte, Reason, error) {
	h := parseChunkHeader(b)
	if reason, err := h.check(opt); reason != 0 {
		return nil, reason, err
	}
	stored := b[ChunkHeaderSize:]
	if len(stored) != int(h.stored) {
		return nil, Truncated, fmt.Errorf("%d of %d stored bytes", len(stored), h.stored)
	}
	if reason, err := verifyStored(h, stored, opt); reason != 0 {
		return nil, reason, err
	}
	return decodeStored(h, stored, opt, dst)
}
