package trace

// This file decodes a chunk payload that arrived in a write request (a CBOR
// body of POST /v1/traces is a chunk payload, docs/format/chunk-payload.md)
// and says whether the daemon may store those bytes as the chunk itself
// instead of encoding the decoded spans again (DecodeChunkLayout,
// PayloadLayout.Storable), and where to cut them into zstd frames
// (PayloadLayout.FrameCuts, as ChunkEncoder.FrameCuts cuts what it wrote).

import "fmt"

// PayloadLayout is what DecodeChunkLayout learned about a payload besides
// its spans: whether it may be stored as it is, and where its spans start.
type PayloadLayout struct {
	size     int
	bodyAt   int   // where the span list's first span starts
	marks    []int // where each span the span index marks starts, from bodyAt
	storable bool
	reason   string // why it is not storable
}

// DecodeChunkLayout is DecodeChunk (the same spans, the same errors) that
// also returns the payload's layout. The layout says the payload is
// Storable when a reader could not tell it from what ChunkEncoder writes
// for the decoded spans in the ways that matter to a store:
//   - it decoded under limits within DefaultLimits (what EncodeChunk's
//     output stays within, so every reader decodes it);
//   - its string table holds exactly the strings its spans use, numbered
//     in first-use order (so the table is the chunk's distinct strings,
//     as the text index expects of a stored chunk);
//   - its span index is the encoder's: version 1 for at most
//     SpanIndexStride spans, else version 2 at stride SpanIndexStride (so
//     a reader of one span walks over fewer than SpanIndexStride others
//     and the payload cuts into frames as the encoder's does).
//
// Heads longer than the shortest form and explicit default values, which
// every decoder accepts, do not make a payload unstorable.
func DecodeChunkLayout(payload []byte, lim Limits) ([]*Span, *PayloadLayout, error) {
	d := chunkDecoder{p: payload, lim: lim.withDefaults()}
	spans, err := d.all()
	if err != nil {
		return nil, nil, err
	}
	n := len(spans)
	l := &PayloadLayout{size: len(payload), bodyAt: d.listAt}
	def := DefaultLimits()
	switch {
	case d.lim.MaxDepth > def.MaxDepth || d.lim.MaxStrings > def.MaxStrings || d.lim.MaxSpans > def.MaxSpans ||
		d.lim.MaxRecords > def.MaxRecords || d.lim.MaxStringLen > def.MaxStringLen:
		l.reason = "decoded under limits beyond DefaultLimits"
	case d.refsOutOfOrder:
		l.reason = "string table not in first-use order"
	case d.nextRef != d.nstrs:
		l.reason = fmt.Sprintf("string table of %d entries, %d used", d.nstrs, d.nextRef)
	case n <= SpanIndexStride && d.stride != 0:
		l.reason = fmt.Sprintf("span index in a payload of %d spans", n)
	case n > SpanIndexStride && d.stride != SpanIndexStride:
		l.reason = fmt.Sprintf("span index stride %d (none: 0), want %d", d.stride, SpanIndexStride)
	default:
		l.storable = true
		l.marks = make([]int, len(d.marks))
		for k, m := range d.marks {
			l.marks[k] = int(m.off) - l.bodyAt
		}
	}
	return spans, l, nil
}

// Storable reports whether the payload may be stored as the chunk of its
// spans (see DecodeChunkLayout); when it may not, the error says why. A
// nil layout is not storable.
func (l *PayloadLayout) Storable() (bool, error) {
	if l == nil {
		return false, fmt.Errorf("payload not storable as sent: no layout")
	}
	if l.storable {
		return true, nil
	}
	return false, fmt.Errorf("payload not storable as sent: %s", l.reason)
}

// FrameCuts appends to cuts where a storable payload may be cut into
// independently compressed pieces, exactly as ChunkEncoder.FrameCuts
// cuts the payload it writes for the same spans. It appends nothing for a
// payload that is not storable (or a nil layout).
func (l *PayloadLayout) FrameCuts(cuts []int, target int) []int {
	if l == nil || !l.storable {
		return cuts
	}
	return frameCuts(cuts, l.marks, l.bodyAt, l.size, target)
}

// frameCuts appends the cuts of a payload of size bytes whose span list's
// first span starts at bodyAt and whose marked spans start at bodyAt +
// marks[k] (ChunkEncoder.FrameCuts says where it cuts).
func frameCuts(cuts []int, marks []int, bodyAt, size, target int) []int {
	if len(marks) == 0 || bodyAt == 0 || size <= 2*target {
		return cuts
	}
	cuts = append(cuts, bodyAt)
	last := bodyAt
	for _, m := range marks {
		if at := bodyAt + m; at-last >= target && size-at >= target/2 {
			cuts = append(cuts, at)
			last = at
		}
	}
	return cuts
}
