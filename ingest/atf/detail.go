package atf

import (
	"fmt"
)

// DetailFile is a decoded detail.atf: the file image plus an ordinal table of
// record offsets, so that a detail_seq resolves in O(1).
type DetailFile struct {
	Header DetailHeader
	// Footer is the footer that ended the walk, nil when none was found.
	Footer    *DetailFooter
	Size      int64
	Recovery  Recovery // RecoveryFooter or RecoveryWalk
	TornBytes int64    // bytes after the last whole record that are not a footer
	data      []byte
	offsets   []int64 // detail_seq -> record offset
}

// ParseDetail decodes a detail.atf image: it validates the header, then walks
// records from events_offset by total_length until the "2DTA" footer, the end
// of the file, or a record that cannot be one (shorter than its 24-byte
// header or running past the end: a torn tail). The image is retained;
// payloads alias it.
func ParseDetail(name string, data []byte) (*DetailFile, error) {
	size := int64(len(data))
	if size < HeaderSize {
		return nil, &FormatError{File: name, Offset: 0, Err: ErrTruncated,
			Msg: fmt.Sprintf("detail file has %d bytes, its header needs %d", size, HeaderSize)}
	}
	h := parseDetailHeader(data)
	switch {
	case string(h.Magic[:]) != DetailMagic:
		return nil, &FormatError{File: name, Offset: 0, Err: ErrNotATF,
			Msg: fmt.Sprintf("magic %q, want %q", h.Magic[:], DetailMagic)}
	case h.Endian != EndianLittle:
		return nil, &FormatError{File: name, Offset: 4, Err: ErrUnsupported,
			Msg: fmt.Sprintf("endian byte %#x, only 0x01 (little-endian) is defined", h.Endian)}
	case h.Version != SupportedVersion:
		return nil, &FormatError{File: name, Offset: 5, Err: ErrUnsupported,
			Msg: fmt.Sprintf("version %d, want %d", h.Version, SupportedVersion)}
	case h.EventsOffset < HeaderSize || h.EventsOffset > uint64(size):
		return nil, &FormatError{File: name, Offset: 20, Err: ErrCorrupt,
			Msg: fmt.Sprintf("events offset %d outside the file (%d bytes)", h.EventsOffset, size)}
	}
	d := &DetailFile{Header: h, Size: size, Recovery: RecoveryWalk, data: data}
	eo := int64(h.EventsOffset)
	off := eo
	for size-off >= DetailRecordHeaderSize {
		n := int64(le.Uint32(data[off:]))
		if string(data[off:off+4]) == DetailFooterMagic && size-off >= FooterSize && (size-off == FooterSize || n > size-off) {
			f := parseDetailFooter(data[off:])
			d.Footer = &f
			if f.EventCount == uint64(len(d.offsets)) && f.BytesLength == uint64(off-eo) {
				d.Recovery = RecoveryFooter
			}
			d.TornBytes = size - off - FooterSize
			return d, nil
		}
		if n < DetailRecordHeaderSize || n > size-off {
			break
		}
		d.offsets = append(d.offsets, off)
		off += n
	}
	d.TornBytes = size - off
	return d, nil
}

// Len returns the number of whole records.
func (d *DetailFile) Len() int { return len(d.offsets) }

// Record returns the record with ordinal seq (a detail_seq), O(1).
func (d *DetailFile) Record(seq uint32) (DetailRecord, bool) {
	if d == nil || int64(seq) >= int64(len(d.offsets)) {
		return DetailRecord{}, false
	}
	off := d.offsets[seq]
	b := d.data[off:]
	n := le.Uint32(b)
	return DetailRecord{
		Offset:      off,
		Length:      n,
		EventType:   le.Uint16(b[4:]),
		Flags:       le.Uint16(b[6:]),
		IndexSeq:    le.Uint32(b[8:]),
		ThreadID:    le.Uint32(b[12:]),
		TimestampNS: le.Uint64(b[16:]),
		Payload:     b[DetailRecordHeaderSize:n:n],
	}, true
}

// indexSeqAt reads only the back link of record seq.
func (d *DetailFile) indexSeqAt(seq int) uint32 {
	return le.Uint32(d.data[d.offsets[seq]+8:])
}

// Thread is one thread's pair of files, navigable both ways in O(1).
type Thread struct {
	Name   string // "thread_N"
	Index  *IndexFile
	Detail *DetailFile // nil when the thread has no detail file
}

// DetailOf follows the forward link of the index event at indexSeq. It
// succeeds only when the detail record exists and links back to indexSeq.
func (t *Thread) DetailOf(indexSeq uint32) (DetailRecord, bool) {
	e, ok := t.Index.Event(indexSeq)
	if !ok || e.DetailSeq == NoDetail {
		return DetailRecord{}, false
	}
	r, ok := t.Detail.Record(e.DetailSeq)
	if !ok || r.IndexSeq != indexSeq {
		return DetailRecord{}, false
	}
	return r, true
}

// IndexOf follows the back link of detail record detailSeq. It succeeds only
// when the index event exists and links forward to detailSeq.
func (t *Thread) IndexOf(detailSeq uint32) (IndexEvent, bool) {
	r, ok := t.Detail.Record(detailSeq)
	if !ok {
		return IndexEvent{}, false
	}
	e, ok := t.Index.Event(r.IndexSeq)
	if !ok || e.DetailSeq != detailSeq {
		return IndexEvent{}, false
	}
	return e, true
}

// unlinkedDetails counts detail records whose back link does not name an
// index event that links forward to them.
func (t *Thread) unlinkedDetails() int64 {
	if t.Detail == nil {
		return 0
	}
	var n int64
	for i := range t.Detail.offsets {
		seq := t.Detail.indexSeqAt(i)
		e, ok := t.Index.Event(seq)
		if !ok || int64(e.DetailSeq) != int64(i) {
			n++
		}
	}
	return n
}
