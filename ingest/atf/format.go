package atf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Layout constants of ATF v2 (all structures are packed little-endian).
const (
	HeaderSize             = 64 // index and detail headers
	FooterSize             = 64 // index and detail footers
	IndexEventSize         = 32 // one index event
	DetailRecordHeaderSize = 24 // fixed part of a detail record

	// DrainPayloadSize is the payload the real writer stores in every detail
	// record: the agent's in-memory DetailEvent (records are 540 bytes).
	DrainPayloadSize = 516
	// DocumentedPayloadSize is the fixed part of the spec's
	// DetailFunctionPayload; stack bytes follow it.
	DocumentedPayloadSize = 100

	// NoDetail is the detail_seq of an index event without detail record.
	NoDetail = math.MaxUint32
)

// File magics.
const (
	IndexMagic        = "ATI2"
	IndexFooterMagic  = "2ITA"
	DetailMagic       = "ATD2"
	DetailFooterMagic = "2DTA"
)

// Supported header values.
const (
	EndianLittle     = 1
	SupportedVersion = 1
)

// Event kinds of an index event.
const (
	KindCall      = 1
	KindReturn    = 2
	KindException = 3
)

// Architectures named by the header's arch byte.
const (
	ArchX8664 = 1
	ArchARM64 = 2
)

// ArchName returns the name of an arch byte ("x86_64", "arm64", or "arch(N)").
func ArchName(a uint8) string {
	switch a {
	case ArchX8664:
		return "x86_64"
	case ArchARM64:
		return "arm64"
	}
	return fmt.Sprintf("arch(%d)", a)
}

// OSName returns the name of an os byte.
func OSName(o uint8) string {
	switch o {
	case 1:
		return "ios"
	case 2:
		return "android"
	case 3:
		return "macos"
	case 4:
		return "linux"
	case 5:
		return "windows"
	}
	return fmt.Sprintf("os(%d)", o)
}

// Sentinel errors; a *FormatError wraps one of them.
var (
	// ErrNotATF: the magic is not the expected ATF v2 magic.
	ErrNotATF = errors.New("not an ATF v2 file")
	// ErrUnsupported: a valid ATF file in a variant this reader does not
	// decode (byte order, version, event size).
	ErrUnsupported = errors.New("unsupported ATF variant")
	// ErrTruncated: the file is too short to hold its header.
	ErrTruncated = errors.New("truncated ATF file")
	// ErrCorrupt: a header field contradicts the file.
	ErrCorrupt = errors.New("corrupt ATF file")
)

// FormatError reports malformed input: which file, at which byte offset,
// what is wrong. Err is one of the sentinel errors above.
type FormatError struct {
	File   string
	Offset int64
	Msg    string
	Err    error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("atf: %s: offset %d: %s: %v", e.File, e.Offset, e.Msg, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

var le = binary.LittleEndian

// IndexHeader is the 64-byte header of index.atf.
type IndexHeader struct {
	Magic        [4]byte
	Endian       uint8
	Version      uint8
	Arch         uint8
	OS           uint8
	Flags        uint32 // bit 0: has detail file
	ThreadID     uint32 // the writer stores its thread slot index
	ClockType    uint8
	EventSize    uint32
	EventCount   uint32 // 0 in a crashed session's placeholder header
	EventsOffset uint64
	FooterOffset uint64 // 64 in a placeholder header
	TimeStartNS  uint64
	TimeEndNS    uint64
}

// HasDetail reports flag bit 0 (reliable only after the header was
// finalised; probe for detail.atf instead).
func (h IndexHeader) HasDetail() bool { return h.Flags&1 != 0 }

func parseIndexHeader(b []byte) IndexHeader {
	var h IndexHeader
	copy(h.Magic[:], b[0:4])
	h.Endian = b[4]
	h.Version = b[5]
	h.Arch = b[6]
	h.OS = b[7]
	h.Flags = le.Uint32(b[8:])
	h.ThreadID = le.Uint32(b[12:])
	h.ClockType = b[16]
	h.EventSize = le.Uint32(b[24:])
	h.EventCount = le.Uint32(b[28:])
	h.EventsOffset = le.Uint64(b[32:])
	h.FooterOffset = le.Uint64(b[40:])
	h.TimeStartNS = le.Uint64(b[48:])
	h.TimeEndNS = le.Uint64(b[56:])
	return h
}

// IndexFooter is the 64-byte footer of index.atf.
type IndexFooter struct {
	Magic        [4]byte
	Checksum     uint32 // always 0: the writer never computes it
	EventCount   uint64
	TimeStartNS  uint64
	TimeEndNS    uint64
	BytesWritten uint64 // EventCount * 32
}

func parseIndexFooter(b []byte) IndexFooter {
	var f IndexFooter
	copy(f.Magic[:], b[0:4])
	f.Checksum = le.Uint32(b[4:])
	f.EventCount = le.Uint64(b[8:])
	f.TimeStartNS = le.Uint64(b[16:])
	f.TimeEndNS = le.Uint64(b[24:])
	f.BytesWritten = le.Uint64(b[32:])
	return f
}

// valid reports whether f is a footer: its magic. The checksum is never
// computed by the writer and the counts are clamped by the caller, so the
// magic is all there is to check.
func (f IndexFooter) valid() bool {
	return string(f.Magic[:]) == IndexFooterMagic
}

// IndexEvent is one 32-byte index event. Its index_seq is its position in
// the file.
type IndexEvent struct {
	TimestampNS uint64
	FunctionID  uint64 // module_id << 32 | symbol_index
	ThreadID    uint32
	Kind        uint32 // KindCall, KindReturn, KindException
	Depth       uint32 // the agent's call depth
	DetailSeq   uint32 // ordinal of the detail record, NoDetail if none
}

// decodeIndexEvents fills dst from len(dst) consecutive 32-byte events in b.
func decodeIndexEvents(dst []IndexEvent, b []byte) {
	_ = b[len(dst)*IndexEventSize-1:]
	for i := range dst {
		e := b[i*IndexEventSize : i*IndexEventSize+IndexEventSize : i*IndexEventSize+IndexEventSize]
		// Field by field: a composite literal goes through a stack
		// temporary whose wide reload defeats store forwarding.
		d := &dst[i]
		d.TimestampNS = le.Uint64(e[0:8])
		d.FunctionID = le.Uint64(e[8:16])
		d.ThreadID = le.Uint32(e[16:20])
		d.Kind = le.Uint32(e[20:24])
		d.Depth = le.Uint32(e[24:28])
		d.DetailSeq = le.Uint32(e[28:32])
	}
}

// DetailHeader is the 64-byte header of detail.atf.
type DetailHeader struct {
	Magic         [4]byte
	Endian        uint8
	Version       uint8
	Arch          uint8
	OS            uint8
	Flags         uint32
	ThreadID      uint32
	EventsOffset  uint64
	EventCount    uint64 // 0 in a placeholder header
	BytesLength   uint64
	IndexSeqStart uint64
	IndexSeqEnd   uint64
}

func parseDetailHeader(b []byte) DetailHeader {
	var h DetailHeader
	copy(h.Magic[:], b[0:4])
	h.Endian = b[4]
	h.Version = b[5]
	h.Arch = b[6]
	h.OS = b[7]
	h.Flags = le.Uint32(b[8:])
	h.ThreadID = le.Uint32(b[12:])
	h.EventsOffset = le.Uint64(b[20:])
	h.EventCount = le.Uint64(b[28:])
	h.BytesLength = le.Uint64(b[36:])
	h.IndexSeqStart = le.Uint64(b[44:])
	h.IndexSeqEnd = le.Uint64(b[52:])
	return h
}

// DetailFooter is the 64-byte footer of detail.atf (note the field order
// differs from the index footer).
type DetailFooter struct {
	Magic       [4]byte
	Checksum    uint32
	EventCount  uint64
	BytesLength uint64
	TimeStartNS uint64
	TimeEndNS   uint64
}

func parseDetailFooter(b []byte) DetailFooter {
	var f DetailFooter
	copy(f.Magic[:], b[0:4])
	f.Checksum = le.Uint32(b[4:])
	f.EventCount = le.Uint64(b[8:])
	f.BytesLength = le.Uint64(b[16:])
	f.TimeStartNS = le.Uint64(b[24:])
	f.TimeEndNS = le.Uint64(b[32:])
	return f
}

// Detail record event types.
const (
	DetailFunctionCall   = 3
	DetailFunctionReturn = 4
)

// DetailRecord is one variable-length detail record.
type DetailRecord struct {
	Offset      int64 // byte offset of the record in detail.atf
	Length      uint32
	EventType   uint16 // DetailFunctionCall, DetailFunctionReturn
	Flags       uint16
	IndexSeq    uint32 // back link: position of the index event
	ThreadID    uint32
	TimestampNS uint64
	Payload     []byte // aliases the file image
}

// PayloadLayout names how a detail payload was decoded.
type PayloadLayout string

const (
	// LayoutDrain is the 516-byte agent DetailEvent the real writer stores.
	LayoutDrain PayloadLayout = "drain"
	// LayoutDocumented is the spec's DetailFunctionPayload (100 bytes + stack).
	LayoutDocumented PayloadLayout = "documented"
	// LayoutRaw: neither layout fits; only the raw bytes are kept.
	LayoutRaw PayloadLayout = "raw"
)

// DetailPayload is a decoded register and stack snapshot.
type DetailPayload struct {
	Layout     PayloadLayout
	FunctionID uint64
	OSThreadID uint32 // drain layout: the agent's own thread id
	EventKind  uint32 // drain layout: 1 call, 2 return, 3 exception
	Regs       [8]uint64
	LR, FP, SP uint64
	Stack      []byte // captured stack bytes (aliases the file image)
}

// Stack snapshot bounds of the two layouts.
const (
	drainStackMax      = 128
	documentedStackMax = 256
)

// DecodePayload decodes a detail payload: the 516-byte drain layout when the
// length says so, else the documented layout when it fits, else LayoutRaw.
func DecodePayload(p []byte) DetailPayload {
	switch {
	case len(p) == DrainPayloadSize:
		d := DetailPayload{Layout: LayoutDrain}
		d.FunctionID = le.Uint64(p[8:])
		d.OSThreadID = le.Uint32(p[16:])
		d.EventKind = le.Uint32(p[20:])
		for i := range d.Regs {
			d.Regs[i] = le.Uint64(p[32+8*i:])
		}
		d.LR = le.Uint64(p[96:])
		d.FP = le.Uint64(p[104:])
		d.SP = le.Uint64(p[112:])
		n := le.Uint32(p[248:])
		if n > drainStackMax {
			n = drainStackMax
		}
		d.Stack = p[120 : 120+n : 120+n]
		return d
	case len(p) >= DocumentedPayloadSize:
		n := int(le.Uint16(p[96:]))
		if n > documentedStackMax || DocumentedPayloadSize+n > len(p) {
			break
		}
		d := DetailPayload{Layout: LayoutDocumented}
		d.FunctionID = le.Uint64(p[0:])
		for i := range d.Regs {
			d.Regs[i] = le.Uint64(p[8+8*i:])
		}
		d.LR = le.Uint64(p[72:])
		d.FP = le.Uint64(p[80:])
		d.SP = le.Uint64(p[88:])
		d.Stack = p[DocumentedPayloadSize : DocumentedPayloadSize+n : DocumentedPayloadSize+n]
		return d
	}
	return DetailPayload{Layout: LayoutRaw}
}
