package trace

import "fmt"

// StripSpanIndex rewrites a version 2 payload (0x83, with a span index) as
// version 1 (0x82, without): the layout every payload had before the span
// index, so tests can check that such data still reads, however many spans
// it holds. A version 1 payload is returned as it is.
func StripSpanIndex(p []byte) ([]byte, error) {
	d := chunkDecoder{p: p, lim: DefaultLimits()}
	n, err := d.prologue()
	if err != nil {
		return nil, err
	}
	if d.stride == 0 {
		return p, nil
	}
	end := d.off - len(appendHead(nil, majorArray, uint64(n))) // the span list head
	if end < d.indexAt {
		return nil, fmt.Errorf("span index at %d ends at %d", d.indexAt, end)
	}
	out := append([]byte{majorArray | 2}, p[1:d.indexAt]...)
	return append(out, p[end:]...), nil
}

// SpanStart is where span i of the view's payload starts.
func SpanStart(v *ChunkView, i int) (int, error) {
	off, _, err := v.offset(i)
	return off, err
}

// ViewEntsAt is where the view's string table entry heads are kept (nil
// when it has none): a test sees that a released view's arrays are lent
// to the next view.
func ViewEntsAt(v *ChunkView) *int32 {
	if len(v.ents) == 0 {
		return nil
	}
	return &v.ents[0]
}
