package dial9

import (
	"errors"
	"fmt"
)

// Wire constants of the dial9-trace-format (little-endian throughout).
const (
	// Magic opens every stream: "TRC\0", followed by a one-byte version.
	Magic = "TRC\x00"
	// HeaderSize is the size of a stream header (magic + version).
	HeaderSize = 5
	// Version is the only version byte ever written.
	Version = 1
	// LegacyMagic opens files of the older, unrelated TOKIOTRC format.
	LegacyMagic = "TOKIOTRC"
	// MaxTimestampDelta is the largest packed u24 timestamp delta.
	MaxTimestampDelta = 1<<24 - 1
)

// Frame tags.
const (
	TagSchema            = 0x01
	TagEvent             = 0x02
	TagStringPool        = 0x03
	TagStackPool         = 0x04
	TagTimestampReset    = 0x05
	TagSchemaAnnotations = 0x06
	// tagHeader is the first byte of a mid-file stream header ('T').
	tagHeader = 0x54
)

// FieldType is a schema field's type tag. The high bit (Optional) marks a
// field that carries a presence byte before its value.
type FieldType uint8

// Field types as implemented (tag 6 is PooledStackFrames since 2026-04-30).
const (
	TypeI64               FieldType = 1
	TypeF64               FieldType = 2
	TypeBool              FieldType = 3
	TypeString            FieldType = 4
	TypeBytes             FieldType = 5
	TypePooledStackFrames FieldType = 6
	TypePooledString      FieldType = 7
	TypeStackFrames       FieldType = 8
	TypeVarint            FieldType = 9
	TypeStringMap         FieldType = 10
	TypeU8                FieldType = 11
	TypeU16               FieldType = 12
	TypeU32               FieldType = 13
	TypeDynamicList       FieldType = 14
	TypeDynamicMap        FieldType = 15
	// Optional is or-ed onto a base type: a presence byte (0 = absent)
	// precedes the value.
	Optional FieldType = 0x80
)

// Base returns t without the Optional bit.
func (t FieldType) Base() FieldType { return t &^ Optional }

// IsOptional reports whether t carries the Optional bit.
func (t FieldType) IsOptional() bool { return t&Optional != 0 }

// Valid reports whether t (with or without the Optional bit) is a known type.
func (t FieldType) Valid() bool { b := t.Base(); return b >= TypeI64 && b <= TypeDynamicMap }

var fieldTypeNames = [...]string{
	TypeI64: "I64", TypeF64: "F64", TypeBool: "Bool", TypeString: "String", TypeBytes: "Bytes",
	TypePooledStackFrames: "PooledStackFrames", TypePooledString: "PooledString",
	TypeStackFrames: "StackFrames", TypeVarint: "Varint", TypeStringMap: "StringMap", TypeU8: "U8",
	TypeU16: "U16", TypeU32: "U32", TypeDynamicList: "DynamicList", TypeDynamicMap: "DynamicMap",
}

func (t FieldType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("FieldType(%#x)", uint8(t))
	}
	s := fieldTypeNames[t.Base()]
	if t.IsOptional() {
		s += "?"
	}
	return s
}

// Field is one field definition of a schema.
type Field struct {
	Name string
	Type FieldType
}

// Annotation is one schema annotation (frame 0x06): a key/value pair on a
// field, e.g. "metrique.unit" = "ns".
type Annotation struct {
	FieldIndex uint16
	Key        string
	Value      string
}

// Schema describes the layout of one event type inside one stream. Schemas
// are scoped to their stream: the same TypeID means something else after a
// mid-file header.
type Schema struct {
	TypeID       uint16
	Name         string
	HasTimestamp bool
	Fields       []Field
	// Annotations accumulate from schema annotation frames.
	Annotations []Annotation
	index       map[string]int
}

// FieldIndex returns the position of the named field, or -1.
func (s *Schema) FieldIndex(name string) int {
	if i, ok := s.index[name]; ok {
		return i
	}
	return -1
}

// sameLayout reports whether o registers the same layout as s.
func (s *Schema) sameLayout(o *Schema) bool {
	if s.Name != o.Name || s.HasTimestamp != o.HasTimestamp || len(s.Fields) != len(o.Fields) {
		return false
	}
	for i := range s.Fields {
		if s.Fields[i] != o.Fields[i] {
			return false
		}
	}
	return true
}

// Value is one decoded field value. Type is the base type that was decoded;
// Absent is set (and Type is still the declared base type) when an optional
// field carried no value.
type Value struct {
	Type   FieldType
	Absent bool
	// Int holds I64.
	Int int64
	// Uint holds Varint, U8, U16 and U32, and the pool id of pooled values.
	Uint  uint64
	Float float64
	Bool  bool
	// Str holds String and resolved PooledString values.
	Str   string
	Bytes []byte
	// Frames holds StackFrames and resolved PooledStackFrames addresses,
	// leaf first. Pooled frames share the pool's slice: do not modify.
	Frames []uint64
	// Unresolved is set for a pooled value whose id is not in the pool.
	Unresolved bool
	Pairs      []StringPair // StringMap
	List       []Value      // DynamicList
	Map        []ValuePair  // DynamicMap
}

// StringPair is one entry of a StringMap (order kept, duplicates allowed).
type StringPair struct{ Key, Value string }

// ValuePair is one entry of a DynamicMap.
type ValuePair struct{ Key, Value Value }

// Event is one decoded event frame.
type Event struct {
	Schema *Schema
	// Stream is the 0-based index of the stream (mini-stream) holding the
	// event; every TRC header, at the start or mid-file, opens a new one.
	Stream int
	// Offset is the byte offset of the event frame in the decoded
	// (decompressed) file.
	Offset int64
	// TimestampNS is the absolute monotonic timestamp when HasTimestamp.
	TimestampNS  uint64
	HasTimestamp bool
	// Values are in schema field order.
	Values []Value
}

// Field returns the value of the named field.
func (e *Event) Field(name string) (Value, bool) {
	i := e.Schema.FieldIndex(name)
	if i < 0 || i >= len(e.Values) {
		return Value{}, false
	}
	return e.Values[i], true
}

// Sentinel errors; decode errors wrap them inside a *DecodeError.
var (
	ErrLegacyFormat     = errors.New("legacy TOKIOTRC format (the pre-2026-03-17 dial9 telemetry format) is not supported; only TRC\\0 dial9-trace-format files are")
	ErrBadMagic         = errors.New("not a dial9 trace: missing TRC\\0 magic")
	ErrTruncated        = errors.New("truncated frame")
	ErrUnknownTag       = errors.New("unknown frame tag")
	ErrUnknownTypeID    = errors.New("event references unknown type_id")
	ErrUnknownFieldType = errors.New("unknown field type")
	ErrSchemaConflict   = errors.New("type_id already registered with a different schema")
	ErrInvalidUTF8      = errors.New("invalid UTF-8")
	ErrVarintTooLong    = errors.New("varint longer than 10 bytes")
	ErrTimestamp        = errors.New("timestamp overflows u64")
	ErrTooDeep          = errors.New("dynamic value nested too deeply")
	// ErrFileChanged: Import reads a file twice, and it shrank between.
	ErrFileChanged = errors.New("file shrank during import")
)

// DecodeError reports an undecodable frame: decoding stops there, and what
// was decoded before it stays valid.
type DecodeError struct {
	Offset int64 // byte offset of the frame in the decoded (decompressed) file
	Stream int   // stream index, -1 before the first stream header
	What   string
	Err    error
}

func (e *DecodeError) Error() string {
	if e.Stream < 0 {
		return fmt.Sprintf("dial9: %s at offset %d: %v", e.What, e.Offset, e.Err)
	}
	return fmt.Sprintf("dial9: %s at offset %d (stream %d): %v", e.What, e.Offset, e.Stream, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }
