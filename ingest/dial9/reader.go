package dial9

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
)

// errShort means the frame being parsed runs past the buffered bytes: the
// reader buffers more input and parses the frame again from its start, or
// reports ErrTruncated at end of input. It never escapes the package.
var errShort = errors.New("dial9: short buffer")

const (
	initialWindow = 64 << 10
	// maxDynamicDepth bounds nesting of DynamicList/DynamicMap values (well
	// inside trace.MaxValueDepth, so converted attributes stay valid).
	maxDynamicDepth = 16
	// maxWarnings bounds the warnings a Reader keeps.
	maxWarnings = 32
)

// Stats counts what a Reader has decoded so far.
type Stats struct {
	Streams          int64
	SchemaFrames     int64
	StringPoolFrames int64
	StackPoolFrames  int64
	TimestampResets  int64
	AnnotationFrames int64
	Events           int64
	// EventsPerSchema maps schema name to event count, summed over streams.
	EventsPerSchema map[string]int64
	// UnresolvedRefs counts pooled string/stack references whose id was
	// not in the stream's pool.
	UnresolvedRefs int64
	// Bytes is the number of decoded (decompressed) bytes consumed.
	Bytes int64
}

// Reader decodes the frames of a dial9 file one event at a time. It sniffs
// and unwraps gzip, rejects legacy TOKIOTRC files, and treats a TRC header
// where a frame tag is expected as the start of a new stream that discards
// schemas, both pools and the timestamp base.
//
// Input is buffered in a window that only grows while a single frame does
// not fit in it, and only after the window was filled with real input, so
// memory stays within twice the largest frame (plus the pools of the
// current stream) whatever lengths the input claims.
type Reader struct {
	src     io.Reader
	gzipped bool
	buf     []byte
	pos     int   // next unread byte in buf
	end     int   // end of buffered bytes in buf
	base    int64 // file offset of buf[0]
	// eof: src is exhausted (or failed: readErr). NewBytesReader's window
	// is the caller's slice, never written to: it starts at eof.
	eof     bool
	readErr error

	stream int
	// schemas is indexed by type id; registered lists the ids set in the
	// current stream, so that a stream reset costs what was registered.
	schemas    []*Schema
	registered []uint16
	strings    map[uint32]string
	stacks     map[uint32][]uint64
	tsBase     uint64

	stats         Stats
	warnings      []string
	droppedWarns  int
	versionWarned bool
	ev            Event
	evUnresolved  int64
	err           error
}

// NewReader returns a Reader over r. It reads the first bytes to detect
// gzip and the format: a legacy TOKIOTRC file yields ErrLegacyFormat, any
// other non-TRC input ErrBadMagic (both wrapped in a *DecodeError).
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{src: r, buf: make([]byte, initialWindow)}
	return rd, rd.start()
}

// NewBytesReader returns a Reader over data, which it does not modify and
// does not copy unless it is gzip-compressed.
func NewBytesReader(data []byte) (*Reader, error) {
	if IsGzip(data) {
		return NewReader(bytes.NewReader(data))
	}
	rd := &Reader{buf: data, end: len(data), eof: true}
	return rd, rd.start()
}

// IsGzip reports whether head starts with the gzip magic.
func IsGzip(head []byte) bool { return len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b }

func (r *Reader) start() error {
	r.stats.EventsPerSchema = map[string]int64{}
	r.fillAtLeast(len(LegacyMagic))
	if IsGzip(r.buf[r.pos:r.end]) {
		zr, err := gzip.NewReader(io.MultiReader(bytes.NewReader(r.buf[r.pos:r.end]), r.src))
		if err != nil {
			r.err = &DecodeError{Offset: 0, Stream: -1, What: "gzip header", Err: err}
			return r.err
		}
		r.gzipped = true
		r.src = zr
		r.buf = make([]byte, initialWindow)
		r.pos, r.end, r.eof, r.readErr = 0, 0, false, nil
		r.fillAtLeast(len(LegacyMagic))
	}
	head := r.buf[r.pos:r.end]
	var err error
	switch {
	case bytes.HasPrefix(head, []byte(LegacyMagic)):
		err = ErrLegacyFormat
	case len(head) < HeaderSize && bytes.HasPrefix([]byte(Magic), head[:min(len(head), len(Magic))]):
		err = ErrTruncated
		if r.readErr != nil {
			err = r.readErr
		}
	case !bytes.HasPrefix(head, []byte(Magic)):
		err = ErrBadMagic
		if len(head) == 0 && r.readErr != nil {
			err = r.readErr
		}
	}
	r.stream = -1
	if err != nil {
		r.err = &DecodeError{Stream: -1, What: "file header", Err: err}
		return r.err
	}
	r.openStream(head[4])
	r.pos += HeaderSize
	return nil
}

// Gzipped reports whether the input was gzip-compressed.
func (r *Reader) Gzipped() bool { return r.gzipped }

// Stats returns the counts so far. The map is shared; do not modify it.
func (r *Reader) Stats() Stats {
	s := r.stats
	s.Bytes = r.base + int64(r.pos)
	return s
}

// Warnings returns non-fatal findings (bounded; the last one says how many
// were dropped).
func (r *Reader) Warnings() []string {
	out := append([]string{}, r.warnings...)
	if r.droppedWarns > 0 {
		out = append(out, fmt.Sprintf("%d more warnings not shown", r.droppedWarns))
	}
	return out
}

func (r *Reader) warnf(format string, args ...any) {
	if len(r.warnings) >= maxWarnings {
		r.droppedWarns++
		return
	}
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

// Stream returns the index of the current stream.
func (r *Reader) Stream() int { return r.stream }

// Offset returns the decoded-file offset of the next unread frame.
func (r *Reader) Offset() int64 { return r.base + int64(r.pos) }

func (r *Reader) openStream(version byte) {
	r.stream++
	r.stats.Streams++
	for _, id := range r.registered {
		r.schemas[id] = nil
	}
	r.registered = r.registered[:0]
	r.strings = make(map[uint32]string)
	r.stacks = make(map[uint32][]uint64)
	r.tsBase = 0
	if version != Version && !r.versionWarned {
		r.versionWarned = true
		r.warnf("stream %d at offset %d: version byte %d (only %d was ever written); decoding anyway",
			r.stream, r.base+int64(r.pos), version, Version)
	}
}

// fill buffers more input, compacting the window and doubling it when the
// pending frame already fills it. It reports whether any byte was added.
func (r *Reader) fill() bool {
	if r.eof {
		return false
	}
	if r.pos > 0 {
		n := copy(r.buf, r.buf[r.pos:r.end])
		r.base += int64(r.pos)
		r.pos, r.end = 0, n
	}
	if r.end == len(r.buf) {
		nb := make([]byte, 2*len(r.buf))
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	added, idle := false, 0
	for r.end < len(r.buf) {
		n, err := r.src.Read(r.buf[r.end:])
		r.end += n
		if n > 0 {
			added, idle = true, 0
		} else if idle++; idle > 100 && err == nil {
			err = io.ErrNoProgress
		}
		if err != nil {
			r.eof = true
			if err != io.EOF {
				r.readErr = err
			}
			break
		}
	}
	return added
}

func (r *Reader) fillAtLeast(n int) {
	for r.end-r.pos < n && r.fill() {
	}
}

// Next returns the next event. It returns io.EOF at the clean end of the
// input and a *DecodeError for an undecodable frame; after an error every
// call returns the same error. The Event and its Values are reused by the
// next call; strings, byte slices and inline stack frames in it are not.
func (r *Reader) Next() (*Event, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		if r.pos == r.end && !r.fill() {
			if r.readErr != nil {
				r.err = &DecodeError{Offset: r.Offset(), Stream: r.stream, What: "input", Err: r.readErr}
			} else {
				r.err = io.EOF
			}
			return nil, r.err
		}
		b := r.buf[r.pos:r.end]
		off := r.base + int64(r.pos)
		var (
			n    int
			err  error
			what string
			ev   bool
		)
		switch b[0] {
		case TagEvent:
			what = "event frame"
			n, err = r.parseEvent(b, off)
			ev = err == nil
		case TagSchema:
			what = "schema frame"
			n, err = r.parseSchema(b)
		case TagStringPool:
			what = "string pool frame"
			n, err = r.parseStringPool(b, off)
		case TagStackPool:
			what = "stack pool frame"
			n, err = r.parseStackPool(b)
		case TagTimestampReset:
			what = "timestamp reset frame"
			if len(b) < 9 {
				err = errShort
				break
			}
			r.tsBase = binary.LittleEndian.Uint64(b[1:])
			r.stats.TimestampResets++
			n = 9
		case TagSchemaAnnotations:
			what = "schema annotations frame"
			n, err = r.parseAnnotations(b)
		case tagHeader:
			what = "stream header"
			if len(b) < HeaderSize {
				err = errShort
				break
			}
			if string(b[:4]) != Magic {
				err = fmt.Errorf("%w 0x%02x", ErrUnknownTag, b[0])
				break
			}
			r.pos += HeaderSize
			r.openStream(b[4])
			continue
		default:
			what = "frame"
			err = fmt.Errorf("%w 0x%02x", ErrUnknownTag, b[0])
		}
		if err == errShort {
			if r.fill() {
				continue
			}
			err = ErrTruncated
			if r.readErr != nil {
				err = fmt.Errorf("%w: %w", ErrTruncated, r.readErr)
			}
		}
		if err != nil {
			r.err = &DecodeError{Offset: off, Stream: r.stream, What: what, Err: err}
			return nil, r.err
		}
		r.pos += n
		if ev {
			return &r.ev, nil
		}
	}
}

func utf8String(b []byte, what string) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s: %w", what, ErrInvalidUTF8)
	}
	return string(b), nil
}

func (r *Reader) parseSchema(b []byte) (int, error) {
	if len(b) < 5 {
		return 0, errShort
	}
	typeID := binary.LittleEndian.Uint16(b[1:])
	nameLen := int(binary.LittleEndian.Uint16(b[3:]))
	p := 5
	if len(b) < p+nameLen+3 {
		return 0, errShort
	}
	name, err := utf8String(b[p:p+nameLen], "schema name")
	if err != nil {
		return 0, err
	}
	p += nameLen
	s := &Schema{TypeID: typeID, Name: name, HasTimestamp: b[p] != 0}
	count := int(binary.LittleEndian.Uint16(b[p+1:]))
	p += 3
	// Every field definition takes at least 3 bytes: allocate only what
	// the buffered input can hold.
	if len(b)-p < 3*count {
		return 0, errShort
	}
	s.Fields = make([]Field, count)
	for i := range s.Fields {
		if len(b) < p+2 {
			return 0, errShort
		}
		fl := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if len(b) < p+fl+1 {
			return 0, errShort
		}
		fname, err := utf8String(b[p:p+fl], fmt.Sprintf("schema %q field %d name", name, i))
		if err != nil {
			return 0, err
		}
		ft := FieldType(b[p+fl])
		if !ft.Valid() {
			return 0, fmt.Errorf("schema %q field %q: %w %#x", name, fname, ErrUnknownFieldType, uint8(ft))
		}
		s.Fields[i] = Field{Name: fname, Type: ft}
		p += fl + 1
	}
	if int(typeID) < len(r.schemas) && r.schemas[typeID] != nil {
		if !r.schemas[typeID].sameLayout(s) {
			return 0, fmt.Errorf("type_id %d (%q, was %q): %w", typeID, name, r.schemas[typeID].Name, ErrSchemaConflict)
		}
		r.stats.SchemaFrames++
		return p, nil
	}
	s.index = make(map[string]int, len(s.Fields))
	for i, f := range s.Fields {
		if _, dup := s.index[f.Name]; !dup {
			s.index[f.Name] = i
		}
	}
	if len(r.schemas) <= int(typeID) {
		r.schemas = append(r.schemas, make([]*Schema, int(typeID)+1-len(r.schemas))...)
	}
	r.schemas[typeID] = s
	r.registered = append(r.registered, typeID)
	r.stats.SchemaFrames++
	return p, nil
}

func (r *Reader) parseEvent(b []byte, off int64) (int, error) {
	if len(b) < 3 {
		return 0, errShort
	}
	typeID := binary.LittleEndian.Uint16(b[1:])
	if int(typeID) >= len(r.schemas) || r.schemas[typeID] == nil {
		return 0, fmt.Errorf("%w %d", ErrUnknownTypeID, typeID)
	}
	s := r.schemas[typeID]
	p := 3
	r.evUnresolved = 0
	ev := &r.ev
	ev.Schema, ev.Stream, ev.Offset, ev.HasTimestamp, ev.TimestampNS = s, r.stream, off, s.HasTimestamp, 0
	if s.HasTimestamp {
		if len(b) < 6 {
			return 0, errShort
		}
		delta := uint64(b[3]) | uint64(b[4])<<8 | uint64(b[5])<<16
		if r.tsBase > math.MaxUint64-delta {
			return 0, fmt.Errorf("base %d + delta %d: %w", r.tsBase, delta, ErrTimestamp)
		}
		ev.TimestampNS = r.tsBase + delta
		p = 6
	}
	if cap(ev.Values) < len(s.Fields) {
		ev.Values = make([]Value, len(s.Fields))
	}
	ev.Values = ev.Values[:len(s.Fields)]
	for i, f := range s.Fields {
		v := &ev.Values[i]
		t := f.Type
		if t.IsOptional() {
			if len(b) <= p {
				return 0, errShort
			}
			present := b[p] != 0
			p++
			if !present {
				*v = Value{Type: t.Base(), Absent: true}
				continue
			}
		}
		n, err := r.parseValue(b[p:], t.Base(), 0, v)
		if err != nil {
			if err == errShort {
				return 0, err
			}
			return 0, fmt.Errorf("schema %q field %q (%v): %w", s.Name, f.Name, f.Type, err)
		}
		p += n
	}
	if s.HasTimestamp {
		r.tsBase = ev.TimestampNS
	}
	r.stats.Events++
	r.stats.EventsPerSchema[s.Name]++
	r.stats.UnresolvedRefs += r.evUnresolved
	return p, nil
}

// uvarint decodes unsigned LEB128 of at most 10 bytes; excess bits of the
// 10th byte are dropped and over-long encodings accepted, as upstream does.
func uvarint(b []byte) (uint64, int, error) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1, nil
	}
	var x uint64
	var s uint
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, 0, errShort
		}
		c := b[i]
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			return x, i + 1, nil
		}
		s += 7
	}
	return 0, 0, ErrVarintTooLong
}

func lenPrefixed(b []byte) ([]byte, int, error) {
	if len(b) < 4 {
		return nil, 0, errShort
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if uint64(len(b)-4) < n {
		return nil, 0, errShort
	}
	return b[4 : 4+n], 4 + int(n), nil
}

// parseValue decodes one value of base type t into v and returns the bytes
// consumed. Inside dynamic containers element tags are plain types; an
// optional element tag decodes as its base type without a presence byte.
func (r *Reader) parseValue(b []byte, t FieldType, depth int, v *Value) (int, error) {
	*v = Value{Type: t}
	switch t {
	case TypeI64:
		if len(b) < 8 {
			return 0, errShort
		}
		v.Int = int64(binary.LittleEndian.Uint64(b))
		return 8, nil
	case TypeF64:
		if len(b) < 8 {
			return 0, errShort
		}
		v.Float = math.Float64frombits(binary.LittleEndian.Uint64(b))
		return 8, nil
	case TypeBool:
		if len(b) < 1 {
			return 0, errShort
		}
		v.Bool = b[0] != 0
		return 1, nil
	case TypeString:
		s, n, err := lenPrefixed(b)
		if err != nil {
			return 0, err
		}
		v.Str = lossyString(s)
		return n, nil
	case TypeBytes:
		s, n, err := lenPrefixed(b)
		if err != nil {
			return 0, err
		}
		v.Bytes = append([]byte{}, s...)
		return n, nil
	case TypePooledString:
		if len(b) < 4 {
			return 0, errShort
		}
		id := binary.LittleEndian.Uint32(b)
		v.Uint = uint64(id)
		s, ok := r.strings[id]
		v.Str, v.Unresolved = s, !ok
		if !ok {
			r.evUnresolved++
		}
		return 4, nil
	case TypePooledStackFrames:
		if len(b) < 4 {
			return 0, errShort
		}
		id := binary.LittleEndian.Uint32(b)
		v.Uint = uint64(id)
		fr, ok := r.stacks[id]
		v.Frames, v.Unresolved = fr, !ok
		if !ok {
			r.evUnresolved++
		}
		return 4, nil
	case TypeStackFrames:
		if len(b) < 4 {
			return 0, errShort
		}
		n := uint64(binary.LittleEndian.Uint32(b))
		if uint64(len(b)-4)/8 < n {
			return 0, errShort
		}
		v.Frames = make([]uint64, n)
		for i := range v.Frames {
			v.Frames[i] = binary.LittleEndian.Uint64(b[4+8*i:])
		}
		return 4 + 8*int(n), nil
	case TypeVarint:
		x, n, err := uvarint(b)
		v.Uint = x
		return n, err
	case TypeU8:
		if len(b) < 1 {
			return 0, errShort
		}
		v.Uint = uint64(b[0])
		return 1, nil
	case TypeU16:
		if len(b) < 2 {
			return 0, errShort
		}
		v.Uint = uint64(binary.LittleEndian.Uint16(b))
		return 2, nil
	case TypeU32:
		if len(b) < 4 {
			return 0, errShort
		}
		v.Uint = uint64(binary.LittleEndian.Uint32(b))
		return 4, nil
	case TypeStringMap:
		if len(b) < 4 {
			return 0, errShort
		}
		count := uint64(binary.LittleEndian.Uint32(b))
		if uint64(len(b)-4)/8 < count {
			return 0, errShort
		}
		p := 4
		v.Pairs = make([]StringPair, count)
		for i := range v.Pairs {
			k, n, err := lenPrefixed(b[p:])
			if err != nil {
				return 0, err
			}
			p += n
			val, n, err := lenPrefixed(b[p:])
			if err != nil {
				return 0, err
			}
			p += n
			v.Pairs[i] = StringPair{Key: lossyString(k), Value: lossyString(val)}
		}
		return p, nil
	case TypeDynamicList, TypeDynamicMap:
		if depth >= maxDynamicDepth {
			return 0, ErrTooDeep
		}
		if len(b) < 4 {
			return 0, errShort
		}
		count := uint64(binary.LittleEndian.Uint32(b))
		per := uint64(2) // a tag and at least one value byte per element
		if t == TypeDynamicMap {
			per = 4
		}
		if uint64(len(b)-4)/per < count {
			return 0, errShort
		}
		p := 4
		elem := func(out *Value) error {
			if len(b) <= p {
				return errShort
			}
			et := FieldType(b[p])
			if !et.Valid() {
				return fmt.Errorf("element tag %#x: %w", uint8(et), ErrUnknownFieldType)
			}
			p++
			n, err := r.parseValue(b[p:], et.Base(), depth+1, out)
			p += n
			return err
		}
		if t == TypeDynamicList {
			v.List = make([]Value, count)
			for i := range v.List {
				if err := elem(&v.List[i]); err != nil {
					return 0, err
				}
			}
			return p, nil
		}
		v.Map = make([]ValuePair, count)
		for i := range v.Map {
			if err := elem(&v.Map[i].Key); err != nil {
				return 0, err
			}
			if err := elem(&v.Map[i].Value); err != nil {
				return 0, err
			}
		}
		return p, nil
	}
	return 0, fmt.Errorf("%w %#x", ErrUnknownFieldType, uint8(t))
}

// lossyString converts string field bytes, replacing invalid UTF-8 as the
// reference decoder's owned path does.
func lossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

// parseStringPool checks the whole frame is buffered, then stores its
// entries. Entries that are not valid UTF-8 are dropped, as upstream.
func (r *Reader) parseStringPool(b []byte, off int64) (int, error) {
	if len(b) < 5 {
		return 0, errShort
	}
	count := uint64(binary.LittleEndian.Uint32(b[1:]))
	if uint64(len(b)-5)/8 < count {
		return 0, errShort
	}
	p := 5
	for i := uint64(0); i < count; i++ {
		if len(b) < p+8 {
			return 0, errShort
		}
		n := uint64(binary.LittleEndian.Uint32(b[p+4:]))
		if uint64(len(b)-p-8) < n {
			return 0, errShort
		}
		p += 8 + int(n)
	}
	p = 5
	for i := uint64(0); i < count; i++ {
		id := binary.LittleEndian.Uint32(b[p:])
		n := int(binary.LittleEndian.Uint32(b[p+4:]))
		data := b[p+8 : p+8+n]
		if utf8.Valid(data) {
			r.strings[id] = string(data)
		} else {
			r.warnf("string pool entry %d at offset %d: invalid UTF-8, dropped", id, off+int64(p))
		}
		p += 8 + n
	}
	r.stats.StringPoolFrames++
	return p, nil
}

func (r *Reader) parseStackPool(b []byte) (int, error) {
	if len(b) < 5 {
		return 0, errShort
	}
	count := uint64(binary.LittleEndian.Uint32(b[1:]))
	if uint64(len(b)-5)/8 < count {
		return 0, errShort
	}
	p := 5
	for i := uint64(0); i < count; i++ {
		if len(b) < p+8 {
			return 0, errShort
		}
		n := uint64(binary.LittleEndian.Uint32(b[p+4:]))
		if uint64(len(b)-p-8)/8 < n {
			return 0, errShort
		}
		p += 8 + 8*int(n)
	}
	p = 5
	for i := uint64(0); i < count; i++ {
		id := binary.LittleEndian.Uint32(b[p:])
		n := int(binary.LittleEndian.Uint32(b[p+4:]))
		frames := make([]uint64, n)
		for j := range frames {
			frames[j] = binary.LittleEndian.Uint64(b[p+8+8*j:])
		}
		r.stacks[id] = frames
		p += 8 + 8*n
	}
	r.stats.StackPoolFrames++
	return p, nil
}

func (r *Reader) parseAnnotations(b []byte) (int, error) {
	typeID, n, err := uvarint(b[1:])
	if err != nil {
		return 0, err
	}
	p := 1 + n
	if len(b) < p+2 {
		return 0, errShort
	}
	count := int(binary.LittleEndian.Uint16(b[p:]))
	p += 2
	if len(b)-p < 8*count {
		return 0, errShort
	}
	anns := make([]Annotation, count)
	for i := range anns {
		if len(b) < p+4 {
			return 0, errShort
		}
		idx := binary.LittleEndian.Uint16(b[p:])
		kl := int(binary.LittleEndian.Uint16(b[p+2:]))
		p += 4
		if len(b) < p+kl+4 {
			return 0, errShort
		}
		key, err := utf8String(b[p:p+kl], "annotation key")
		if err != nil {
			return 0, err
		}
		p += kl
		val, vn, err := lenPrefixed(b[p:])
		if err != nil {
			return 0, err
		}
		sval, err := utf8String(val, "annotation value")
		if err != nil {
			return 0, err
		}
		p += vn
		anns[i] = Annotation{FieldIndex: idx, Key: key, Value: sval}
	}
	id := uint16(typeID)
	if int(id) < len(r.schemas) && r.schemas[id] != nil {
		r.schemas[id].Annotations = append(r.schemas[id].Annotations, anns...)
	}
	r.stats.AnnotationFrames++
	return p, nil
}
