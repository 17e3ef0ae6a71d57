package wtf

import (
	"encoding/binary"
	"fmt"

	"github.com/ztsd/ztsd/trace"
)

// errLoc says where an event buffer lives, for DecodeError.
type errLoc struct {
	chunk   int // -1: no chunks
	chunkID uint32
	part    int // -1: none
	inPart  bool
}

var fileLoc = errLoc{chunk: -1, part: -1}

// errAt wraps err in a DecodeError at byte offset off.
func (l *loader) errAt(loc errLoc, off int64, err error) error {
	return &DecodeError{
		Encoding: l.enc.String(), Chunk: loc.chunk, ChunkID: loc.chunkID, Part: loc.part,
		InPart: loc.inPart, Offset: off, Entry: -1, Err: err,
	}
}

// decodeLegacy decodes a legacy binary trace (BinaryTrace version 3):
//
//	magic, wtf version, format version       3 × u32
//	context info                              legacy utf8 string holding JSON
//	flags                                     u32
//	timebase                                  u32 low word, u32 high word (ms)
//	metadata                                  legacy utf8 string holding JSON
//	events until the end of the file          u16 wire id, u32 µs, packed args
//
// Integers are big-endian in real files; le selects the little-endian
// layout of the original spec, whose strings are read either as the
// writer's utf8 strings or as the spec's u16 length + bytes.
func (l *loader) decodeLegacy(data []byte, le bool) error {
	r := &legacyReader{buf: data, le: le, order: binary.BigEndian}
	if le {
		r.order = binary.LittleEndian
	}
	off := binaryHeaderSize
	ctxText, off, err := r.headerString(off, "context info")
	if err != nil {
		return l.errAt(fileLoc, int64(off), err)
	}
	if err := r.need(off, 12); err != nil {
		return l.errAt(fileLoc, int64(off), fmt.Errorf("header flags and timebase: %w", err))
	}
	flags := r.u32(off)
	low, high := uint64(r.u32(off+4)), uint64(r.u32(off+8))
	tbOff := off + 4
	off += 12
	metaText, off, err := r.headerString(off, "metadata")
	if err != nil {
		return l.errAt(fileLoc, int64(off), err)
	}
	timebase := high<<32 | low
	if timebase > maxTimebaseMS {
		return l.errAt(fileLoc, int64(tbOff), errf(ErrUnsupported, "timebase %d ms is implausible: not the final version 3 header layout (a pre-December 2012 variant?)", timebase))
	}
	ctxVal, err := headerJSON(ctxText)
	if err != nil {
		l.warn.add("context", fmt.Sprintf("context info is not JSON (%v); ignored", err))
	}
	metaVal, err := headerJSON(metaText)
	if err != nil {
		l.warn.add("metadata", fmt.Sprintf("metadata is not JSON (%v); ignored", err))
	}
	if err := l.setHeader(float64(timebase), int64(timebase)*1e6, flagNames(flags), ctxVal, metaVal); err != nil {
		return l.errAt(fileLoc, int64(tbOff), err)
	}
	r.buf = data[off:]
	return l.legacyEvents(r, int64(off), fileLoc)
}

// headerJSON parses a header JSON string; "" is null.
func headerJSON(text string) (trace.Value, error) {
	if text == "" {
		return trace.Null(), nil
	}
	v, err := parseJSONValue(text)
	if err != nil {
		return trace.Null(), err
	}
	return v, nil
}

// headerString reads the context or metadata string of a legacy header.
// Real files use the writer's utf8 string (u16 UTF-16 units, u16 bytes,
// bytes); the spec documents a u16 length followed by the bytes. Both hold a
// JSON object, which tells them apart: its "{" is at +4 or at +2.
func (r *legacyReader) headerString(off int, what string) (string, int, error) {
	if err := r.need(off, 2); err != nil {
		return "", off, fmt.Errorf("%s: %w", what, err)
	}
	n := int(r.u16(off))
	if n == 0 {
		return "", off + 2, nil
	}
	if r.need(off, 4) == nil {
		b := int(r.u16(off + 2))
		if b >= n && b <= 3*n && r.need(off+4, b) == nil && r.buf[off+4] == '{' {
			return cesu8(r.buf[off+4 : off+4+b]), off + 4 + b, nil
		}
	}
	if r.need(off+2, n) == nil && r.buf[off+2] == '{' {
		return cesu8(r.buf[off+2 : off+2+n]), off + 2 + n, nil
	}
	v, next, err := r.utf8String(off)
	if err != nil {
		return "", off, fmt.Errorf("%s: %w", what, err)
	}
	return v.Str, next, nil
}

// legacyEvents decodes a legacy event stream: r.buf holds the events only;
// base is the file offset of r.buf (for errors).
func (l *loader) legacyEvents(r *legacyReader, base int64, loc errLoc) error {
	buf := r.buf
	var scratch []trace.Value
	for off := 0; off < len(buf); {
		start := off
		if len(buf)-off < 6 {
			return l.errAt(loc, base+int64(start), errf(ErrTruncated, "event header needs 6 bytes, %d left", len(buf)-off))
		}
		wire := r.u16(off)
		t := r.u32(off + 2)
		off += 6
		typ := l.wire(uint32(wire))
		if typ == nil {
			return l.errAt(loc, base+int64(start), errf(ErrUnknownEvent, "wire id %d is not defined", wire))
		}
		vals, next, err := l.legacyArgs(r, typ.args, off, scratch[:0])
		if err != nil {
			return l.errAt(loc, base+int64(start), fmt.Errorf("event %s: %w", typ.name, err))
		}
		off = next
		if err := l.handle(typ, int64(t), vals); err != nil {
			return l.errAt(loc, base+int64(start), err)
		}
		scratch = vals
		if err := l.poll(); err != nil {
			return err
		}
	}
	return nil
}
