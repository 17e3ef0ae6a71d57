package wtf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/ztsd/ztsd/trace"
)

// Chunk and part types (wtf.io.cff.ChunkType, wtf.io.cff.PartType).
const (
	chunkFileHeader = 1
	chunkEventData  = 2

	partFileHeader        = 0x10000
	partJSONEventBuffer   = 0x20000
	partLegacyEventBuffer = 0x20001
	partBinaryEventBuffer = 0x20002
	partStringTable       = 0x30000
	partBinaryResource    = 0x40000
	partStringResource    = 0x40001

	chunkHeaderSize = 24 // id, type, length, start, end, part count
	partEntrySize   = 12 // type, offset, length
)

// cffPart is one part of a chunk, from either CFF encoding.
type cffPart struct {
	typ     uint32
	body    []byte   // binary parts (decoded base64 in JSON)
	strings []string // JSON string table
	base    int64    // file offset of body (binary encoding)
	header  *cffHeader
}

// cffHeader is the file_header part.
type cffHeader struct {
	Flags       []string        `json:"flags"`
	Timebase    json.Number     `json:"timebase"`
	ContextInfo json.RawMessage `json:"contextInfo"`
	Metadata    json.RawMessage `json:"metadata"`
}

// decodeCFF decodes a binary chunked file: the 12-byte file header, then
// chunks until the end of the file. Each chunk is a 24-byte header, a part
// table and the part bodies (offsets from the end of the part table, each
// body padded to 4 bytes); all integers little-endian.
func (l *loader) decodeCFF(data []byte) error {
	off := binaryHeaderSize
	for idx := 0; off < len(data); idx++ {
		loc := errLoc{chunk: idx, part: -1}
		if len(data)-off < chunkHeaderSize {
			return l.errAt(loc, int64(off), errf(ErrTruncated, "chunk header needs %d bytes, %d left", chunkHeaderSize, len(data)-off))
		}
		h := data[off:]
		id := binary.LittleEndian.Uint32(h)
		ctype := binary.LittleEndian.Uint32(h[4:])
		length := uint64(binary.LittleEndian.Uint32(h[8:]))
		nparts := uint64(binary.LittleEndian.Uint32(h[20:]))
		loc.chunkID = id
		switch {
		case length > uint64(len(data)-off):
			return l.errAt(loc, int64(off), errf(ErrTruncated, "chunk length %d, %d bytes left", length, len(data)-off))
		case length < chunkHeaderSize:
			return l.errAt(loc, int64(off), errf(ErrMalformed, "chunk length %d is shorter than its header", length))
		case nparts > (length-chunkHeaderSize)/partEntrySize:
			return l.errAt(loc, int64(off), errf(ErrMalformed, "%d parts do not fit a chunk of %d bytes", nparts, length))
		}
		chunk := data[off : off+int(length)]
		bodyStart := chunkHeaderSize + partEntrySize*int(nparts)
		parts := make([]cffPart, 0, nparts)
		for i := 0; i < int(nparts); i++ {
			e := chunk[chunkHeaderSize+partEntrySize*i:]
			ptype := binary.LittleEndian.Uint32(e)
			poff := uint64(binary.LittleEndian.Uint32(e[4:]))
			plen := uint64(binary.LittleEndian.Uint32(e[8:]))
			if poff+plen > uint64(len(chunk)-bodyStart) {
				ploc := loc
				ploc.part = i
				return l.errAt(ploc, int64(off+chunkHeaderSize+partEntrySize*i),
					errf(ErrMalformed, "part at offset %d length %d exceeds the chunk body of %d bytes", poff, plen, len(chunk)-bodyStart))
			}
			start := bodyStart + int(poff)
			parts = append(parts, cffPart{typ: ptype, body: chunk[start : start+int(plen)], base: int64(off + start)})
		}
		l.chunks++
		if err := l.chunk(loc, ctype, parts, int64(off)); err != nil {
			return err
		}
		off += int(length)
		if r := off % 4; r != 0 {
			off += 4 - r
		}
	}
	return nil
}

// chunk handles one decoded chunk of either CFF encoding.
func (l *loader) chunk(loc errLoc, ctype uint32, parts []cffPart, chunkOff int64) error {
	switch ctype {
	case chunkFileHeader:
		for i, p := range parts {
			if p.typ != partFileHeader {
				continue
			}
			ploc := loc
			ploc.part = i
			off := p.base
			if loc.inPart {
				off = -1 // JSON: the part has no byte offset
			}
			h := p.header
			if h == nil {
				h = new(cffHeader)
				if err := json.Unmarshal(p.body, h); err != nil {
					return l.errAt(ploc, off, errf(ErrMalformed, "file header JSON: %v", err))
				}
			}
			if err := l.cffHeader(h); err != nil {
				return l.errAt(ploc, off, err)
			}
			return nil
		}
		l.warn.add("no-header-part", fmt.Sprintf("file header chunk %d has no file_header part", loc.chunk))
		return nil
	case chunkEventData:
		return l.eventChunk(loc, parts, chunkOff)
	}
	l.warn.add("chunk-type", fmt.Sprintf("chunk %d has unknown type %d; skipped", loc.chunk, ctype))
	return nil
}

func (l *loader) cffHeader(h *cffHeader) error {
	if h.Timebase == "" {
		return errf(ErrMalformed, "file header has no timebase")
	}
	tb, tbNS, err := timebaseFromText(string(h.Timebase))
	if err != nil {
		return err
	}
	ctxVal, err := rawToValue(h.ContextInfo)
	if err != nil {
		return errf(ErrMalformed, "contextInfo: %v", err)
	}
	metaVal, err := rawToValue(h.Metadata)
	if err != nil {
		return errf(ErrMalformed, "metadata: %v", err)
	}
	return l.setHeader(tb, tbNS, h.Flags, ctxVal, metaVal)
}

// eventChunk decodes an event_data chunk: the string table first (the
// reader attaches it before decoding events, whatever the part order), then
// each event buffer in part order. Resources are counted and otherwise
// ignored (no argument type refers to them).
func (l *loader) eventChunk(loc errLoc, parts []cffPart, chunkOff int64) error {
	if !l.haveHeader {
		l.warn.add("no-header", "event data before any file header: timebase 0")
		l.haveHeader = true
	}
	var tbl *stringTable
	for _, p := range parts {
		if p.typ != partStringTable {
			continue
		}
		if tbl != nil {
			l.warn.add("string-tables", fmt.Sprintf("chunk %d has more than one string table; the first is used", loc.chunk))
			break
		}
		if p.strings != nil {
			tbl = &stringTable{entries: p.strings}
		} else {
			tbl = newStringTable(p.body)
		}
	}
	buffers := 0
	for i, p := range parts {
		ploc := loc
		ploc.part = i
		switch p.typ {
		case partBinaryEventBuffer:
			buffers++
			if err := l.cffEvents(p.body, p.base, ploc, tbl); err != nil {
				return err
			}
		case partLegacyEventBuffer:
			buffers++
			r := &legacyReader{buf: p.body, order: binary.BigEndian, tbl: tbl}
			if err := l.legacyEvents(r, p.base, ploc); err != nil {
				return err
			}
		case partJSONEventBuffer:
			buffers++
			l.warn.add("json-event-buffer", fmt.Sprintf("chunk %d: JSON event buffer parts are not readable (WTF ignores them too); skipped", loc.chunk))
		case partBinaryResource, partStringResource:
			l.resources++
		case partStringTable, partFileHeader:
		default:
			l.warn.add("part-type", fmt.Sprintf("chunk %d: unknown part type 0x%x; skipped", loc.chunk, p.typ))
		}
	}
	if buffers == 0 {
		l.warn.add("no-event-buffer", fmt.Sprintf("event data chunk %d (at %d) has no event buffer", loc.chunk, chunkOff))
	}
	return nil
}

// cffEvents decodes a binary event buffer: per event a u32 wire id, a u32
// time in µs and the arguments, all in 4-byte little-endian slots. base is
// the file offset of buf (0 for a base64 buffer from JSON, with loc.inPart).
func (l *loader) cffEvents(buf []byte, base int64, loc errLoc, tbl *stringTable) error {
	var scratch []trace.Value
	off := 0
	for off < len(buf) {
		start := off
		if len(buf)-off < 8 {
			return l.errAt(loc, base+int64(start), errf(ErrTruncated, "event header needs 8 bytes, %d left", len(buf)-off))
		}
		wire := binary.LittleEndian.Uint32(buf[off:])
		t := binary.LittleEndian.Uint32(buf[off+4:])
		off += 8
		typ := l.wire(wire)
		if typ == nil {
			return l.errAt(loc, base+int64(start), errf(ErrUnknownEvent, "wire id %d is not defined", wire))
		}
		vals, next, err := l.cffArgs(typ.args, buf, off, tbl, scratch[:0])
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
