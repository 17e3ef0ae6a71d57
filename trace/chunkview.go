package trace

// This file is ChunkView: random access to the spans of one chunk payload
// (codec.go's format), for readers that take a few spans of a chunk at a
// time — a get by trace id, a page of search results — through a cache of
// views (storedir's chunk cache).
//
// Design:
//   - A view reads the payload's prologue once: the string table's entry
//     heads (where each string lies: 4 bytes an entry, no string copied),
//     the span index and the span list head. Strings are substrings of one
//     region holding the table's bytes, checked to be UTF-8 the first time
//     a span read uses them (a bit per entry), so a span read copies no
//     string and a view never checks an entry twice.
//   - A span is found from the nearest span before it whose start is
//     known: one the span index marks (every SpanIndexStride-th span of a
//     version 2 payload) or one an earlier read walked to; a read walks
//     over fewer than SpanIndexStride spans, each at most once per view.
//   - A partial view (NewPartialChunkView) asks a Filler for the bytes it
//     reads: the prologue, then for a span the span index stretch holding
//     it. Over chunk.Frames, a payload stored as zstd frames cut at marked
//     spans (ChunkEncoder.FrameCuts), a read decompresses the first frame
//     (string table and span index) and the frame holding its span, not
//     the whole chunk. A payload cut elsewhere still reads: a prologue
//     that does not end in the first range is read from the whole payload.
//   - Every string a span uses is resolved through the whole table, so a
//     read needs the whole first frame: most strings of the bench workload
//     (method names, attribute keys) are shared by the spans of a chunk,
//     and a trace's strings lie all over the table (measured: a trace of a
//     500-span chunk uses strings in 4 to 5 of the 7 8-KiB pieces of its
//     52 KB table; ordered by how many traces use each, still ~31 KB), so
//     decoding only the pieces a get needs would save little.
//   - Lifetime: a span read from a view shares the view's string table (no
//     string is copied), so it is valid as long as the table's buffer is.
//     A partial view's buffers are its filler's: Release gives them back
//     (chunk.Frames: to a pool, where later reads decode into them), for a
//     caller that knows no span read from the view is still in use
//     (storedir counts a view's holders); a view never released leaves
//     them to the garbage collector.
//   - Errors: a malformed payload is a *CorruptPayloadError naming the
//     payload offset, whichever range of it a read had; a Fill error is
//     returned as is (chunk.Frames: a *chunk.CorruptionError naming the
//     frame).

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
)

// ChunkView gives random access to the spans of one chunk payload, for
// readers that take several spans from the same chunk over time (a chunk
// cache). Its string table is copied once up front (NewChunkView; a
// partial view uses the filler's buffer, which never changes); each string
// is a substring of it, checked to be UTF-8 the first time a span read
// uses it. A span is found from the nearest span before it whose start is
// known: one the payload's span index marks (version 2: every
// SpanIndexStride-th span), or one an earlier call walked to; so a read
// walks over fewer than SpanIndexStride spans of an indexed payload, and
// each span of the chunk is walked over at most once however many reads
// follow. It is safe for concurrent use; the payload must not change while
// the view is in use.
type ChunkView struct {
	p    []byte // the whole payload (nil for a partial view)
	size int    // payload bytes
	lim  Limits
	// fill, when set, gives the buffers holding the ranges of the payload
	// a read needs (NewPartialChunkView).
	fill Filler
	// region is one copy of the string table's bytes (from payload offset
	// base), ents locates each entry in the payload (see chunkDecoder),
	// and checked has the bit of each entry found to be UTF-8 by a read
	// that used it.
	region  string
	base    int32
	ents    []int32
	checked []atomic.Uint64
	spans   int
	first   int32 // where span 0 starts
	stride  int
	marks   []spanMark

	mu   sync.Mutex
	offs []int32 // offs[i] is where span i starts; 0 until known (allocated on first use)
	// arrs, when set, lent ents, checked and offs; Release gives them back.
	arrs *viewArrays
}

// NewChunkView reads the payload's string table heads, span index and span
// list head. Malformed input yields a *CorruptPayloadError, as from
// DecodeChunk; a string that is not UTF-8 does when a span using it is
// read (as from DecodeChunkSpan).
func NewChunkView(payload []byte, lim Limits) (*ChunkView, error) {
	lim = lim.withDefaults()
	d := chunkDecoder{p: payload, lim: lim, lazy: true, viewTable: true}
	n, err := d.prologue()
	if err != nil {
		return nil, err
	}
	v := newChunkView(&d, n, len(payload), string(payload[d.tableStart:d.tableEnd]), nil)
	v.p = payload
	return v, nil
}

// A Filler gives the bytes of a payload range by range, decoding them on
// demand (chunk.Frames: a chunk compressed as independent frames).
type Filler interface {
	// Size is the payload's length in bytes.
	Size() int
	// Fill returns a buffer holding payload bytes [base, base+len(buf)),
	// a range that includes [lo, hi) (an empty range counts as the byte at
	// lo). It is safe for concurrent use, and a buffer it returned never
	// changes again.
	Fill(lo, hi int) (buf []byte, base int, err error)
}

// NewPartialChunkView is NewChunkView over a payload whose bytes fill
// gives range by range. The view asks for what it reads: the start of the
// payload up to the span list (the string table and span index), and for
// a span the stretch of the span index it lies in (from the marked span at
// or before it to the next marked span), where it walks and decodes; so a
// view reads a span of a payload stored as frames cut at marked spans
// (ChunkEncoder.FrameCuts) by decompressing only the frame holding the
// prologue and the frame holding the span. The view's string table is the
// buffer fill returned for the prologue (not a copy: fill's buffers never
// change). A Fill error is returned as is.
func NewPartialChunkView(fill Filler, lim Limits) (*ChunkView, error) {
	lim = lim.withDefaults()
	size := fill.Size()
	if size == 0 {
		return NewChunkView(nil, lim)
	}
	p, base, err := fill.Fill(0, 1)
	if err != nil {
		return nil, err
	}
	if base != 0 || len(p) > size {
		return nil, fmt.Errorf("chunk payload: the first range filled is bytes %d to %d of %d", base, base+len(p), size)
	}
	// A view whose filler gives its buffers back on Release gives back
	// its own arrays too (viewArrays).
	var arrs *viewArrays
	if _, ok := fill.(Releaser); ok {
		arrs = viewArraysPool.Get().(*viewArrays)
	}
	d := chunkDecoder{p: p, lim: lim, lazy: true, viewTable: true, ents: arrs.entsBuf()}
	if len(p) < size {
		d.size = size
	}
	n, err := d.prologue()
	if err != nil && len(p) < size {
		// The prologue does not end where the first range does (not a
		// layout the writer makes): read it from the whole payload.
		if p, base, err = fill.Fill(0, size); err != nil {
			arrs.put()
			return nil, err
		}
		if base != 0 || len(p) != size {
			arrs.put()
			return nil, fmt.Errorf("chunk payload: the whole payload filled is bytes %d to %d of %d", base, base+len(p), size)
		}
		d = chunkDecoder{p: p, lim: lim, lazy: true, viewTable: true, ents: arrs.entsBuf()}
		n, err = d.prologue()
	}
	if err != nil {
		arrs.put()
		return nil, err
	}
	var region string
	if d.tableEnd > d.tableStart {
		region = unsafe.String(&p[d.tableStart], d.tableEnd-d.tableStart)
	}
	v := newChunkView(&d, n, size, region, arrs)
	v.fill = fill
	return v, nil
}

// viewArrays are the arrays a partial view over a Releaser keeps (string
// table entry heads, checked bits, span starts): pooled, so that a get at
// 10M spans (a view of ~2,000 entries and 500 spans: ~10 KB) allocates
// none; Release puts them back. A pooled array's contents are stale:
// ents is written whole by the prologue, checked and offs are cleared
// when taken.
type viewArrays struct {
	ents    []int32
	checked []atomic.Uint64
	offs    []int32
}

var viewArraysPool = sync.Pool{New: func() any { return new(viewArrays) }}

// maxPooledViewArray bounds the entries of an array the pool keeps.
const maxPooledViewArray = 1 << 16

func (a *viewArrays) entsBuf() []int32 {
	if a == nil {
		return nil
	}
	return a.ents[:0]
}

// checkedBits returns n cleared words (from a's when a is set).
func (a *viewArrays) checkedBits(n int) []atomic.Uint64 {
	if a == nil || cap(a.checked) < n {
		return make([]atomic.Uint64, n)
	}
	c := a.checked[:n]
	for i := range c {
		c[i].Store(0)
	}
	return c
}

// spanStarts returns n cleared span starts (from a's when a is set).
func (a *viewArrays) spanStarts(n int) []int32 {
	if a == nil || cap(a.offs) < n {
		return make([]int32, n)
	}
	o := a.offs[:n]
	clear(o)
	return o
}

// put gives a's arrays back to the pool (nothing for a nil a).
func (a *viewArrays) put() {
	if a == nil {
		return
	}
	if cap(a.ents) > maxPooledViewArray || cap(a.checked) > maxPooledViewArray || cap(a.offs) > maxPooledViewArray {
		return
	}
	viewArraysPool.Put(a)
}

// newChunkView is the view of a payload of size bytes whose prologue d
// has read (n spans), with region the string table's bytes; arrs, when
// set, lends the view its arrays (d.ents is arrs's already).
func newChunkView(d *chunkDecoder, n, size int, region string, arrs *viewArrays) *ChunkView {
	v := &ChunkView{size: size, lim: d.lim, ents: d.ents, region: region,
		base: int32(d.tableStart), checked: arrs.checkedBits((d.nstrs + 63) / 64),
		spans: n, first: int32(d.off), stride: d.stride, marks: d.marks, arrs: arrs}
	if arrs != nil {
		arrs.ents, arrs.checked = d.ents, v.checked
	}
	return v
}

// str returns string table entry id (in range), a substring of the view's
// one copy of the table, checking that it is UTF-8 on its first use.
func (v *ChunkView) str(id int) (string, error) {
	if v.checked[uint(id)/64].Load()&(1<<(uint(id)%64)) != 0 {
		return v.entry(id), nil
	}
	return v.check(id)
}

// entry is string table entry id (in range), unchecked.
func (v *ChunkView) entry(id int) string {
	h, end := v.ents[id]-v.base, v.ents[id+1]-v.base
	return v.region[h+headLen(v.region[h]) : end]
}

// check is str's first use of entry id.
func (v *ChunkView) check(id int) (string, error) {
	s := v.entry(id)
	if !utf8.ValidString(s) {
		return "", &CorruptPayloadError{Offset: int(v.ents[id]), Reason: fmt.Sprintf("string table entry %d: not valid UTF-8", id)}
	}
	v.checked[uint(id)/64].Or(1 << (uint(id) % 64))
	return s, nil
}

// A Releaser is a Filler whose buffers can be given back for reuse
// (chunk.Frames).
type Releaser interface {
	// Release gives the buffers back: no buffer Fill returned may be read
	// after it, and a later Fill fails.
	Release()
}

// Release gives the buffers of a partial view's filler back for reuse when
// the filler is a Releaser (chunk.Frames: to its pool of payload buffers);
// a view over a payload held whole (NewChunkView) leaves it to the garbage
// collector. The caller promises that nothing read from the view is used
// after it: the spans a read returned, their strings (substrings of the
// view's string table, which lives in a filler buffer) and attributes
// included. A read of the view after Release fails with the filler's
// error.
func (v *ChunkView) Release() {
	r, ok := v.fill.(Releaser)
	if !ok {
		return
	}
	r.Release()
	v.mu.Lock()
	defer v.mu.Unlock()
	if a := v.arrs; a != nil {
		v.arrs = nil
		a.put()
	}
}

// Len is the number of spans in the chunk.
func (v *ChunkView) Len() int { return v.spans }

// Span decodes span i with its record tree, as DecodeChunkSpan does. An
// index outside the span list yields an error wrapping ErrNoSuchSpan.
func (v *ChunkView) Span(i int) (*Span, error) { return v.decode(i, false) }

// Summary decodes span i without its record tree, as DecodeChunkSummaries
// does, except that Root, when the span has one, holds the root record's
// own fields (method, start, duration, calls, errors, open) without
// attributes, exception or children: what a search result shows.
func (v *ChunkView) Summary(i int) (*Span, error) { return v.decode(i, true) }

func (v *ChunkView) decode(i int, summary bool) (*Span, error) {
	off, p, err := v.offset(i)
	if err != nil {
		return nil, err
	}
	d := chunkDecoder{p: p.b, off: off, base: p.base, lim: v.lim, view: v, nstrs: len(v.ents) - 1, summary: summary, shallowRoot: summary}
	d.rebase()
	s, err := d.span()
	if err != nil {
		return nil, fmt.Errorf("chunk payload span %d: %w", i, err)
	}
	return s, nil
}

// stretch returns where the span index stretch holding span i (in range)
// starts and ends: from the marked span at or before i (span 0 for the
// first stretch) to the next marked span, or to the end of the payload.
// Every span of a well-formed payload lies inside its stretch.
func (v *ChunkView) stretch(i int) (lo, hi int) {
	lo, hi = int(v.first), v.size
	if v.stride > 0 {
		if g := i / v.stride; g > 0 {
			lo = int(v.marks[g-1].off)
		}
		if g := i / v.stride; g < len(v.marks) {
			hi = int(v.marks[g].off)
		}
	}
	return lo, max(lo, hi)
}

// offset returns where span i starts and the payload up to the end of its
// stretch (see window), walking (once) over the spans between it and the
// nearest span before it whose start is known. The walk stays inside i's
// stretch of the span index, so it finds what DecodeChunkSpan finds.
func (v *ChunkView) offset(i int) (int, window, error) {
	if i < 0 || i >= v.spans {
		return 0, window{}, fmt.Errorf("chunk payload span %d: %w (chunk holds %d spans)", i, ErrNoSuchSpan, v.spans)
	}
	lo, hi := v.stretch(i)
	p := window{b: v.p[:min(hi, len(v.p))]}
	if v.fill != nil {
		b, base, err := v.fill.Fill(lo, hi)
		if err != nil {
			return 0, window{}, err
		}
		if base > lo || base+len(b) < hi {
			return 0, window{}, fmt.Errorf("chunk payload span %d: bytes %d to %d asked, %d to %d filled", i, lo, hi, base, base+len(b))
		}
		p = window{b: b[:hi-base], base: base}
	}
	if i == 0 {
		return int(v.first), p, nil
	}
	if v.stride > 0 && i%v.stride == 0 {
		return int(v.marks[i/v.stride-1].off), p, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.offs == nil {
		v.offs = v.arrs.spanStarts(v.spans)
		if v.arrs != nil {
			v.arrs.offs = v.offs
		}
	}
	if off := v.offs[i]; off != 0 {
		return int(off), p, nil
	}
	j := i - 1 // the nearest known start before i
	g := 0     // the marked span starting i's stretch
	if v.stride > 0 {
		g = i / v.stride * v.stride
	}
	for j > g && v.offs[j] == 0 {
		j--
	}
	off := int(v.offs[j])
	if j == g {
		off = lo
	}
	d := chunkDecoder{p: p.b, off: off, base: p.base, lim: v.lim}
	d.rebase()
	for ; j < i; j++ {
		if err := d.skip(); err != nil {
			return 0, window{}, fmt.Errorf("chunk payload span %d: %w", j, err)
		}
		v.offs[j+1] = int32(d.base + d.off)
	}
	return d.base + d.off, p, nil
}

// window is a range of a payload's bytes: b holds payload bytes from
// offset base on.
type window struct {
	b    []byte
	base int
}
