package atf

import (
	"context"
	"fmt"
	"io"
)

// Recovery names how the number of events of a file was decided.
type Recovery string

const (
	// RecoveryFooter: a valid footer at the offset the header names.
	RecoveryFooter Recovery = "footer"
	// RecoveryEOFFooter: the header is a placeholder (its rewrite was lost)
	// but the last 64 bytes are a valid footer.
	RecoveryEOFFooter Recovery = "eof_footer"
	// RecoverySize: no footer (crashed session): every whole event that fits.
	RecoverySize Recovery = "size"
	// RecoveryWalk (detail files): records were walked to the end of the
	// file, or to the first record that does not fit, without a footer that
	// agrees with them.
	RecoveryWalk Recovery = "walk"
)

// IndexLayout is what the header, the footer and the file size say about an
// index file, reconciled.
type IndexLayout struct {
	Header IndexHeader
	// Footer is the footer used for the count, nil when none was valid.
	Footer *IndexFooter
	Size   int64 // file size in bytes
	// Count is the number of events to read, starting at
	// Header.EventsOffset; always within the file.
	Count    int64
	Recovery Recovery
	// TornBytes counts bytes that are neither header, counted events nor the
	// footer: a torn last record, or events beyond a footer's count.
	TornBytes int64
	// Clamped reports a footer that claimed more events than the file holds.
	Clamped bool
}

// ReadIndexLayout reads the header and footer candidates of an index file of
// the given size and decides how many events it holds. It reads at most
// three 64-byte blocks. Name is used in errors only.
func ReadIndexLayout(name string, r io.ReaderAt, size int64) (IndexLayout, error) {
	if size < HeaderSize {
		return IndexLayout{}, &FormatError{File: name, Offset: 0, Err: ErrTruncated,
			Msg: fmt.Sprintf("index file has %d bytes, its header needs %d", size, HeaderSize)}
	}
	var buf [HeaderSize]byte
	if _, err := r.ReadAt(buf[:], 0); err != nil {
		return IndexLayout{}, fmt.Errorf("atf: %s: reading index header: %w", name, err)
	}
	h := parseIndexHeader(buf[:])
	switch {
	case string(h.Magic[:]) != IndexMagic:
		return IndexLayout{}, &FormatError{File: name, Offset: 0, Err: ErrNotATF,
			Msg: fmt.Sprintf("magic %q, want %q", h.Magic[:], IndexMagic)}
	case h.Endian != EndianLittle:
		return IndexLayout{}, &FormatError{File: name, Offset: 4, Err: ErrUnsupported,
			Msg: fmt.Sprintf("endian byte %#x, only 0x01 (little-endian) is defined", h.Endian)}
	case h.Version != SupportedVersion:
		return IndexLayout{}, &FormatError{File: name, Offset: 5, Err: ErrUnsupported,
			Msg: fmt.Sprintf("version %d, want %d", h.Version, SupportedVersion)}
	case h.EventSize != IndexEventSize:
		return IndexLayout{}, &FormatError{File: name, Offset: 24, Err: ErrUnsupported,
			Msg: fmt.Sprintf("event size %d, want %d", h.EventSize, IndexEventSize)}
	case h.EventsOffset < HeaderSize || h.EventsOffset > uint64(size):
		return IndexLayout{}, &FormatError{File: name, Offset: 32, Err: ErrCorrupt,
			Msg: fmt.Sprintf("events offset %d outside the file (%d bytes)", h.EventsOffset, size)}
	}
	l := IndexLayout{Header: h, Size: size}
	eo := int64(h.EventsOffset)

	// 1. The footer the header points to.
	if fo := h.FooterOffset; fo >= h.EventsOffset && fo <= uint64(size) && uint64(size)-fo >= FooterSize &&
		(fo-h.EventsOffset)%IndexEventSize == 0 {
		if f, ok := readIndexFooter(r, int64(fo)); ok {
			l.useFooter(f, (int64(fo)-eo)/IndexEventSize, RecoveryFooter)
			return l, nil
		}
	}
	// 2. A footer in the last 64 bytes (the header rewrite was lost).
	if size-eo >= FooterSize {
		if f, ok := readIndexFooter(r, size-FooterSize); ok {
			l.useFooter(f, (size-FooterSize-eo)/IndexEventSize, RecoveryEOFFooter)
			return l, nil
		}
	}
	// 3. Every whole event that fits.
	l.Recovery = RecoverySize
	l.Count = (size - eo) / IndexEventSize
	l.TornBytes = size - eo - l.Count*IndexEventSize
	return l, nil
}

func readIndexFooter(r io.ReaderAt, off int64) (IndexFooter, bool) {
	var buf [FooterSize]byte
	if _, err := r.ReadAt(buf[:], off); err != nil {
		return IndexFooter{}, false
	}
	f := parseIndexFooter(buf[:])
	return f, f.valid()
}

// useFooter takes the footer's count, clamped to capacity events.
func (l *IndexLayout) useFooter(f IndexFooter, capacity int64, how Recovery) {
	l.Footer = &f
	l.Recovery = how
	l.Count = capacity
	if f.EventCount < uint64(capacity) {
		l.Count = int64(f.EventCount)
	} else if f.EventCount > uint64(capacity) {
		l.Clamped = true
	}
	l.TornBytes = l.Size - int64(l.Header.EventsOffset) - l.Count*IndexEventSize - FooterSize
}

// IndexFile is a decoded index.atf: its layout and its events in file order
// (Events[i] has index_seq i).
type IndexFile struct {
	IndexLayout
	Events []IndexEvent
}

// Event returns the event at index_seq seq (O(1)).
func (f *IndexFile) Event(seq uint32) (IndexEvent, bool) {
	if int64(seq) >= int64(len(f.Events)) {
		return IndexEvent{}, false
	}
	return f.Events[seq], true
}

// ParseIndex decodes an index.atf image held in memory.
func ParseIndex(name string, data []byte) (*IndexFile, error) {
	return ReadIndex(context.Background(), name, memImage(data), int64(len(data)))
}

// memImage is a file image held in memory; readers slice it instead of
// copying.
type memImage []byte

func (m memImage) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(m)) {
		return 0, io.EOF
	}
	n := copy(p, m[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readChunkEvents is how many events ReadIndex reads per ReadAt.
const readChunkEvents = 1 << 15

// ReadIndex decodes an index file of the given size: the layout, then the
// counted events, read in 1 MiB pieces. Memory is 32 bytes per counted event
// plus the read buffer; the count never exceeds what the file holds.
func ReadIndex(ctx context.Context, name string, r io.ReaderAt, size int64) (*IndexFile, error) {
	l, err := ReadIndexLayout(name, r, size)
	if err != nil {
		return nil, err
	}
	f := &IndexFile{IndexLayout: l, Events: make([]IndexEvent, l.Count)}
	err = forEachEventChunk(ctx, name, r, l, func(first int64, b []byte) {
		decodeIndexEvents(f.Events[first:first+int64(len(b))/IndexEventSize], b)
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// forEachEventChunk calls fn with consecutive pieces of the counted event
// region and the index_seq of each piece's first event.
func forEachEventChunk(ctx context.Context, name string, r io.ReaderAt, l IndexLayout, fn func(first int64, b []byte)) error {
	if l.Count == 0 {
		return nil
	}
	n := min(l.Count, readChunkEvents)
	img, inMemory := r.(memImage)
	var buf []byte
	if !inMemory {
		buf = make([]byte, n*IndexEventSize)
	}
	for first := int64(0); first < l.Count; first += n {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(n, l.Count-first)
		off := int64(l.Header.EventsOffset) + first*IndexEventSize
		if inMemory {
			// Decode in place: the layout guarantees the range is inside.
			fn(first, img[off:off+k*IndexEventSize])
			continue
		}
		if _, err := r.ReadAt(buf[:k*IndexEventSize], off); err != nil {
			return fmt.Errorf("atf: %s: reading events at offset %d: %w", name, off, err)
		}
		fn(first, buf[:k*IndexEventSize])
	}
	return nil
}

// timestampRange returns the smallest and largest timestamp of the counted
// events without keeping them (a streaming pass).
func timestampRange(ctx context.Context, name string, r io.ReaderAt, l IndexLayout) (lo, hi uint64, err error) {
	lo = ^uint64(0)
	err = forEachEventChunk(ctx, name, r, l, func(_ int64, b []byte) {
		for i := 0; i+IndexEventSize <= len(b); i += IndexEventSize {
			ts := le.Uint64(b[i:])
			lo = min(lo, ts)
			hi = max(hi, ts)
		}
	})
	return lo, hi, err
}
