package index

import mathbits "math/bits"

// Keyspace prefixes (first byte of every key). docs/format/index-keys.md
// documents each key and value byte by byte.
const (
	prefixAttr   = 'a' // 'a' key value block → postings
	prefixBlock  = 'b' // 'b' block → block summary
	prefixColumn = 'c' // 'c' block → time column
	prefixMeta   = 'm' // 'm' name → format; state (counters, watermark, open block)
	prefixRows   = 'r' // 'r' block → attribute and text ids of the open block's entries
	prefixSeqs   = 'q' // 'q' group → trace-id runs of 64 sequence numbers
	prefixTrace  = 't' // 't' traceID(16) → span records of the trace
	prefixValue  = 'v' // 'v' value key → empty: value occurs under key
	prefixText   = 'w' // 'w' text block → postings
)

// Meta key names.
var (
	keyFormat = []byte("mformat")
	keyState  = []byte("mstate")
)

// formatVersion is the version of the key layout written in keyFormat.
const formatVersion = 1

// seqGroupShift: a 'q' key covers 1<<seqGroupShift consecutive sequence
// numbers.
const seqGroupShift = 6

// Block shift bounds and default (spans per posting block = 1<<shift).
const (
	DefaultBlockShift = 12
	MinBlockShift     = 4
	MaxBlockShift     = 16
)

// appendOrdered appends v in the order-preserving variable-length form used
// inside keys: one length byte n (0..8) followed by the n low bytes of v,
// big-endian, with no leading zero byte. Byte order of the encodings is
// numeric order, and the encoding is self-delimiting, so a key made of
// several of them has every proper field prefix as a key prefix.
func appendOrdered(dst []byte, v uint64) []byte {
	n := (mathbits.Len64(v) + 7) / 8
	dst = append(dst, byte(n))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

// readOrdered decodes an appendOrdered field at the start of src and
// returns it and its length.
func readOrdered(src []byte) (uint64, int, bool) {
	if len(src) == 0 || src[0] > 8 || len(src) < 1+int(src[0]) {
		return 0, 0, false
	}
	n := int(src[0])
	if n > 0 && src[1] == 0 {
		return 0, 0, false // not minimal
	}
	var v uint64
	for _, b := range src[1 : 1+n] {
		v = v<<8 | uint64(b)
	}
	return v, 1 + n, true
}

// attrPrefix is the key prefix of every posting list of attribute (k, v).
func attrPrefix(dst []byte, k, v uint64) []byte {
	return appendOrdered(appendOrdered(append(dst, prefixAttr), k), v)
}

// textPrefix is the key prefix of every posting list of text id t.
func textPrefix(dst []byte, t uint64) []byte {
	return appendOrdered(append(dst, prefixText), t)
}

// postingKey appends the key of a posting list ('a' or 'w').
func postingKey(dst []byte, prefix byte, a, b, block uint64) []byte {
	if prefix == prefixAttr {
		dst = attrPrefix(dst, a, b)
	} else {
		dst = textPrefix(dst, a)
	}
	return appendOrdered(dst, block)
}

func traceKey(dst []byte, id [16]byte) []byte {
	dst = append(dst, prefixTrace)
	return append(dst, id[:]...)
}

// numKey appends a key made of a prefix and one number ('b', 'c', 'q').
func numKey(dst []byte, prefix byte, v uint64) []byte {
	return appendOrdered(append(dst, prefix), v)
}

// valueKey appends the key recording that value id v occurs as a value of
// attribute key k.
func valueKey(dst []byte, v, k uint64) []byte {
	return appendOrdered(appendOrdered(append(dst, prefixValue), v), k)
}

// prefixEnd returns the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
