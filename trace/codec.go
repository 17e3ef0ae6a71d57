package trace

// This file is the chunk payload codec: the CBOR bytes one ZCH0 chunk of a
// data file holds once decompressed. docs/format/chunk-payload.md is its
// byte-level contract; keep the two in step.
//
// Invariants:
//   - Every payload is self-contained: it carries its own string table and
//     every string ref (tag 6) indexes that table, so a damaged chunk never
//     makes another chunk unreadable.
//   - Encoding is deterministic: equal spans (in equal order) encode to equal
//     bytes. Info map keys are written in ascending order, attributes in their
//     (sorted) order, strings are numbered in first-use order.
//   - Everything EncodeChunk writes, DecodeChunk accepts with DefaultLimits,
//     and decodes to spans Equal to the input (Span.Children is never stored).
//   - The decoder never panics, never recurses deeper than its limits and
//     bounds every length it reads by the bytes that remain, so memory is at
//     most a small constant factor of the payload size.
//
// The bounds and orders the encoder and decoder check (depths, cause chain,
// attribute key order) and their error texts are walk.go's; Limits is in
// limits.go; random access to the spans of one payload (ChunkView) is in
// chunkview.go. This file keeps the CBOR bytes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// CBOR major types, shifted into the initial byte.
const (
	majorUint   = 0 << 5
	majorNegInt = 1 << 5
	majorBytes  = 2 << 5
	majorText   = 3 << 5
	majorArray  = 4 << 5
	majorMap    = 5 << 5
	majorTag    = 6 << 5
	majorSimple = 7 << 5
)

// CBOR tags of the chunk payload.
const (
	tagInfo        = 0x02 // method-call info map
	tagSpanAttrs   = 0x03 // custom attributes of the span
	tagRecordAttrs = 0x04 // custom attributes of one record
	tagStringRef   = 0x06 // index into the chunk's string table
	tagStringTable = 0x07 // the chunk's string table
	tagRecord      = 0x08 // a record (the span's root record carries the span)
	tagSpanIndex   = 0x09 // where every SpanIndexStride-th span starts (payload version 2)
	tagException   = 0x22 // exception: [class, message, stack, cause]
)

// Method-call info map keys. 0x01–0x0e follow specs/zts-trace-store.md;
// 0x11–0x13 are span ids and source; 0x14–0x17 carry the root record's own
// values where they differ from the span's.
const (
	keyTraceID      = 0x01 // 16-byte string; span record only, required
	keyChunkNum     = 0x02 // uint; span record only
	keyTimestampMS  = 0x05 // TSTART in ms since the epoch (floor); span record only
	keyDuration     = 0x06 // int ns
	keyType         = 0x07 // string ref; span record only
	keyRecs         = 0x08 // int; span record only
	keyCalls        = 0x09 // int
	keyErrors       = 0x0a // int
	keyFlags        = 0x0b // uint, flag* bits
	keyStart        = 0x0c // int ns: since the epoch (span), since the span start (child record)
	keyMethod       = 0x0e // string ref; absent on a span record ⇔ Span.Root == nil
	keyParent       = 0x11 // uint; span record only
	keySpan         = 0x12 // uint; span record only
	keySource       = 0x13 // string ref; span record only
	keyRootStart    = 0x14 // int ns: Root.StartNS; absent means 0
	keyRootDuration = 0x15 // int ns: Root.DurationNS; absent means equal to DURATION
	keyRootCalls    = 0x16 // int: Root.Calls; absent means equal to CALLS
	keyRootErrors   = 0x17 // int: Root.Errors; absent means equal to ERRORS
)

// SpanIndexStride is how many spans apart the span index of a payload
// marks span starts: a reader of one span walks over at most
// SpanIndexStride-1 spans before it instead of all of them. A batch of at
// most SpanIndexStride spans is written without an index (version 1).
const SpanIndexStride = 16

// FLAGS bits.
const (
	flagError = 0x01 // Span.Error (span record only)
	flagOpen  = 0x02 // Record.Open
)

// CorruptPayloadError reports a chunk payload that cannot be decoded:
// malformed, truncated, or beyond the decoder's limits.
type CorruptPayloadError struct {
	Offset int // byte offset in the payload where the bad item starts
	Reason string
}

func (e *CorruptPayloadError) Error() string {
	return fmt.Sprintf("corrupt chunk payload at offset %d: %s", e.Offset, e.Reason)
}

// ErrNoSuchSpan is returned by DecodeChunkSpan for an index outside the
// chunk's span list.
var ErrNoSuchSpan = errors.New("no such span in chunk")

// ---------------------------------------------------------------------------
// Encoding

// EncodeChunk encodes spans into one chunk payload appended to dst. The
// output is deterministic. It fails (returning dst unchanged) for a nil span,
// attributes not sorted by unique key, a string that is not UTF-8, nesting
// beyond MaxDepth / MaxValueDepth, or a batch beyond DefaultLimits.
// Writers that encode many chunks should reuse a ChunkEncoder instead.
func EncodeChunk(dst []byte, spans []*Span) ([]byte, error) {
	var c ChunkEncoder
	return c.Encode(dst, spans)
}

// ChunkEncoder encodes chunk payloads exactly as EncodeChunk does, keeping
// its string map and buffers between calls so that a writer encoding chunk
// after chunk does not reallocate them. The zero value is ready to use. It
// is not safe for concurrent use.
type ChunkEncoder struct {
	e chunkEncoder
	// bodyAt is where the span list's first span starts in the payload
	// Encode last wrote, size that payload's length (FrameCuts).
	bodyAt, size int
}

// retainLimit bounds the buffer capacity a ChunkEncoder keeps between calls.
const retainLimit = 16 << 20

// Encode is EncodeChunk using c's buffers.
func (c *ChunkEncoder) Encode(dst []byte, spans []*Span) ([]byte, error) {
	e := &c.e
	e.reset()
	c.bodyAt, c.size = 0, 0
	start := len(dst)
	defer e.release()
	if len(spans) > e.lim.MaxSpans {
		return dst, fmt.Errorf("encode chunk: %d spans, more than %d", len(spans), e.lim.MaxSpans)
	}
	for i, s := range spans {
		if s == nil {
			return dst, fmt.Errorf("encode chunk: span %d is nil", i)
		}
		if i > 0 && i%SpanIndexStride == 0 {
			e.marks = append(e.marks, len(e.body))
		}
		e.body = e.appendSpan(e.body, s)
		if e.err != nil {
			return dst, fmt.Errorf("encode chunk: span %d (%s/%s): %w", i, s.TraceID, s.SpanID, e.err)
		}
	}
	if len(e.marks) == 0 {
		dst = append(dst, majorArray|2) // version 1: no span index
	} else {
		dst = append(dst, majorArray|3)
	}
	dst = append(dst, majorTag|tagStringTable)
	dst = appendHead(dst, majorArray, uint64(len(e.refs)))
	dst = append(dst, e.table...)
	if len(e.marks) > 0 {
		// The span index: the distance from each marked span's start to
		// the previous one's (the first from the span list's first span).
		dst = append(dst, majorTag|tagSpanIndex, majorArray|2)
		dst = appendHead(dst, majorUint, SpanIndexStride)
		dst = appendHead(dst, majorArray, uint64(len(e.marks)))
		prev := 0
		for _, m := range e.marks {
			dst = appendHead(dst, majorUint, uint64(m-prev))
			prev = m
		}
	}
	dst = appendHead(dst, majorArray, uint64(len(spans)))
	c.bodyAt = len(dst) - start
	dst = append(dst, e.body...)
	c.size = len(dst) - start
	return dst, nil
}

// FrameCuts appends to cuts where the payload the last successful Encode
// wrote may be cut into pieces that are compressed independently (one
// zstd frame each, chunk.EncodeFrames), so that a reader of one span
// decompresses only the piece holding the string table and span index and
// the piece holding the span: the start of the span list's first span,
// then each span the span index marks that starts at least target bytes
// after the previous cut. A span index stretch (the spans from one marked
// span to the next) is never cut, so ChunkView reads a span from one
// piece. It appends nothing for a payload without a span index or of at
// most 2·target bytes. The offsets are from the start of that payload.
func (c *ChunkEncoder) FrameCuts(cuts []int, target int) []int {
	return frameCuts(cuts, c.e.marks, c.bodyAt, c.size, target)
}

type chunkEncoder struct {
	lim     Limits
	refs    map[string]uint32 // string → index in the table
	table   []byte            // encoded table entries, in index order
	body    []byte            // encoded span list entries
	marks   []int             // where in body spans SpanIndexStride, 2·SpanIndexStride, … start
	records int
	err     error // first error; encoding stops being meaningful after it
}

func (e *chunkEncoder) reset() {
	if e.refs == nil {
		e.lim = DefaultLimits()
		e.refs = make(map[string]uint32, 256)
	}
	e.table, e.body, e.marks = e.table[:0], e.body[:0], e.marks[:0]
	e.records, e.err = 0, nil
}

// release drops references to the caller's strings and oversized buffers.
func (e *chunkEncoder) release() {
	if len(e.refs) > retainLimit/64 {
		e.refs = nil
	} else {
		clear(e.refs)
	}
	if cap(e.table) > retainLimit || cap(e.body) > retainLimit {
		e.table, e.body = nil, nil
	}
}

func (e *chunkEncoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
}

// appendRef appends a string ref to s, adding s to the table on first use.
func (e *chunkEncoder) appendRef(b []byte, s string) []byte {
	id, ok := e.refs[s]
	if !ok {
		switch {
		case len(s) > e.lim.MaxStringLen:
			e.fail("string of %d bytes, longer than %d", len(s), e.lim.MaxStringLen)
			return b
		case !utf8.ValidString(s):
			e.fail("string %q is not valid UTF-8", truncateForError(s))
			return b
		case len(e.refs) >= e.lim.MaxStrings:
			e.fail("more than %d distinct strings", e.lim.MaxStrings)
			return b
		}
		id = uint32(len(e.refs))
		e.refs[s] = id
		e.table = appendHead(e.table, majorText, uint64(len(s)))
		e.table = append(e.table, s...)
	}
	if id < 24 {
		return append(b, majorTag|tagStringRef, byte(id))
	}
	b = append(b, majorTag|tagStringRef)
	return appendHead(b, majorUint, uint64(id))
}

func (e *chunkEncoder) countRecord() {
	e.records++
	if e.records > e.lim.MaxRecords {
		e.fail("more than %d records in one chunk", e.lim.MaxRecords)
	}
}

func (e *chunkEncoder) appendSpan(b []byte, s *Span) []byte {
	r := s.Root
	elems := 1
	if len(s.Attrs) > 0 {
		elems++
	}
	if r != nil {
		e.countRecord()
		if len(r.Attrs) > 0 {
			elems++
		}
		if r.Exception != nil {
			elems++
		}
		elems += len(r.Children)
	}
	b = append(b, majorTag|tagRecord)
	b = appendHead(b, majorArray, uint64(elems))

	b = append(b, majorTag|tagInfo, 0) // map header patched below (< 24 keys)
	mapAt := len(b) - 1
	pairs := 0
	b = append(b, keyTraceID, majorBytes|16)
	b = append(b, s.TraceID[:]...)
	pairs++
	if s.ChunkNum != 0 {
		b = appendHead(append(b, keyChunkNum), majorUint, uint64(s.ChunkNum))
		pairs++
	}
	b = appendIntPair(b, keyTimestampMS, floorMillis(s.StartNS), &pairs)
	b = appendIntPair(b, keyDuration, s.DurationNS, &pairs)
	if s.Type != "" {
		b = e.appendRef(append(b, keyType), s.Type)
		pairs++
	}
	b = appendIntPair(b, keyRecs, s.Recs, &pairs)
	b = appendIntPair(b, keyCalls, s.Calls, &pairs)
	b = appendIntPair(b, keyErrors, s.Errors, &pairs)
	var flags uint64
	if s.Error {
		flags |= flagError
	}
	if r != nil && r.Open {
		flags |= flagOpen
	}
	if flags != 0 {
		b = append(b, keyFlags, byte(flags))
		pairs++
	}
	b = appendIntPair(b, keyStart, s.StartNS, &pairs)
	if r != nil {
		b = e.appendRef(append(b, keyMethod), r.Method)
		pairs++
	}
	if s.ParentID != 0 {
		b = appendHead(append(b, keyParent), majorUint, uint64(s.ParentID))
		pairs++
	}
	if s.SpanID != 0 {
		b = appendHead(append(b, keySpan), majorUint, uint64(s.SpanID))
		pairs++
	}
	if s.Source != "" {
		b = e.appendRef(append(b, keySource), s.Source)
		pairs++
	}
	if r != nil {
		b = appendIntPair(b, keyRootStart, r.StartNS, &pairs)
		if r.DurationNS != s.DurationNS {
			b = appendInt(append(b, keyRootDuration), r.DurationNS)
			pairs++
		}
		if r.Calls != s.Calls {
			b = appendInt(append(b, keyRootCalls), r.Calls)
			pairs++
		}
		if r.Errors != s.Errors {
			b = appendInt(append(b, keyRootErrors), r.Errors)
			pairs++
		}
	}
	b[mapAt] = majorMap | byte(pairs)

	if len(s.Attrs) > 0 {
		b = e.appendAttrs(b, tagSpanAttrs, s.Attrs)
	}
	if r != nil {
		b = e.appendRecordTail(b, r, 1)
	}
	return b
}

// appendRecordTail appends the elements that follow a record's info map:
// record attributes, exception, child records.
func (e *chunkEncoder) appendRecordTail(b []byte, r *Record, depth int) []byte {
	if len(r.Attrs) > 0 {
		b = e.appendAttrs(b, tagRecordAttrs, r.Attrs)
	}
	if r.Exception != nil {
		b = e.appendException(b, r.Exception)
	}
	for _, c := range r.Children {
		if e.err != nil {
			return b
		}
		b = e.appendChild(b, c, depth+1)
	}
	return b
}

func (e *chunkEncoder) appendChild(b []byte, r *Record, depth int) []byte {
	if r == nil {
		e.fail("nil child record at depth %d", depth)
		return b
	}
	if recordTooDeep(depth) {
		e.fail(msgRecordTooDeep, MaxDepth)
		return b
	}
	e.countRecord()
	elems := 1 + len(r.Children)
	if len(r.Attrs) > 0 {
		elems++
	}
	if r.Exception != nil {
		elems++
	}
	b = append(b, majorTag|tagRecord)
	b = appendHead(b, majorArray, uint64(elems))
	b = append(b, majorTag|tagInfo, 0)
	mapAt := len(b) - 1
	pairs := 1 // METHOD
	b = appendIntPair(b, keyDuration, r.DurationNS, &pairs)
	b = appendIntPair(b, keyCalls, r.Calls, &pairs)
	b = appendIntPair(b, keyErrors, r.Errors, &pairs)
	if r.Open {
		b = append(b, keyFlags, flagOpen)
		pairs++
	}
	b = appendIntPair(b, keyStart, r.StartNS, &pairs)
	b = e.appendRef(append(b, keyMethod), r.Method)
	b[mapAt] = majorMap | byte(pairs)
	return e.appendRecordTail(b, r, depth)
}

func (e *chunkEncoder) appendAttrs(b []byte, tag byte, a Attrs) []byte {
	b = append(b, majorTag|tag)
	return e.appendAttrMap(b, a, 1)
}

// appendAttrMap appends a CBOR map of string ref → value; depth is the
// nesting depth of its values (1 for an attribute's own value).
func (e *chunkEncoder) appendAttrMap(b []byte, a Attrs, depth int) []byte {
	b = appendHead(b, majorMap, uint64(len(a)))
	for i := range a {
		if i > 0 && keyOutOfOrder(a[i-1].Key, a[i].Key) {
			e.fail(msgAttrsUnsorted, truncateForError(a[i].Key))
			return b
		}
		b = e.appendRef(b, a[i].Key)
		b = e.appendValue(b, &a[i].Value, depth)
	}
	return b
}

func (e *chunkEncoder) appendValue(b []byte, v *Value, depth int) []byte {
	if valueTooDeep(depth) {
		e.fail(msgValueTooDeep, MaxValueDepth)
		return b
	}
	switch v.Kind {
	case KindNull:
		return append(b, majorSimple|22)
	case KindString:
		return e.appendRef(b, v.Str)
	case KindInt:
		return appendInt(b, v.Int)
	case KindFloat:
		return appendFloat(b, v.Float)
	case KindBool:
		if v.Bool {
			return append(b, majorSimple|21)
		}
		return append(b, majorSimple|20)
	case KindList:
		b = appendHead(b, majorArray, uint64(len(v.List)))
		for i := range v.List {
			if e.err != nil {
				return b
			}
			b = e.appendValue(b, &v.List[i], depth+1)
		}
		return b
	case KindMap:
		return e.appendAttrMap(b, v.Map, depth+1)
	}
	e.fail(msgUnknownKind, v.Kind)
	return b
}

// appendException appends x and its cause chain: each exception's last
// element is its cause (another tagged exception) or null.
func (e *chunkEncoder) appendException(b []byte, x *Exception) []byte {
	for n := 1; x != nil; n++ {
		if causeChainTooLong(n, MaxDepth) {
			e.fail(msgCauseChainTooLong, MaxDepth)
			return b
		}
		b = append(b, majorTag|24, tagException, majorArray|4)
		b = e.appendRef(b, x.Class)
		b = e.appendRef(b, x.Message)
		b = appendHead(b, majorArray, uint64(len(x.Stack)))
		for i := range x.Stack {
			f := &x.Stack[i]
			b = append(b, majorArray|4)
			b = e.appendRef(b, f.Class)
			b = e.appendRef(b, f.Method)
			b = e.appendRef(b, f.File)
			b = appendInt(b, f.Line)
		}
		x = x.Cause
	}
	return append(b, majorSimple|22)
}

// appendHead appends a CBOR initial byte of the given major type with the
// shortest argument encoding of n.
func appendHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= math.MaxUint8:
		return append(b, major|24, byte(n))
	case n <= math.MaxUint16:
		return append(b, major|25, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint64(append(b, major|27), n)
}

// appendIntPair appends the info map pair key → v, counting it in pairs,
// unless v is zero (an absent int key means 0).
func appendIntPair(b []byte, key byte, v int64, pairs *int) []byte {
	if v != 0 {
		b = appendInt(append(b, key), v)
		*pairs++
	}
	return b
}

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendHead(b, majorUint, uint64(v))
	}
	return appendHead(b, majorNegInt, uint64(-1-v))
}

// appendFloat appends f as the shortest CBOR float (16, 32 or 64 bits) that
// holds it exactly. Every NaN is written as the canonical half-precision
// quiet NaN 0xf97e00.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) {
		return append(b, majorSimple|25, 0x7e, 0x00)
	}
	f32 := float32(f)
	if float64(f32) != f {
		return binary.BigEndian.AppendUint64(append(b, majorSimple|27), math.Float64bits(f))
	}
	if h, ok := float32ToHalf(f32); ok {
		return append(b, majorSimple|25, byte(h>>8), byte(h))
	}
	return binary.BigEndian.AppendUint32(append(b, majorSimple|26), math.Float32bits(f32))
}

// float32ToHalf returns the IEEE 754 half-precision bits of f when f is
// exactly representable in half precision (f must not be NaN).
func float32ToHalf(f float32) (uint16, bool) {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int(u>>23) & 0xff
	mant := u & 0x7fffff
	switch exp {
	case 0xff: // infinity (NaN is handled by the caller)
		return sign | 0x7c00, mant == 0
	case 0: // zero, or a float32 subnormal (far below half's range)
		return sign, mant == 0
	}
	e := exp - 127
	switch {
	case e >= -14 && e <= 15: // half normal: 10 mantissa bits
		if mant&0x1fff != 0 {
			return 0, false
		}
		return sign | uint16(e+15)<<10 | uint16(mant>>13), true
	case e >= -24 && e < -14: // half subnormal: value = m × 2^-24
		full := mant | 1<<23
		shift := uint(-(e + 1)) // 14..23
		if full&(1<<shift-1) != 0 {
			return 0, false
		}
		return sign | uint16(full>>shift), true
	}
	return 0, false
}

// halfToFloat64 converts IEEE 754 half-precision bits to float64.
func halfToFloat64(h uint16) float64 {
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	var f float64
	switch exp {
	case 0:
		f = math.Ldexp(mant, -24)
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		f = math.Inf(1)
	default:
		f = math.Ldexp(mant+1024, exp-25)
	}
	if h&0x8000 != 0 {
		f = -f
	}
	return f
}

// floorMillis converts ns since the epoch to whole ms, rounding down.
func floorMillis(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}

func truncateForError(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// ---------------------------------------------------------------------------
// Decoding

// DecodeChunk decodes a whole chunk payload. Every allocation is bounded by
// lim (zero fields mean DefaultLimits) and by the payload size; any
// malformed, truncated or over-limit input yields a *CorruptPayloadError.
// The decoded strings share one copy of the chunk's string table; the
// records and child lists of its spans are cut from shared arrays, each
// list ending at its capacity (so appending to one copies it).
func DecodeChunk(payload []byte, lim Limits) ([]*Span, error) {
	d := chunkDecoder{p: payload, lim: lim.withDefaults()}
	return d.all()
}

// DecodeChunkSummaries decodes every span of a chunk without its record
// tree: all span-level fields and Attrs are set, Root is nil (the trees are
// checked for well-formedness and skipped). It is what rebuilding the
// indexes needs, several times faster than DecodeChunk. Summaries must not
// be stored back: they have lost their records.
func DecodeChunkSummaries(payload []byte, lim Limits) ([]*Span, error) {
	d := chunkDecoder{p: payload, lim: lim.withDefaults(), lazy: true, summary: true}
	return d.all()
}

// all decodes the prologue and then every span of the span list, as d's
// mode (full or summary) builds them.
func (d *chunkDecoder) all() ([]*Span, error) {
	n, err := d.prologue()
	if err != nil {
		return nil, err
	}
	spans := make([]*Span, n)
	for i := range spans {
		if err := d.checkMark(i); err != nil {
			return nil, err
		}
		if spans[i], err = d.span(); err != nil {
			return nil, fmt.Errorf("chunk payload span %d: %w", i, err)
		}
	}
	if d.off != len(d.p) {
		return nil, d.corrupt(d.off, "%d bytes after the span list", len(d.p)-d.off)
	}
	return spans, nil
}

// ChunkStrings returns the chunk's string table: every distinct string its
// spans use (methods, types, sources, attribute keys and string values,
// exception texts), in first-use order. It reads nothing past the table.
func ChunkStrings(payload []byte, lim Limits) ([]string, error) {
	d := chunkDecoder{p: payload, lim: lim.withDefaults()}
	if _, err := d.prologue(); err != nil {
		return nil, err
	}
	return d.strs, nil
}

// DecodeChunkSpan decodes only the span at index i of the chunk's span list,
// skipping the others without building them. An index outside the list
// yields an error wrapping ErrNoSuchSpan.
func DecodeChunkSpan(payload []byte, i int, lim Limits) (*Span, error) {
	spans, err := DecodeChunkSpans(payload, []int{i}, lim)
	if err != nil {
		return nil, err
	}
	return spans[0], nil
}

// DecodeChunkSpans decodes the spans at the given indexes of the chunk's
// span list in one pass (for reading several spans of one trace), skipping
// the others without building them; the result is in the order of idx,
// which may hold repeats. Only the strings these spans use are copied out of
// the payload. An index outside the list yields an error wrapping
// ErrNoSuchSpan.
func DecodeChunkSpans(payload []byte, idx []int, lim Limits) ([]*Span, error) {
	d := chunkDecoder{p: payload, lim: lim.withDefaults(), lazy: true}
	n, err := d.prologue()
	if err != nil {
		return nil, err
	}
	for _, i := range idx {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("chunk payload span %d: %w (chunk holds %d spans)", i, ErrNoSuchSpan, n)
		}
	}
	want := make(map[int]*Span, len(idx))
	for _, i := range idx {
		want[i] = nil
	}
	order := make([]int, 0, len(want))
	for i := range want {
		order = append(order, i)
	}
	slices.Sort(order)
	cur := 0 // the span starting at d.off
	for _, i := range order {
		// Jump to the marked span nearest before i (a version 2 payload),
		// then walk over the rest.
		for cur = d.seekSpan(i, cur); cur < i; cur++ {
			if err := d.checkMark(cur); err != nil {
				return nil, err
			}
			if err := d.skip(); err != nil {
				return nil, fmt.Errorf("chunk payload span %d: %w", cur, err)
			}
		}
		if err := d.checkMark(cur); err != nil {
			return nil, err
		}
		s, err := d.spanInStretch(i)
		if err != nil {
			return nil, fmt.Errorf("chunk payload span %d: %w", i, err)
		}
		want[i] = s
		cur++
	}
	out := make([]*Span, len(idx))
	for k, i := range idx {
		out[k] = want[i]
	}
	return out, nil
}

type chunkDecoder struct {
	p   []byte
	off int
	// base, when not 0, is the payload offset of p[0]: p is a window of
	// the payload (a frame of it, ChunkView), off is relative to it, and
	// errors name payload offsets (rebase).
	base int
	lim  Limits
	// size, when not 0, is the length of the whole payload of which p is
	// a prefix (NewPartialChunkView reads the prologue from the part a
	// fill made available): what span index entries are checked against.
	size int
	// strs is the string table. Eagerly, every entry is a substring of one
	// copy of the table region; lazily, entries are copied and checked on
	// first use from their location in ents ("" until then): ents[i] is
	// where entry i's head starts in the payload, ents[nstrs] where the
	// table ends, so entry i's bytes run from the end of its head to
	// ents[i+1] (4 bytes an entry: the ~2,000 entries of a 500-span chunk
	// of the bench workload take 8 KB, not a large allocation).
	strs  []string
	lazy  bool
	ents  []int32
	nstrs int // entries in the string table
	// viewTable (with lazy) leaves the table to a ChunkView: prologue
	// locates the entries and allocates no strs; view, when set, resolves
	// every ref through the view's shared table.
	viewTable bool
	view      *ChunkView
	// tableStart and tableEnd delimit the string table's entries.
	tableStart, tableEnd int
	summary              bool // skip record trees (DecodeChunkSummaries)
	// shallowRoot keeps, in summary mode, the root record's own fields
	// (method, times, counts; no attributes, exception or children): the
	// name a search result shows.
	shallowRoot bool
	// stride and marks are the span index of a version 2 payload (stride
	// 0: none): marks[k] locates span (k+1)·stride.
	stride  int
	marks   []spanMark
	indexAt int // where the span index starts
	listAt  int // where the span list's first span starts
	records int
	// nextRef is one past the highest string ref read so far;
	// refsOutOfOrder is set when a ref skipped a table entry never named
	// before it (noteRef).
	nextRef        int
	refsOutOfOrder bool
	// Records and the child lists of records are carved from shared
	// arrays (slab) to save allocations.
	recs slab[Record]
	kids slab[*Record]
}

// slab hands out small slices of shared arrays: a decoded chunk's records
// and their child lists take one allocation per array, not one each.
// Every slice it hands out has exactly the capacity asked for, so
// appending to one never writes into the next.
type slab[T any] struct {
	free   []T
	arrays int // arrays allocated so far
}

// maxCarve is the largest slice a slab hands out; longer ones are
// allocated on their own.
const maxCarve = 64

// take returns a slice of length 0 and capacity n (n <= maxCarve). fit
// bounds a new array's length (what the bytes left to decode can hold):
// arrays grow 8, 16, … 256 elements, so decoding one small span
// (DecodeChunkSpan, ChunkView) does not allocate 256 of them.
func (s *slab[T]) take(n, fit int) []T {
	if len(s.free) < n {
		s.free = make([]T, max(n, min(8<<min(s.arrays, 5), fit)))
		s.arrays++
	}
	out := s.free[:0:n]
	s.free = s.free[n:]
	return out
}

// rebase makes d.off, a payload offset, relative to d.p (which holds the
// payload's bytes from d.base on).
func (d *chunkDecoder) rebase() { d.off -= d.base }

// maxPrealloc bounds the elements a decoder allocates for a list or map
// before decoding them.
const maxPrealloc = 64

// headLen is the length of a CBOR head whose initial byte is ib, of one
// the prologue read (additional information 0 to 27).
func headLen(ib byte) int32 {
	switch ai := ib & 0x1f; {
	case ai < 24:
		return 1
	case ai == 24:
		return 2
	case ai == 25:
		return 3
	case ai == 26:
		return 5
	}
	return 9
}

func (d *chunkDecoder) corrupt(off int, format string, args ...any) error {
	return &CorruptPayloadError{Offset: d.base + off, Reason: fmt.Sprintf(format, args...)}
}

func (d *chunkDecoder) remaining() int { return len(d.p) - d.off }

// payloadLen is the length of the whole payload (see size).
func (d *chunkDecoder) payloadLen() int {
	if d.size != 0 {
		return d.size
	}
	return len(d.p)
}

// head reads one CBOR initial byte and its argument. Indefinite lengths and
// reserved additional information are rejected: the format uses neither.
func (d *chunkDecoder) head() (major, ai byte, arg uint64, err error) {
	p, off := d.p, d.off
	if off >= len(p) {
		return 0, 0, 0, d.corrupt(off, "unexpected end of payload")
	}
	ib := p[off]
	major, ai = ib&0xe0, ib&0x1f
	left := len(p) - off - 1
	switch {
	case ai < 24:
		d.off = off + 1
		return major, ai, uint64(ai), nil
	case ai == 24 && left >= 1:
		d.off = off + 2
		return major, ai, uint64(p[off+1]), nil
	case ai == 25 && left >= 2:
		d.off = off + 3
		return major, ai, uint64(binary.BigEndian.Uint16(p[off+1:])), nil
	case ai == 26 && left >= 4:
		d.off = off + 5
		return major, ai, uint64(binary.BigEndian.Uint32(p[off+1:])), nil
	case ai == 27 && left >= 8:
		d.off = off + 9
		return major, ai, binary.BigEndian.Uint64(p[off+1:]), nil
	case ai <= 27:
		return 0, 0, 0, d.corrupt(off, "initial byte 0x%02x: truncated argument", ib)
	}
	return 0, 0, 0, d.corrupt(off, "initial byte 0x%02x: indefinite length or reserved value not allowed", ib)
}

// expectTag reads a tag head and checks its number.
func (d *chunkDecoder) expectTag(tag uint64, what string) error {
	at := d.off
	major, _, arg, err := d.head()
	if err != nil {
		return err
	}
	if major != majorTag || arg != tag {
		return d.corrupt(at, "%s: want tag %d, got %s", what, tag, describeHead(major, arg))
	}
	return nil
}

// length reads an array (or map) head and bounds its length by the bytes
// left, at minBytes per element.
func (d *chunkDecoder) length(want byte, minBytes int, what string) (int, error) {
	at := d.off
	major, _, arg, err := d.head()
	if err != nil {
		return 0, err
	}
	if major != want {
		return 0, d.corrupt(at, "%s: want %s, got %s", what, majorName(want), describeHead(major, arg))
	}
	if left := d.payloadLen() - d.off; arg > uint64(left/minBytes) {
		return 0, d.corrupt(at, "%s: %d elements cannot fit in the %d bytes left", what, arg, left)
	}
	return int(arg), nil
}

func (d *chunkDecoder) int64Value(what string) (int64, error) {
	at := d.off
	major, _, arg, err := d.head()
	if err != nil {
		return 0, err
	}
	switch major {
	case majorUint:
		if arg > math.MaxInt64 {
			return 0, d.corrupt(at, "%s: integer %d overflows int64", what, arg)
		}
		return int64(arg), nil
	case majorNegInt:
		if arg > math.MaxInt64 {
			return 0, d.corrupt(at, "%s: integer -1-%d overflows int64", what, arg)
		}
		return -1 - int64(arg), nil
	}
	return 0, d.corrupt(at, "%s: want an integer, got %s", what, describeHead(major, arg))
}

func (d *chunkDecoder) uintValue(what string) (uint64, error) {
	at := d.off
	major, _, arg, err := d.head()
	if err != nil {
		return 0, err
	}
	if major != majorUint {
		return 0, d.corrupt(at, "%s: want an unsigned integer, got %s", what, describeHead(major, arg))
	}
	return arg, nil
}

// ref reads a string ref and resolves it in the string table.
func (d *chunkDecoder) ref(what string) (string, error) {
	p, at := d.p, d.off
	if at+1 < len(p) && p[at] == majorTag|tagStringRef && p[at+1] < 24 { // fast path
		if id := int(p[at+1]); id < d.nstrs {
			d.off = at + 2
			d.noteRef(id)
			if d.view == nil {
				if s := d.strs[id]; s != "" || !d.lazy {
					return s, nil
				}
			}
			return d.str(id)
		}
	}
	if err := d.expectTag(tagStringRef, what); err != nil {
		return "", err
	}
	id, err := d.uintValue(what)
	if err != nil {
		return "", err
	}
	if id >= uint64(d.nstrs) {
		return "", d.corrupt(at, "%s: string ref %d outside the string table of %d entries", what, id, d.nstrs)
	}
	d.noteRef(int(id))
	return d.str(int(id))
}

// noteRef records the order of the refs read (DecodeChunkLayout): a ref
// past every one before it must name the next string of the table.
func (d *chunkDecoder) noteRef(id int) {
	if id >= d.nextRef {
		d.refsOutOfOrder = d.refsOutOfOrder || id > d.nextRef
		d.nextRef = id + 1
	}
}

// str returns table entry id (< d.nstrs).
func (d *chunkDecoder) str(id int) (string, error) {
	if d.view != nil {
		return d.view.str(id)
	}
	if s := d.strs[id]; s != "" || !d.lazy {
		return s, nil
	}
	return d.resolve(id)
}

// resolve copies out and checks table entry id (lazy mode).
func (d *chunkDecoder) resolve(id int) (string, error) {
	h, end := d.ents[id], d.ents[id+1]
	b := d.p[h+headLen(d.p[h]) : end]
	if len(b) == 0 {
		return "", nil
	}
	if !utf8.Valid(b) {
		return "", d.corrupt(int(h), "string table entry %d: not valid UTF-8", id)
	}
	d.strs[id] = string(b)
	return d.strs[id], nil
}

// prologue reads the outer array, the string table and the span list head,
// returning the number of spans.
func (d *chunkDecoder) prologue() (int, error) {
	if len(d.p) == 0 {
		return 0, d.corrupt(0, "empty payload")
	}
	if len(d.p) > math.MaxInt32 { // table entries hold int32 offsets
		return 0, d.corrupt(0, "payload of %d bytes, more than 2 GiB", len(d.p))
	}
	version2 := d.p[0] == majorArray|3
	if d.p[0] != majorArray|2 && !version2 {
		return 0, d.corrupt(0, "payload: initial byte 0x%02x, want 0x82 (array of 2) or 0x83 (array of 3, with a span index)", d.p[0])
	}
	d.off = 1
	if err := d.expectTag(tagStringTable, "string table"); err != nil {
		return 0, err
	}
	at := d.off
	n, err := d.length(majorArray, 1, "string table")
	if err != nil {
		return 0, err
	}
	if n > d.lim.MaxStrings {
		return 0, d.corrupt(at, "string table: %d entries, more than the limit %d", n, d.lim.MaxStrings)
	}
	start := d.off
	if cap(d.ents) > n { // a buffer the caller lends (ChunkView's pool): every entry is written below
		d.ents = d.ents[:n+1]
	} else {
		d.ents = make([]int32, n+1)
	}
	p, maxLen := d.p, d.lim.MaxStringLen
	for i := range n {
		// Fast path: a text head of one or two bytes (strings under 256
		// bytes, nearly every entry) whose bytes are all there and, in
		// lazy mode, not checked here. Every other case takes the general
		// path below, which reports what is wrong.
		if at := d.off; at+1 < len(p) && d.lazy {
			ib, n, hl := p[at], -1, 1
			if ib>>5 == majorText>>5 {
				switch ai := ib & 0x1f; {
				case ai < 24:
					n = int(ai)
				case ai == 24:
					n, hl = int(p[at+1]), 2
				}
			}
			if n >= 0 && n <= maxLen && n <= len(p)-at-hl {
				d.ents[i] = int32(at)
				d.off = at + hl + n
				continue
			}
		}
		at := d.off
		major, _, arg, err := d.head()
		if err != nil {
			return 0, err
		}
		if major != majorText {
			return 0, d.corrupt(at, "string table entry %d: want a text string, got %s", i, describeHead(major, arg))
		}
		if arg > uint64(d.lim.MaxStringLen) {
			return 0, d.corrupt(at, "string table entry %d: %d bytes, more than the limit %d", i, arg, d.lim.MaxStringLen)
		}
		if arg > uint64(d.remaining()) {
			return 0, d.corrupt(at, "string table entry %d: %d bytes but only %d left", i, arg, d.remaining())
		}
		if !d.lazy && !utf8.Valid(d.p[d.off:d.off+int(arg)]) {
			return 0, d.corrupt(at, "string table entry %d: not valid UTF-8", i)
		}
		d.ents[i] = int32(at)
		d.off += int(arg)
	}
	d.ents[n] = int32(d.off)
	d.nstrs = n
	d.tableStart, d.tableEnd = start, d.off
	if !d.viewTable {
		d.strs = make([]string, n)
	}
	if !d.lazy {
		// One copy of the table region backs every string of the chunk.
		region := string(d.p[start:d.off])
		for i := range n {
			h, end := int(d.ents[i])-start, int(d.ents[i+1])-start
			d.strs[i] = region[h+int(headLen(region[h])) : end]
		}
		d.ents = nil
	}
	if version2 {
		if err := d.spanIndex(); err != nil {
			return 0, err
		}
	}
	at = d.off
	n, err = d.length(majorArray, 1, "span list")
	if err != nil {
		return 0, err
	}
	if n > d.lim.MaxSpans {
		return 0, d.corrupt(at, "span list: %d spans, more than the limit %d", n, d.lim.MaxSpans)
	}
	if version2 {
		if err := d.placeMarks(n); err != nil {
			return 0, err
		}
	}
	d.listAt = d.off
	return n, nil
}

// spanMark is one entry of a payload's span index: the span at
// (k+1)·stride starts at off; at is where the entry is in the payload.
type spanMark struct{ at, off int32 }

// spanIndex reads the span index (payload version 2): tag 9, [stride,
// [distance…]]. The distances are turned into offsets by placeMarks once
// the span list head is read.
func (d *chunkDecoder) spanIndex() error {
	d.indexAt = d.off
	if err := d.expectTag(tagSpanIndex, "span index"); err != nil {
		return err
	}
	at := d.off
	if n, err := d.length(majorArray, 1, "span index"); err != nil {
		return err
	} else if n != 2 {
		return d.corrupt(at, "span index: array of %d, want 2 (stride, distances)", n)
	}
	at = d.off
	stride, err := d.uintValue("span index stride")
	if err != nil {
		return err
	}
	if stride < 1 || stride > uint64(d.lim.MaxSpans) {
		return d.corrupt(at, "span index stride %d: want 1 to %d", stride, d.lim.MaxSpans)
	}
	d.stride = int(stride)
	n, err := d.length(majorArray, 1, "span index distances")
	if err != nil {
		return err
	}
	d.marks = make([]spanMark, n)
	for k := range d.marks {
		at := d.off
		dist, err := d.uintValue("span index distance")
		if err != nil {
			return err
		}
		if dist < 1 || dist > uint64(d.payloadLen()) {
			return d.corrupt(at, "span index entry %d: distance %d outside the payload of %d bytes", k, dist, d.payloadLen())
		}
		d.marks[k] = spanMark{at: int32(at), off: int32(dist)}
	}
	return nil
}

// placeMarks checks the span index against the span list of n spans that
// starts at d.off and makes its entries absolute offsets. Each must lie
// inside the payload, after the previous one; that each is where its span
// really starts is checked by the decoders that walk there (checkMark).
func (d *chunkDecoder) placeMarks(n int) error {
	if want := max(n-1, 0) / d.stride; len(d.marks) != want {
		return d.corrupt(d.indexAt, "span index: %d entries for %d spans at stride %d, want %d", len(d.marks), n, d.stride, want)
	}
	off := int64(d.off)
	for k := range d.marks {
		off += int64(d.marks[k].off)
		if off >= int64(d.payloadLen()) {
			return d.corrupt(int(d.marks[k].at), "span index entry %d: span %d at offset %d, past the payload's end %d", k, (k+1)*d.stride, off, d.payloadLen())
		}
		d.marks[k].off = int32(off)
	}
	return nil
}

// mark returns the span index entry for span i, if i is a marked span.
func (d *chunkDecoder) mark(i int) (spanMark, bool) {
	if d.stride == 0 || i == 0 || i%d.stride != 0 {
		return spanMark{}, false
	}
	return d.marks[i/d.stride-1], true
}

// checkMark checks, at the start of span i reached by walking the span
// list, that the span index (if it marks span i) says it starts here.
func (d *chunkDecoder) checkMark(i int) error {
	if m, ok := d.mark(i); ok && int(m.off) != d.off {
		return d.corrupt(int(m.at), "span index entry %d: says span %d starts at offset %d, it starts at %d", i/d.stride-1, i, m.off, d.off)
	}
	return nil
}

// seekSpan moves to the start of span i from the nearest span the index
// marks at or before it, when that is beyond where the decoder is (cur is
// the number of the span starting at d.off); it returns the span now at
// d.off.
func (d *chunkDecoder) seekSpan(i, cur int) int {
	if d.stride == 0 {
		return cur
	}
	g := i / d.stride * d.stride
	if g <= cur {
		return cur
	}
	d.off = int(d.marks[g/d.stride-1].off)
	return g
}

// spanInStretch decodes span i, which starts at d.off, reading nothing
// past the end of its span index stretch (the next marked span, if any):
// a span of a well-formed payload ends there, and ChunkView reads a span
// the same way.
func (d *chunkDecoder) spanInStretch(i int) (*Span, error) {
	full := d.p
	if d.stride > 0 {
		if g := i / d.stride; g < len(d.marks) {
			d.p = full[:d.marks[g].off]
		}
	}
	s, err := d.span()
	d.p = full
	return s, err
}

// peekByte reports whether the next byte is b.
func (d *chunkDecoder) peekByte(b byte) bool {
	return d.off < len(d.p) && d.p[d.off] == b
}

// skip skips one well-formed data item without building it, iteratively.
func (d *chunkDecoder) skip() error {
	p := d.p
	pending := 1
	for pending > 0 {
		pending--
		at := d.off
		if at >= len(p) {
			return d.corrupt(at, "unexpected end of payload")
		}
		ib := p[at]
		arg := uint64(ib & 0x1f)
		if arg < 24 { // fast path: argument in the initial byte
			d.off = at + 1
		} else {
			var err error
			if _, _, arg, err = d.head(); err != nil {
				return err
			}
		}
		left := uint64(len(p) - d.off)
		switch ib & 0xe0 {
		case majorBytes, majorText:
			if arg > left {
				return d.corrupt(at, "string of %d bytes but only %d left", arg, left)
			}
			d.off += int(arg)
		case majorArray:
			if arg > left {
				return d.corrupt(at, "array of %d elements cannot fit in the %d bytes left", arg, left)
			}
			pending += int(arg)
		case majorMap:
			if arg > left/2 {
				return d.corrupt(at, "map of %d pairs cannot fit in the %d bytes left", arg, left)
			}
			pending += 2 * int(arg)
		case majorTag:
			pending++
		}
		if pending > len(p)-d.off {
			return d.corrupt(at, "%d items cannot fit in the %d bytes left", pending, len(p)-d.off)
		}
	}
	return nil
}

func (d *chunkDecoder) newRecord(at int) (*Record, error) {
	d.records++
	if d.records > d.lim.MaxRecords {
		return nil, d.corrupt(at, "more than %d records", d.lim.MaxRecords)
	}
	return &d.recs.take(1, d.remaining()/4+1)[:1][0], nil
}

// recordHead reads what starts every record (a span's or a child's) after
// its tag 8 (at offset at): the element array's head and the info map's tag
// and head. It returns the element count, where the info map starts and its
// pair count; what and mapWhat name the record and its info map in errors.
func (d *chunkDecoder) recordHead(at int, what, mapWhat string) (elems, mapAt, pairs int, err error) {
	if elems, err = d.length(majorArray, 1, what); err != nil {
		return 0, 0, 0, err
	}
	if elems < 1 {
		return 0, 0, 0, d.corrupt(at, "%s: empty, want an info map first", what)
	}
	if err = d.expectTag(tagInfo, mapWhat); err != nil {
		return 0, 0, 0, err
	}
	mapAt = d.off
	if pairs, err = d.length(majorMap, 2, mapWhat); err != nil {
		return 0, 0, 0, err
	}
	return elems, mapAt, pairs, nil
}

// span decodes one span record.
func (d *chunkDecoder) span() (*Span, error) {
	start := d.off
	if err := d.expectTag(tagRecord, "span record"); err != nil {
		return nil, err
	}
	elems, mapAt, pairs, err := d.recordHead(start, "span record", "span info map")
	if err != nil {
		return nil, err
	}
	s := &Span{}
	var (
		root                     Record
		hasTraceID, hasRoot      bool
		tstampMS                 int64
		hasTstamp                bool
		flags                    uint64
		hasRootDur, hasRootCalls bool
		hasRootErrors            bool
		rootKeyAt                = -1
	)
	last := -1
	for range pairs {
		keyAt := d.off
		key, err := d.uintValue("span info key")
		if err != nil {
			return nil, err
		}
		if key > 0xff || int(key) <= last {
			return nil, d.corrupt(keyAt, "span info key 0x%02x out of order, repeated or unknown", key)
		}
		last = int(key)
		switch key {
		case keyTraceID:
			at := d.off
			major, _, arg, err := d.head()
			if err != nil {
				return nil, err
			}
			if major != majorBytes || arg != 16 || d.remaining() < 16 {
				return nil, d.corrupt(at, "TRACE_ID: want a 16-byte string, got %s", describeHead(major, arg))
			}
			copy(s.TraceID[:], d.p[d.off:])
			d.off += 16
			hasTraceID = true
		case keyChunkNum:
			at := d.off
			v, err := d.uintValue("CH_NUM")
			if err != nil {
				return nil, err
			}
			if v > math.MaxUint32 {
				return nil, d.corrupt(at, "CH_NUM %d overflows uint32", v)
			}
			s.ChunkNum = uint32(v)
		case keyTimestampMS:
			tstampMS, err = d.int64Value("TSTAMP")
			hasTstamp = true
		case keyDuration:
			s.DurationNS, err = d.int64Value("DURATION")
		case keyType:
			s.Type, err = d.ref("TYPE")
		case keyRecs:
			s.Recs, err = d.int64Value("RECS")
		case keyCalls:
			s.Calls, err = d.int64Value("CALLS")
		case keyErrors:
			s.Errors, err = d.int64Value("ERRORS")
		case keyFlags:
			at := d.off
			flags, err = d.uintValue("FLAGS")
			if err == nil && flags&^(flagError|flagOpen) != 0 {
				return nil, d.corrupt(at, "FLAGS 0x%x: unknown bits", flags)
			}
		case keyStart:
			s.StartNS, err = d.int64Value("TSTART")
		case keyMethod:
			root.Method, err = d.ref("METHOD")
			hasRoot = true
		case keyParent:
			var v uint64
			v, err = d.uintValue("PARENT")
			s.ParentID = SpanID(v)
		case keySpan:
			var v uint64
			v, err = d.uintValue("SPAN")
			s.SpanID = SpanID(v)
		case keySource:
			s.Source, err = d.ref("SOURCE")
		case keyRootStart:
			root.StartNS, err = d.int64Value("ROOT_TSTART")
			rootKeyAt = keyAt
		case keyRootDuration:
			root.DurationNS, err = d.int64Value("ROOT_DURATION")
			hasRootDur, rootKeyAt = true, keyAt
		case keyRootCalls:
			root.Calls, err = d.int64Value("ROOT_CALLS")
			hasRootCalls, rootKeyAt = true, keyAt
		case keyRootErrors:
			root.Errors, err = d.int64Value("ROOT_ERRORS")
			hasRootErrors, rootKeyAt = true, keyAt
		default:
			return nil, d.corrupt(keyAt, "unknown span info key 0x%02x", key)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasTraceID {
		return nil, d.corrupt(mapAt, "span info map without TRACE_ID")
	}
	if want := floorMillis(s.StartNS); want != tstampMS && (hasTstamp || want != 0) {
		return nil, d.corrupt(mapAt, "TSTAMP %d ms disagrees with TSTART %d ns", tstampMS, s.StartNS)
	}
	s.Error = flags&flagError != 0
	if !hasRoot {
		if rootKeyAt >= 0 {
			return nil, d.corrupt(rootKeyAt, "root record key in a span without METHOD (no root record)")
		}
		if flags&flagOpen != 0 {
			return nil, d.corrupt(mapAt, "FLAGS Open set in a span without METHOD (no root record)")
		}
		if err := d.recordTail(elems-1, s, nil, 1); err != nil {
			return nil, err
		}
		return s, nil
	}
	if !hasRootDur {
		root.DurationNS = s.DurationNS
	}
	if !hasRootCalls {
		root.Calls = s.Calls
	}
	if !hasRootErrors {
		root.Errors = s.Errors
	}
	root.Open = flags&flagOpen != 0
	if d.summary {
		if d.shallowRoot {
			shallow := root
			s.Root = &shallow
		}
		return s, d.recordTail(elems-1, s, &root, 1)
	}
	r, err := d.newRecord(start)
	if err != nil {
		return nil, err
	}
	*r = root
	s.Root = r
	if err := d.recordTail(elems-1, s, r, 1); err != nil {
		return nil, err
	}
	return s, nil
}

// recordTail decodes the n elements after a record's info map, in this
// order: span attributes (span record only), record attributes, exception,
// child records. r is nil for a span without a root record.
func (d *chunkDecoder) recordTail(n int, s *Span, r *Record, depth int) error {
	stage := 0
	for j := 0; j < n; j++ {
		at := d.off
		major, _, tag, err := d.head()
		if err != nil {
			return err
		}
		if major != majorTag {
			return d.corrupt(at, "record element: want a tag, got %s", describeHead(major, tag))
		}
		switch {
		case tag == tagSpanAttrs && s != nil && stage < 1:
			stage = 1
			s.Attrs, err = d.attrMap(1)
		case d.summary && r != nil && tag == tagRecordAttrs && stage < 2:
			stage = 2
			err = d.skip()
		case d.summary && r != nil && (tag == tagException && stage < 3 || tag == tagRecord):
			stage = 3
			err = d.skip()
		case tag == tagRecordAttrs && r != nil && stage < 2:
			stage = 2
			r.Attrs, err = d.attrMap(1)
		case tag == tagException && r != nil && stage < 3:
			stage = 3
			r.Exception, err = d.exception()
		case tag == tagRecord && r != nil:
			stage = 3
			if r.Children == nil {
				// The elements left are all child records (nothing
				// may follow them), of 4 bytes at least.
				if n-j <= maxCarve {
					r.Children = d.kids.take(n-j, d.remaining()/4+1)
				} else {
					r.Children = make([]*Record, 0, n-j)
				}
			}
			var c *Record
			c, err = d.record(at, depth+1)
			if err == nil {
				r.Children = append(r.Children, c)
			}
		default:
			return d.corrupt(at, "record element: tag %d not allowed here", tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// record decodes a child record whose tag 8 (at offset at) was just read.
func (d *chunkDecoder) record(at int, depth int) (*Record, error) {
	if depth > d.lim.MaxDepth {
		return nil, d.corrupt(at, "record nesting deeper than %d", d.lim.MaxDepth)
	}
	r, err := d.newRecord(at)
	if err != nil {
		return nil, err
	}
	elems, mapAt, pairs, err := d.recordHead(at, "record", "record info map")
	if err != nil {
		return nil, err
	}
	hasMethod := false
	last := -1
	for range pairs {
		keyAt := d.off
		var key uint64
		if keyAt < len(d.p) && d.p[keyAt] < 24 { // fast path: one-byte key
			key = uint64(d.p[keyAt])
			d.off++
		} else if key, err = d.uintValue("record info key"); err != nil {
			return nil, err
		}
		if key > 0xff || int(key) <= last {
			return nil, d.corrupt(keyAt, "record info key 0x%02x out of order, repeated or unknown", key)
		}
		last = int(key)
		switch key {
		case keyDuration:
			r.DurationNS, err = d.int64Value("DURATION")
		case keyCalls:
			r.Calls, err = d.int64Value("CALLS")
		case keyErrors:
			r.Errors, err = d.int64Value("ERRORS")
		case keyFlags:
			var flags uint64
			flagsAt := d.off
			flags, err = d.uintValue("FLAGS")
			if err == nil && flags&^flagOpen != 0 {
				return nil, d.corrupt(flagsAt, "record FLAGS 0x%x: unknown bits", flags)
			}
			r.Open = flags&flagOpen != 0
		case keyStart:
			r.StartNS, err = d.int64Value("TSTART")
		case keyMethod:
			r.Method, err = d.ref("METHOD")
			hasMethod = true
		default:
			return nil, d.corrupt(keyAt, "info key 0x%02x not allowed in a child record", key)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasMethod {
		return nil, d.corrupt(mapAt, "child record without METHOD")
	}
	if err := d.recordTail(elems-1, nil, r, depth); err != nil {
		return nil, err
	}
	return r, nil
}

// attrMap decodes a map of string ref → value; depth is its values' depth.
func (d *chunkDecoder) attrMap(depth int) (Attrs, error) {
	n, err := d.length(majorMap, 3, "attributes")
	if err != nil {
		return nil, err
	}
	// Capacity grows with what is actually decoded, so a hostile length
	// cannot make every nesting level allocate for the whole payload.
	// (Carving maps out of a slab, as child lists are, cost more than it
	// saved: arrays of 256 pairs are 28 KB for the collector to scan.)
	a := make(Attrs, 0, min(n, maxPrealloc))
	for i := range n {
		at := d.off
		key, err := d.ref("attribute key")
		if err != nil {
			return nil, err
		}
		if i > 0 && keyOutOfOrder(a[i-1].Key, key) {
			return nil, d.corrupt(at, "attribute key %q not sorted/unique", truncateForError(key))
		}
		a = append(a, Attr{Key: key})
		if err := d.value(&a[i].Value, depth); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (d *chunkDecoder) value(v *Value, depth int) error {
	at := d.off
	if valueTooDeep(depth) {
		return d.corrupt(at, msgValueTooDeep, MaxValueDepth)
	}
	major, ai, arg, err := d.head()
	if err != nil {
		return err
	}
	switch major {
	case majorUint:
		if arg > math.MaxInt64 {
			return d.corrupt(at, "integer %d overflows int64", arg)
		}
		*v = Value{Kind: KindInt, Int: int64(arg)}
	case majorNegInt:
		if arg > math.MaxInt64 {
			return d.corrupt(at, "integer -1-%d overflows int64", arg)
		}
		*v = Value{Kind: KindInt, Int: -1 - int64(arg)}
	case majorTag:
		if arg != tagStringRef {
			return d.corrupt(at, "value: tag %d, want a string ref (tag 6)", arg)
		}
		d.off = at
		s, err := d.ref("value")
		if err != nil {
			return err
		}
		*v = Value{Kind: KindString, Str: s}
	case majorArray:
		if arg > uint64(d.remaining()) {
			return d.corrupt(at, "list of %d elements cannot fit in the %d bytes left", arg, d.remaining())
		}
		list := make([]Value, 0, min(int(arg), maxPrealloc))
		for i := range int(arg) {
			list = append(list, Value{})
			if err := d.value(&list[i], depth+1); err != nil {
				return err
			}
		}
		*v = Value{Kind: KindList, List: list}
	case majorMap:
		d.off = at
		m, err := d.attrMap(depth + 1)
		if err != nil {
			return err
		}
		*v = Value{Kind: KindMap, Map: m}
	case majorSimple:
		switch ai {
		case 20, 21:
			*v = Value{Kind: KindBool, Bool: ai == 21}
		case 22:
			*v = Value{}
		case 25:
			*v = Value{Kind: KindFloat, Float: halfToFloat64(uint16(arg))}
		case 26:
			*v = Value{Kind: KindFloat, Float: float64(math.Float32frombits(uint32(arg)))}
		case 27:
			*v = Value{Kind: KindFloat, Float: math.Float64frombits(arg)}
		default:
			return d.corrupt(at, "value: simple value %d not allowed", arg)
		}
	default:
		return d.corrupt(at, "value: %s not allowed (strings must be refs)", describeHead(major, arg))
	}
	return nil
}

// exception decodes an exception whose tag 34 was just read, with its cause
// chain, iteratively.
func (d *chunkDecoder) exception() (*Exception, error) {
	var first, prev *Exception
	for n := 1; ; n++ {
		at := d.off
		if causeChainTooLong(n, d.lim.MaxDepth) {
			return nil, d.corrupt(at, msgCauseChainTooLong, d.lim.MaxDepth)
		}
		elems, err := d.length(majorArray, 1, "exception")
		if err != nil {
			return nil, err
		}
		if elems != 4 {
			return nil, d.corrupt(at, "exception: %d elements, want 4", elems)
		}
		x := &Exception{}
		if x.Class, err = d.ref("exception class"); err != nil {
			return nil, err
		}
		if x.Message, err = d.ref("exception message"); err != nil {
			return nil, err
		}
		frames, err := d.length(majorArray, 8, "exception stack")
		if err != nil {
			return nil, err
		}
		if frames > 0 {
			x.Stack = make([]StackFrame, frames)
		}
		for i := range x.Stack {
			f := &x.Stack[i]
			fat := d.off
			k, err := d.length(majorArray, 1, "stack frame")
			if err != nil {
				return nil, err
			}
			if k != 4 {
				return nil, d.corrupt(fat, "stack frame: %d elements, want 4", k)
			}
			if f.Class, err = d.ref("stack frame class"); err != nil {
				return nil, err
			}
			if f.Method, err = d.ref("stack frame method"); err != nil {
				return nil, err
			}
			if f.File, err = d.ref("stack frame file"); err != nil {
				return nil, err
			}
			if f.Line, err = d.int64Value("stack frame line"); err != nil {
				return nil, err
			}
		}
		if prev == nil {
			first = x
		} else {
			prev.Cause = x
		}
		prev = x
		if d.peekByte(majorSimple | 22) {
			d.off++
			return first, nil
		}
		if err := d.expectTag(tagException, "exception cause (or null)"); err != nil {
			return nil, err
		}
	}
}

func majorName(major byte) string {
	switch major {
	case majorUint:
		return "unsigned integer"
	case majorNegInt:
		return "negative integer"
	case majorBytes:
		return "byte string"
	case majorText:
		return "text string"
	case majorArray:
		return "array"
	case majorMap:
		return "map"
	case majorTag:
		return "tag"
	}
	return "simple value or float"
}

func describeHead(major byte, arg uint64) string {
	switch major {
	case majorTag:
		return fmt.Sprintf("tag %d", arg)
	case majorSimple:
		return "simple value or float"
	}
	return fmt.Sprintf("%s (argument %d)", majorName(major), arg)
}
