// Package postings owns the compact encoding of a posting list: a sorted set
// of small offsets (a span's position inside an index block, a string id's
// position inside a text-index block) stored as the value of one Pebble key.
//
// A value is a concatenation of zero or more operands, because the indexes
// write postings with Pebble merge operations (one operand per committed
// batch) and the merge operator concatenates or unions them. Each operand is
// self-delimiting and encodes a strictly ascending run of offsets in the
// smaller of two forms:
//
//	list:   0x01 uvarint(n) uvarint(first) (n-1) × uvarint(delta-1)
//	bitmap: 0x02 uvarint(first) uvarint(nbytes) nbytes × byte
//	        (bit i of byte j, least significant first, is offset first+8j+i)
//
// The set a value denotes is the union of its operands, so operands may come
// in any order and may overlap; Decode returns the sorted union without
// duplicates. Every offset must be below a caller-supplied limit (the block
// size); anything else, and any truncation, is an error naming the byte
// offset. Decoding never allocates more than the limit allows.
package postings

import (
	"encoding/binary"
	"errors"
	"fmt"
	mathbits "math/bits"
	"slices"
)

// Operand kinds.
const (
	kindList   = 0x01
	kindBitmap = 0x02
)

// MaxLimit is the largest block size (exclusive offset bound) the encoding
// supports.
const MaxLimit = 1 << 24

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("corrupt posting list")

// Append appends an encoding of offs, which must be strictly ascending, and
// returns the extended slice. An empty offs appends nothing. The set is cut
// into runs, each encoded as one operand in its smaller form: dense runs as
// bitmaps, sparse ones as lists.
func Append(dst []byte, offs []uint32) []byte {
	if len(offs) == 0 {
		return dst
	}
	// Cut at every gap of splitGap or more, then merge neighbouring pieces
	// greedily while one operand costs no more than two.
	const splitGap = 16
	cur := run{start: 0, end: 1, first: offs[0], last: offs[0]}
	for i := 1; i <= len(offs); i++ {
		if i < len(offs) && offs[i]-offs[i-1] < splitGap {
			cur.deltaBytes += uvarintLen(uint64(offs[i] - offs[i-1] - 1))
			cur.last, cur.end = offs[i], i+1
			continue
		}
		if i == len(offs) {
			break
		}
		// Collect the next piece.
		next := run{start: i, end: i + 1, first: offs[i], last: offs[i]}
		for next.end < len(offs) && offs[next.end]-offs[next.end-1] < splitGap {
			next.deltaBytes += uvarintLen(uint64(offs[next.end] - offs[next.end-1] - 1))
			next.last = offs[next.end]
			next.end++
		}
		merged := run{start: cur.start, end: next.end, first: cur.first, last: next.last,
			deltaBytes: cur.deltaBytes + uvarintLen(uint64(next.first-cur.last-1)) + next.deltaBytes}
		if merged.cost() <= cur.cost()+next.cost() {
			cur = merged
		} else {
			dst = appendOperand(dst, offs[cur.start:cur.end])
			cur = next
		}
		i = next.end - 1
	}
	return appendOperand(dst, offs[cur.start:cur.end])
}

// run is a candidate operand, offs[start:end], with the size of its list
// body (the delta varints).
type run struct {
	start, end  int
	first, last uint32
	deltaBytes  int
}

func bitmapCost(first, last uint32) int {
	nb := int(last-first)/8 + 1
	return 1 + uvarintLen(uint64(first)) + uvarintLen(uint64(nb)) + nb
}

func (r run) cost() int {
	list := 1 + uvarintLen(uint64(r.end-r.start)) + uvarintLen(uint64(r.first)) + r.deltaBytes
	return min(list, bitmapCost(r.first, r.last))
}

// appendOperand appends offs (strictly ascending, non-empty) as one operand
// in its smaller form.
func appendOperand(dst []byte, offs []uint32) []byte {
	first, last := offs[0], offs[len(offs)-1]
	nb := int(last-first)/8 + 1
	listCost := uvarintLen(uint64(len(offs))) + uvarintLen(uint64(first))
	for i := 1; i < len(offs); i++ {
		listCost += uvarintLen(uint64(offs[i] - offs[i-1] - 1))
	}
	if bitmapCost(first, last)-1 < listCost {
		dst = append(dst, kindBitmap)
		dst = binary.AppendUvarint(dst, uint64(first))
		dst = binary.AppendUvarint(dst, uint64(nb))
		start := len(dst)
		dst = append(dst, make([]byte, nb)...)
		bm := dst[start:]
		for _, o := range offs {
			d := o - first
			bm[d>>3] |= 1 << (d & 7)
		}
		return dst
	}
	dst = append(dst, kindList)
	dst = binary.AppendUvarint(dst, uint64(len(offs)))
	dst = binary.AppendUvarint(dst, uint64(first))
	for i := 1; i < len(offs); i++ {
		dst = binary.AppendUvarint(dst, uint64(offs[i]-offs[i-1]-1))
	}
	return dst
}

// Decode returns the sorted union of every operand in src, appended to
// dst[:0]. Every offset must be < limit (limit ≤ MaxLimit). Work and memory
// are O(len(src) + limit) whatever the operands look like.
func Decode(src []byte, limit uint32, dst []uint32) ([]uint32, error) {
	if limit > MaxLimit {
		return dst[:0], fmt.Errorf("posting limit %d exceeds %d", limit, MaxLimit)
	}
	out := dst[:0]
	var (
		scratch []uint32
		bits    []uint64 // set once operands arrive out of order
		err     error
	)
	pos := 0
	for pos < len(src) {
		if bits == nil && len(out) == 0 {
			out, pos, err = decodeOperand(src, pos, limit, out)
			if err != nil {
				return out[:0], err
			}
			continue
		}
		scratch, pos, err = decodeOperand(src, pos, limit, scratch[:0])
		if err != nil {
			return out[:0], err
		}
		if bits == nil && scratch[0] > out[len(out)-1] {
			out = append(out, scratch...)
			continue
		}
		if bits == nil {
			bits = make([]uint64, (limit+63)/64)
			for _, o := range out {
				bits[o>>6] |= 1 << (o & 63)
			}
		}
		for _, o := range scratch {
			bits[o>>6] |= 1 << (o & 63)
		}
	}
	if bits != nil {
		out = out[:0]
		for w, word := range bits {
			for word != 0 {
				out = append(out, uint32(w*64+mathbits.TrailingZeros64(word)))
				word &= word - 1
			}
		}
	}
	return out, nil
}

// decodeOperand decodes the operand at src[pos:] and appends its offsets to
// out; it returns the position after the operand.
func decodeOperand(src []byte, pos int, limit uint32, out []uint32) ([]uint32, int, error) {
	opStart := pos
	kind := src[pos]
	pos++
	switch kind {
	case kindList:
		n, p, err := readUvarint(src, pos, "count")
		if err != nil {
			return out, 0, err
		}
		if n == 0 || n > uint64(limit) || n > uint64(len(src)-p) {
			return out, 0, fmt.Errorf("%w: list operand at byte %d: count %d out of range", ErrCorrupt, opStart, n)
		}
		pos = p
		v, p, err := readUvarint(src, pos, "first offset")
		if err != nil {
			return out, 0, err
		}
		pos = p
		if v >= uint64(limit) {
			return out, 0, fmt.Errorf("%w: list operand at byte %d: offset %d ≥ block size %d", ErrCorrupt, opStart, v, limit)
		}
		out = append(out, uint32(v))
		for i := uint64(1); i < n; i++ {
			var d uint64
			if pos < len(src) && src[pos] < 0x80 { // most deltas are one byte
				d = uint64(src[pos])
				pos++
			} else if d, pos, err = readUvarint(src, pos, "delta"); err != nil {
				return out, 0, err
			}
			v += d + 1
			if d >= uint64(limit) || v >= uint64(limit) {
				return out, 0, fmt.Errorf("%w: list operand at byte %d: offset ≥ block size %d", ErrCorrupt, opStart, limit)
			}
			out = append(out, uint32(v))
		}
		return out, pos, nil
	case kindBitmap:
		first, p, err := readUvarint(src, pos, "first offset")
		if err != nil {
			return out, 0, err
		}
		pos = p
		nb, p, err := readUvarint(src, pos, "bitmap length")
		if err != nil {
			return out, 0, err
		}
		pos = p
		if first >= uint64(limit) || nb == 0 || nb > uint64(limit)/8+1 || nb > uint64(len(src)-pos) {
			return out, 0, fmt.Errorf("%w: bitmap operand at byte %d: first %d, %d bytes out of range", ErrCorrupt, opStart, first, nb)
		}
		bm := src[pos : pos+int(nb)]
		pos += int(nb)
		before := len(out)
		for j, b := range bm {
			for b != 0 {
				i := uint64(mathbits.TrailingZeros8(b))
				b &= b - 1
				v := first + uint64(j)*8 + i
				if v >= uint64(limit) {
					return out, 0, fmt.Errorf("%w: bitmap operand at byte %d: offset %d ≥ block size %d", ErrCorrupt, opStart, v, limit)
				}
				out = append(out, uint32(v))
			}
		}
		if len(out) == before {
			return out, 0, fmt.Errorf("%w: bitmap operand at byte %d is empty", ErrCorrupt, opStart)
		}
		return out, pos, nil
	default:
		return out, 0, fmt.Errorf("%w: unknown operand kind 0x%02x at byte %d", ErrCorrupt, kind, opStart)
	}
}

func readUvarint(src []byte, pos int, what string) (uint64, int, error) {
	v, n := binary.Uvarint(src[pos:])
	if n <= 0 {
		return 0, 0, fmt.Errorf("%w: truncated or overlong %s at byte %d", ErrCorrupt, what, pos)
	}
	return v, pos + n, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// unionInto merges the sorted set b into the sorted set a (both without
// duplicates) and returns the result.
func unionInto(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// Union returns the sorted union of the sorted sets a and b.
func Union(a, b []uint32) []uint32 {
	if len(a) == 0 {
		return append([]uint32(nil), b...)
	}
	if len(b) == 0 {
		return append([]uint32(nil), a...)
	}
	return unionInto(a, b)
}

// Intersect returns the elements of the sorted set a that are also in the
// sorted set b, written over a's storage.
func Intersect(a, b []uint32) []uint32 {
	out := a[:0]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// Compact decodes every operand of src and re-encodes the union (Append),
// appended to dst. It is what the indexes' merge operators do to
// posting values during compactions.
func Compact(dst, src []byte, limit uint32) ([]byte, error) {
	offs, err := Decode(src, limit, nil)
	if err != nil {
		return dst, err
	}
	return Append(dst, offs), nil
}

// Filter keeps the elements of a candidate set (a sorted set of offsets)
// that one or more posting values hold, without decoding the values into
// offsets: a bitmap operand answers each candidate in its range with one
// bit test, a list operand is walked only up to the last candidate (the
// rest of it is skipped by counting its varints). Intersecting a short
// list with long ones so costs about the short list, not the long ones.
//
// What is read is checked as Decode checks it (offsets below the limit,
// truncation, unknown operand kinds), with the byte offset in the error;
// the skipped tail of a list operand is checked for truncation only.
// A Filter is reused across sets with Reset; it is not safe for
// concurrent use.
type Filter struct {
	cands []uint32
	found []uint64 // bit i: cands[i] is held by a value added
	bits  []uint64 // listBits' offset set, all clear between calls
	left  int      // candidates not found yet
}

// Reset starts a filter over cands (sorted ascending, no duplicates; the
// filter keeps it until Kept and writes the result over it).
func (f *Filter) Reset(cands []uint32) {
	f.cands = cands
	n := (len(cands) + 63) / 64
	if cap(f.found) < n {
		f.found = make([]uint64, n)
	} else {
		f.found = f.found[:n]
		clear(f.found)
	}
	f.left = len(cands)
}

// Add marks the candidates that src (a posting value: one or more
// operands) holds. Every offset of src must be < limit (≤ MaxLimit).
func (f *Filter) Add(src []byte, limit uint32) error {
	if limit > MaxLimit {
		return fmt.Errorf("posting limit %d exceeds %d", limit, MaxLimit)
	}
	for pos := 0; pos < len(src) && f.left > 0; {
		next, err := f.addOperand(src, pos, limit)
		if err != nil {
			return err
		}
		pos = next
	}
	return nil
}

func (f *Filter) mark(i int) {
	if w, b := i>>6, uint64(1)<<(i&63); f.found[w]&b == 0 {
		f.found[w] |= b
		f.left--
	}
}

// addOperand marks the candidates the operand at src[pos:] holds and
// returns the position after it.
func (f *Filter) addOperand(src []byte, pos int, limit uint32) (int, error) {
	opStart := pos
	kind := src[pos]
	pos++
	cands := f.cands
	switch kind {
	case kindList:
		n, p, err := readUvarint(src, pos, "count")
		if err != nil {
			return 0, err
		}
		if n == 0 || n > uint64(limit) || n > uint64(len(src)-p) {
			return 0, fmt.Errorf("%w: list operand at byte %d: count %d out of range", ErrCorrupt, opStart, n)
		}
		v, p, err := readUvarint(src, p, "first offset")
		if err != nil {
			return 0, err
		}
		pos = p
		if v >= uint64(limit) {
			return 0, fmt.Errorf("%w: list operand at byte %d: offset %d ≥ block size %d", ErrCorrupt, opStart, v, limit)
		}
		if len(cands) == 0 || uint64(cands[len(cands)-1]) < v {
			return skipUvarints(src, pos, n-1, opStart)
		}
		if limit <= maxBitsLimit {
			return f.listBits(src, pos, n, v, limit, opStart)
		}
		j, _ := slices.BinarySearch(cands, uint32(v))
		for i := uint64(1); ; i++ {
			for j < len(cands) && uint64(cands[j]) < v {
				j++
			}
			if j == len(cands) {
				// Past the last candidate: skip the remaining deltas.
				return skipUvarints(src, pos, n-i, opStart)
			}
			if uint64(cands[j]) == v {
				f.mark(j)
			}
			if i == n {
				return pos, nil
			}
			d, p, err := readDelta(src, pos)
			if err != nil {
				return 0, err
			}
			pos = p
			v += d + 1
			if d >= uint64(limit) || v >= uint64(limit) {
				return 0, fmt.Errorf("%w: list operand at byte %d: offset ≥ block size %d", ErrCorrupt, opStart, limit)
			}
		}
	case kindBitmap:
		first, p, err := readUvarint(src, pos, "first offset")
		if err != nil {
			return 0, err
		}
		nb, p, err := readUvarint(src, p, "bitmap length")
		if err != nil {
			return 0, err
		}
		pos = p
		if first >= uint64(limit) || nb == 0 || nb > uint64(limit)/8+1 || nb > uint64(len(src)-pos) {
			return 0, fmt.Errorf("%w: bitmap operand at byte %d: first %d, %d bytes out of range", ErrCorrupt, opStart, first, nb)
		}
		bm := src[pos : pos+int(nb)]
		end := first + 8*nb
		j, _ := slices.BinarySearch(cands, uint32(first))
		for ; j < len(cands) && uint64(cands[j]) < end; j++ {
			d := uint64(cands[j]) - first
			if bm[d>>3]&(1<<(d&7)) != 0 {
				f.mark(j)
			}
		}
		return pos + int(nb), nil
	default:
		return 0, fmt.Errorf("%w: unknown operand kind 0x%02x at byte %d", ErrCorrupt, kind, opStart)
	}
}

// maxBitsLimit is the largest block size for which a Filter marks a list
// operand's offsets in a bit set (limit/8 bytes, kept by the Filter) and
// then tests each candidate, instead of merging the two sorted lists: no
// unpredictable branch per offset.
const maxBitsLimit = 1 << 16

// listBits marks the candidates held by the list operand (count n, first
// offset v, its deltas at src[pos:]; at byte opStart) through the bit set
// f.bits, and returns the position after the operand.
func (f *Filter) listBits(src []byte, pos int, n, v uint64, limit uint32, opStart int) (int, error) {
	if words := int(limit+63) / 64; len(f.bits) < words {
		f.bits = make([]uint64, words) // all clear between calls
	}
	bits := f.bits
	last := uint64(f.cands[len(f.cands)-1])
	lo := v >> 6
	i := uint64(1)
	for {
		bits[v>>6] |= 1 << (v & 63)
		if i == n || v >= last {
			break
		}
		d, p, err := readDelta(src, pos)
		if err != nil {
			clear(bits[lo : v>>6+1])
			return 0, err
		}
		pos = p
		v += d + 1
		i++
		if d >= uint64(limit) || v >= uint64(limit) {
			clear(bits[lo : (v-d-1)>>6+1])
			return 0, fmt.Errorf("%w: list operand at byte %d: offset ≥ block size %d", ErrCorrupt, opStart, limit)
		}
	}
	for j, c := range f.cands {
		if bits[c>>6]&(1<<(c&63)) != 0 {
			f.mark(j)
		}
	}
	clear(bits[lo : v>>6+1])
	return skipUvarints(src, pos, n-i, opStart)
}

// readDelta reads the uvarint at src[pos:], one- and two-byte ones (the
// deltas of most lists) inline.
func readDelta(src []byte, pos int) (uint64, int, error) {
	if pos < len(src) && src[pos] < 0x80 {
		return uint64(src[pos]), pos + 1, nil
	}
	if pos+1 < len(src) && src[pos+1] < 0x80 {
		return uint64(src[pos]&0x7f) | uint64(src[pos+1])<<7, pos + 2, nil
	}
	return readUvarint(src, pos, "delta")
}

// skipUvarints returns the position after the n varints at src[pos:]; an
// error names the operand (at byte opStart) when src ends first.
func skipUvarints(src []byte, pos int, n uint64, opStart int) (int, error) {
	for n > 0 {
		// Eight bytes at a time: a varint ends at each byte whose high bit
		// is clear.
		for n >= 8 && pos+8 <= len(src) {
			w := binary.LittleEndian.Uint64(src[pos:])
			ends := uint64(mathbits.OnesCount64(^w & 0x8080808080808080))
			if ends > n {
				break
			}
			n -= ends
			pos += 8
		}
		if n == 0 {
			break
		}
		if pos >= len(src) {
			return 0, fmt.Errorf("%w: list operand at byte %d: truncated", ErrCorrupt, opStart)
		}
		if src[pos] < 0x80 {
			n--
		}
		pos++
	}
	return pos, nil
}

// Kept returns the candidates marked by Add, ascending, written over the
// slice given to Reset.
func (f *Filter) Kept() []uint32 {
	out := f.cands[:0]
	for i, c := range f.cands {
		if f.found[i>>6]&(1<<(i&63)) != 0 {
			out = append(out, c)
		}
	}
	return out
}
