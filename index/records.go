package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	mathbits "math/bits"
	"slices"
)

// ErrCorrupt is wrapped by every error about undecodable index contents. The
// index can always be rebuilt from the data file.
var ErrCorrupt = errors.New("corrupt index")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// decoder reads varints and fixed fields from one value, remembering the
// first error; every error names the byte offset and what was being read.
type decoder struct {
	src []byte
	pos int
	// What is being decoded, for error messages (formatted only on error):
	// kind, followed by id in hex when set, else by num.
	kind string
	id   *[16]byte
	num  uint64
	err  error
}

func (d *decoder) name() string {
	if d.id != nil {
		return fmt.Sprintf("%s %x", d.kind, *d.id)
	}
	return fmt.Sprintf("%s %d", d.kind, d.num)
}

func (d *decoder) fail(field string) {
	if d.err == nil {
		d.err = corruptf("%s: truncated or malformed %s at byte %d", d.name(), field, d.pos)
	}
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.src[d.pos:])
	if n <= 0 {
		d.fail(field)
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.src[d.pos:])
	if n <= 0 {
		d.fail(field)
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.pos >= len(d.src) {
		d.fail(field)
		return 0
	}
	b := d.src[d.pos]
	d.pos++
	return b
}

func (d *decoder) u64(field string) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.src)-d.pos < 8 {
		d.fail(field)
		return 0
	}
	v := binary.BigEndian.Uint64(d.src[d.pos:])
	d.pos += 8
	return v
}

func (d *decoder) bytes16(field string) (id [16]byte) {
	if d.err != nil {
		return id
	}
	if len(d.src)-d.pos < 16 {
		d.fail(field)
		return id
	}
	copy(id[:], d.src[d.pos:])
	d.pos += 16
	return id
}

func (d *decoder) remaining() int { return len(d.src) - d.pos }

// ---- 't' values: the span records of one trace ----

// traceRec is one stored span entry: what TraceSpans returns plus the
// entry's sequence number.
type traceRec struct {
	ref SpanRef
	seq uint64
}

// Record flag bits.
const (
	recError      = 0x01
	recParentMask = 0x06
	recParentRef  = 0x02                                      // parent is another record of the same operand
	recParentLit  = 0x04                                      // parent is stored literally
	recSameOffset = 0x08                                      // chunk offset equals the previous record's
	recNextSeq    = 0x10                                      // sequence number is the previous record's + 1
	recChunkZero  = 0x20                                      // chunk number is 0
	recNextIndex  = 0x40                                      // index in chunk is the previous record's + 1
	recMicros     = 0x80                                      // start (delta) and duration are stored divided by 1000
	recFollowers  = recSameOffset | recNextSeq | recNextIndex // invalid on a first record
	// minRecordBytes is the smallest encoded record: flags, span id, start,
	// duration.
	minRecordBytes = 11
)

// appendTraceOperand appends one 't' operand holding recs, which belong to
// one trace and are in ascending sequence order.
func appendTraceOperand(dst []byte, recs []traceRec) []byte {
	dst = binary.AppendUvarint(dst, recs[0].seq)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	first := make(map[uint64]int, len(recs))
	for i := range recs {
		if _, ok := first[recs[i].ref.SpanID]; !ok {
			first[recs[i].ref.SpanID] = i
		}
	}
	for i := range recs {
		r := &recs[i].ref
		var prev *SpanRef
		if i > 0 {
			prev = &recs[i-1].ref
		}
		var flags byte
		if r.Error {
			flags |= recError
		}
		ref, isRef := first[r.ParentID]
		switch {
		case r.ParentID == 0:
		case isRef && ref != i:
			flags |= recParentRef
		default:
			flags |= recParentLit
		}
		start := r.StartNS
		if prev != nil {
			start -= prev.StartNS
			if r.Loc.ChunkOffset == prev.Loc.ChunkOffset {
				flags |= recSameOffset
			}
			if recs[i].seq == recs[i-1].seq+1 {
				flags |= recNextSeq
			}
			if r.Loc.Index == prev.Loc.Index+1 {
				flags |= recNextIndex
			}
		}
		if r.ChunkNum == 0 {
			flags |= recChunkZero
		}
		dur := r.DurationNS
		if start%1000 == 0 && dur%1000 == 0 {
			flags |= recMicros
			start /= 1000
			dur /= 1000
		}
		dst = append(dst, flags)
		if prev != nil && flags&recNextSeq == 0 {
			dst = binary.AppendUvarint(dst, recs[i].seq-recs[i-1].seq-1)
		}
		dst = binary.BigEndian.AppendUint64(dst, r.SpanID)
		switch flags & recParentMask {
		case recParentRef:
			dst = binary.AppendUvarint(dst, uint64(ref))
		case recParentLit:
			dst = binary.BigEndian.AppendUint64(dst, r.ParentID)
		}
		if flags&recChunkZero == 0 {
			dst = binary.AppendUvarint(dst, uint64(r.ChunkNum))
		}
		if flags&recSameOffset == 0 {
			dst = binary.AppendUvarint(dst, uint64(r.Loc.ChunkOffset))
		}
		if flags&recNextIndex == 0 {
			dst = binary.AppendUvarint(dst, uint64(r.Loc.Index))
		}
		dst = binary.AppendVarint(dst, start)
		dst = binary.AppendVarint(dst, dur)
	}
	return dst
}

// decodeTraceValue decodes every operand of the 't' value of traceID and
// appends the records to out.
func decodeTraceValue(src []byte, traceID [16]byte, out []traceRec) ([]traceRec, error) {
	d := decoder{src: src, kind: "trace", id: &traceID}
	for d.remaining() > 0 && d.err == nil {
		opStart := d.pos
		seq := d.uvarint("first sequence number")
		n := d.uvarint("record count")
		if d.err != nil {
			break
		}
		if n == 0 || n > uint64(d.remaining()/minRecordBytes) {
			return out, corruptf("%s: operand at byte %d: record count %d out of range", d.name(), opStart, n)
		}
		base := len(out)
		out = slices.Grow(out, int(n))
		var parentRefs []int // index into out of records whose parent is a reference
		for i := uint64(0); i < n && d.err == nil; i++ {
			recStart := d.pos
			flags := d.byte("flags")
			if flags&recParentMask == recParentMask || (i == 0 && flags&recFollowers != 0) {
				return out, corruptf("%s: invalid record flags 0x%02x at byte %d", d.name(), flags, recStart)
			}
			var prev SpanRef
			if i > 0 {
				prev = out[len(out)-1].ref
				gap := uint64(1)
				if flags&recNextSeq == 0 {
					gap = d.uvarint("sequence gap") + 1 // 0 only on overflow
				}
				if gap == 0 || seq > math.MaxUint64-gap {
					return out, corruptf("%s: sequence overflow at byte %d", d.name(), recStart)
				}
				seq += gap
			}
			r := SpanRef{TraceID: traceID, Error: flags&recError != 0}
			r.SpanID = d.u64("span id")
			switch flags & recParentMask {
			case recParentRef:
				ref := d.uvarint("parent reference")
				if ref >= n || ref == i {
					return out, corruptf("%s: parent reference %d out of range at byte %d", d.name(), ref, recStart)
				}
				r.ParentID = ref // resolved below, once every span id is known
				parentRefs = append(parentRefs, len(out))
			case recParentLit:
				r.ParentID = d.u64("parent id")
			}
			if flags&recChunkZero == 0 {
				chunk := d.uvarint("chunk number")
				if chunk > math.MaxUint32 {
					return out, corruptf("%s: chunk number %d out of range at byte %d", d.name(), chunk, recStart)
				}
				r.ChunkNum = uint32(chunk)
			}
			if flags&recSameOffset != 0 {
				r.Loc.ChunkOffset = prev.Loc.ChunkOffset
			} else {
				off := d.uvarint("chunk offset")
				if off > math.MaxInt64 {
					return out, corruptf("%s: chunk offset %d out of range at byte %d", d.name(), off, recStart)
				}
				r.Loc.ChunkOffset = int64(off)
			}
			if flags&recNextIndex != 0 {
				r.Loc.Index = prev.Loc.Index + 1
			} else {
				idx := d.uvarint("index in chunk")
				if idx > math.MaxUint32 {
					return out, corruptf("%s: index in chunk %d out of range at byte %d", d.name(), idx, recStart)
				}
				r.Loc.Index = uint32(idx)
			}
			start := d.varint("start")
			dur := d.varint("duration")
			if flags&recMicros != 0 {
				start *= 1000
				dur *= 1000
			}
			if i > 0 {
				start += prev.StartNS
			}
			r.StartNS, r.DurationNS = start, dur
			if d.err != nil {
				break
			}
			out = append(out, traceRec{ref: r, seq: seq})
		}
		if d.err != nil {
			break
		}
		for _, at := range parentRefs {
			out[at].ref.ParentID = out[base+int(out[at].ref.ParentID)].ref.SpanID
		}
	}
	return out, d.err
}

// ---- 'q' values: trace ids of 64 consecutive sequence numbers ----

// appendSeqOperand appends a 'q' operand: the trace ids of the sequence
// numbers first.. (offset firstOff in the group), as runs.
func appendSeqOperand(dst []byte, firstOff uint32, runs []traceRun) []byte {
	dst = binary.AppendUvarint(dst, uint64(firstOff))
	dst = binary.AppendUvarint(dst, uint64(len(runs)))
	for _, r := range runs {
		dst = append(dst, r.id[:]...)
		dst = binary.AppendUvarint(dst, uint64(r.n))
	}
	return dst
}

type traceRun struct {
	id [16]byte
	n  uint32
}

// seqGroup is a decoded 'q' value: the trace id of each sequence offset
// of the group that has one.
type seqGroup struct {
	ids     [1 << seqGroupShift][16]byte
	present uint64 // bit i: ids[i] is set
}

// decodeSeqGroup decodes the 'q' value of group; a later operand wins for an
// offset written twice, as in the merge operator.
func decodeSeqGroup(src []byte, group uint64, g *seqGroup) error {
	d := decoder{src: src, kind: "sequence group", num: group}
	const size = 1 << seqGroupShift
	g.present = 0
	for d.remaining() > 0 && d.err == nil {
		opStart := d.pos
		off := d.uvarint("first offset")
		nruns := d.uvarint("run count")
		if d.err != nil {
			break
		}
		if off >= size || nruns == 0 || nruns > size {
			return corruptf("%s: operand at byte %d: offset %d, %d runs out of range", d.name(), opStart, off, nruns)
		}
		for i := uint64(0); i < nruns && d.err == nil; i++ {
			id := d.bytes16("trace id")
			n := d.uvarint("run length")
			if d.err != nil {
				break
			}
			if n == 0 || n > size || off+n > size {
				return corruptf("%s: run at byte %d: length %d out of range", d.name(), d.pos, n)
			}
			for o := off; o < off+n; o++ {
				g.ids[o] = id
				g.present |= 1 << o
			}
			off += n
		}
	}
	return d.err
}

// ---- 'c' values: the time column of a block ----

// colEntry is what the time column stores per span: its start and a flag
// byte (error bit and duration class).
type colEntry struct {
	start int64
	flags uint8
}

const colError = 0x80

// durClass is the duration's bit length: durations ≥ d have a class ≥
// durClass(d).
func durClass(d int64) uint8 {
	if d <= 0 {
		return 0
	}
	return uint8(mathbits.Len64(uint64(d)))
}

func colFlags(errFlag bool, dur int64) uint8 {
	f := durClass(dur)
	if errFlag {
		f |= colError
	}
	return f
}

// appendColumnOperand appends a 'c' operand for consecutive block offsets
// firstOff, firstOff+1, …
func appendColumnOperand(dst []byte, firstOff uint32, entries []colEntry) []byte {
	dst = binary.AppendUvarint(dst, uint64(firstOff))
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	var prev int64
	for i, e := range entries {
		if i == 0 {
			dst = binary.AppendVarint(dst, e.start)
		} else {
			dst = binary.AppendVarint(dst, e.start-prev)
		}
		prev = e.start
		dst = append(dst, e.flags)
	}
	return dst
}

// column is a decoded time column: entries for offsets [0, n).
type column struct {
	start []int64
	flags []uint8
}

// decodeColumn decodes the 'c' value of block into entries for offsets
// [0, n); offsets ≥ n (committed after the caller's view) are ignored, and a
// missing offset below n is corruption.
func decodeColumn(src []byte, block uint64, blockSize, n uint32, col *column) error {
	d := decoder{src: src, kind: "time column of block", num: block}
	if cap(col.start) < int(n) {
		col.start = make([]int64, n)
		col.flags = make([]uint8, n)
	}
	col.start = col.start[:n]
	col.flags = col.flags[:n]
	var seen uint32
	for d.remaining() > 0 && d.err == nil {
		opStart := d.pos
		off := d.uvarint("first offset")
		cnt := d.uvarint("entry count")
		if d.err != nil {
			break
		}
		if cnt == 0 || off+cnt > uint64(blockSize) || cnt > uint64(d.remaining()/2) {
			return corruptf("%s: operand at byte %d: offsets %d+%d out of range", d.name(), opStart, off, cnt)
		}
		var prev int64
		for i := uint64(0); i < cnt && d.err == nil; i++ {
			s := d.varint("start")
			if i > 0 {
				s += prev
			}
			prev = s
			f := d.byte("flags")
			if o := off + i; o < uint64(n) && d.err == nil {
				col.start[o] = s
				col.flags[o] = f
				if o+1 > uint64(seen) {
					seen = uint32(o + 1)
				}
			}
		}
	}
	if d.err != nil {
		return d.err
	}
	if seen < n {
		return corruptf("%s: holds %d of %d entries", d.name(), seen, n)
	}
	return nil
}

// ---- 'b' values: block summaries ----

// blockSummary describes one block: how many spans it holds and the range of
// their start times.
type blockSummary struct {
	minStart, maxStart int64
	n                  uint32
}

func appendSummary(dst []byte, s blockSummary) []byte {
	dst = binary.AppendVarint(dst, s.minStart)
	dst = binary.AppendVarint(dst, s.maxStart)
	return binary.AppendUvarint(dst, uint64(s.n))
}

func decodeSummary(src []byte, block uint64, blockSize uint32) (blockSummary, error) {
	d := decoder{src: src, kind: "summary of block", num: block}
	var s blockSummary
	s.minStart = d.varint("min start")
	s.maxStart = d.varint("max start")
	n := d.uvarint("span count")
	if d.err != nil {
		return s, d.err
	}
	if d.remaining() != 0 {
		return s, corruptf("%s: %d trailing bytes", d.name(), d.remaining())
	}
	if n == 0 || n > uint64(blockSize) || s.minStart > s.maxStart {
		return s, corruptf("%s: span count %d, start range [%d, %d] invalid", d.name(), n, s.minStart, s.maxStart)
	}
	s.n = uint32(n)
	return s, nil
}

// ---- 'r' values: the attribute and text ids of the open block ----

// row is what the open block keeps per entry until the block is sealed
// and its posting lists are written.
type row struct {
	attrs []KV
	texts []uint64
	// valuesInTexts says that texts lists every attribute value too (rows
	// of AddDistinctSpan; not stored: a row read back says false).
	valuesInTexts bool
}

// appendRowsOperand appends an 'r' operand for consecutive block offsets
// firstOff, firstOff+1, …
func appendRowsOperand(dst []byte, firstOff uint32, rows []row) []byte {
	dst = binary.AppendUvarint(dst, uint64(firstOff))
	dst = binary.AppendUvarint(dst, uint64(len(rows)))
	for _, r := range rows {
		dst = binary.AppendUvarint(dst, uint64(len(r.attrs)))
		for _, kv := range r.attrs {
			dst = binary.AppendUvarint(dst, kv.Key)
			dst = binary.AppendUvarint(dst, kv.Value)
		}
		dst = binary.AppendUvarint(dst, uint64(len(r.texts)))
		for _, t := range r.texts {
			dst = binary.AppendUvarint(dst, t)
		}
	}
	return dst
}

// decodeRows calls fn for every row of an 'r' value whose offset is below
// n, in operand order. The slices passed to fn are reused.
func decodeRows(src []byte, block uint64, blockSize, n uint32, fn func(off uint32, r row)) error {
	d := decoder{src: src, kind: "rows of block", num: block}
	var r row
	for d.remaining() > 0 && d.err == nil {
		opStart := d.pos
		off := d.uvarint("first offset")
		cnt := d.uvarint("row count")
		if d.err != nil {
			break
		}
		if cnt == 0 || off+cnt > uint64(blockSize) || cnt > uint64(d.remaining()/2) {
			return corruptf("%s: operand at byte %d: offsets %d+%d out of range", d.name(), opStart, off, cnt)
		}
		for i := uint64(0); i < cnt && d.err == nil; i++ {
			na := d.uvarint("attribute count")
			// A row holds whatever one span of the data file held (no request
			// limit applies here: a store written under a looser limit must
			// open); the counts are bounded only by the bytes that remain.
			if na > uint64(d.remaining()/2) {
				return corruptf("%s: %d attributes at byte %d", d.name(), na, d.pos)
			}
			r.attrs = r.attrs[:0]
			for j := uint64(0); j < na; j++ {
				r.attrs = append(r.attrs, KV{Key: d.uvarint("attribute key"), Value: d.uvarint("attribute value")})
			}
			nt := d.uvarint("text count")
			if nt > uint64(d.remaining()) {
				return corruptf("%s: %d texts at byte %d", d.name(), nt, d.pos)
			}
			r.texts = r.texts[:0]
			for j := uint64(0); j < nt; j++ {
				r.texts = append(r.texts, d.uvarint("text id"))
			}
			if d.err == nil && off+i < uint64(n) {
				fn(uint32(off+i), r)
			}
		}
	}
	return d.err
}

// ---- 'mstate': counters, watermark and the open block's summary ----

type state struct {
	spans, traces uint64
	watermark     int64
	tail          blockSummary // n == spans mod block size; absent when 0
}

func appendState(dst []byte, s state) []byte {
	dst = binary.AppendUvarint(dst, s.spans)
	dst = binary.AppendUvarint(dst, s.traces)
	dst = binary.AppendVarint(dst, s.watermark)
	if s.tail.n > 0 {
		dst = binary.AppendVarint(dst, s.tail.minStart)
		dst = binary.AppendVarint(dst, s.tail.maxStart)
	}
	return dst
}

func decodeState(src []byte, blockSize uint32) (state, error) {
	d := decoder{src: src, kind: "state record"}
	var s state
	s.spans = d.uvarint("span count")
	s.traces = d.uvarint("trace count")
	s.watermark = d.varint("watermark")
	if n := uint32(s.spans % uint64(blockSize)); n > 0 {
		s.tail = blockSummary{minStart: d.varint("open block min start"), maxStart: d.varint("open block max start"), n: n}
	}
	if d.err != nil {
		return s, d.err
	}
	if d.remaining() != 0 {
		return s, corruptf("state record: %d trailing bytes", d.remaining())
	}
	if s.traces > s.spans || s.tail.minStart > s.tail.maxStart {
		return s, corruptf("state record: %d traces for %d spans, open block range [%d, %d]", s.traces, s.spans, s.tail.minStart, s.tail.maxStart)
	}
	return s, nil
}
