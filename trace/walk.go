package trace

// This file owns the rules that every walk over a span's tree applies: the
// encoders (chunk payload: codec.go; Trace JSON: json.go), the decoders of
// both formats, Span.Validate (trace.go, value.go) and Diff (equal.go).
// Each rule is written here once; the walks keep only their own byte
// writing or reading.
//
//   - Depth accounting: a record's depth counts from the root record (1);
//     an attribute's own value has depth 1 and each list or map around a
//     value adds one; an exception is link 1 of its cause chain. Writers
//     bound these by MaxDepth and MaxValueDepth (recordTooDeep,
//     valueTooDeep, causeChainTooLong); decoders bound records and causes by
//     their Limits.MaxDepth and values by MaxValueDepth.
//   - Attribute order: Attrs and map values hold keys in ascending byte
//     order with no repeats (keyOutOfOrder, firstUnsorted).
//   - Value kinds: a Kind outside KindNull..KindMap is an error in every
//     walk (msgUnknownKind).
//   - Error texts for the violations (the msg* formats), so the same
//     violation reads the same whichever walk finds it.
//
// What is deliberately not shared: the kind switch itself. Each walk's
// switch is the format's byte writing (or reading) for that kind; routing
// them through one visitor would put an indirect call on every value of the
// chunk encoder and decoder, which are on the ingest and read paths.
// Non-finite float spellings are in value.go (NonFiniteName), string UTF-8
// and size rules are each format's own (the chunk encoder rejects invalid
// UTF-8, Trace JSON writes it as U+FFFD).

// MaxDepth bounds record nesting everywhere (decoders, encoders, JSON), so
// that hostile input cannot exhaust the stack. It also bounds an
// exception's cause chain and Trace JSON span nesting.
const MaxDepth = 1000

// MaxValueDepth bounds nesting of list/map attribute values.
const MaxValueDepth = 32

// The texts of the violations the walks report (formats for fmt).
const (
	msgRecordTooDeep     = "record tree deeper than %d"           // arg: MaxDepth
	msgValueTooDeep      = "value nested deeper than %d"          // arg: MaxValueDepth
	msgCauseChainTooLong = "exception cause chain longer than %d" // arg: the bound
	msgUnknownKind       = "unknown value kind %d"                // arg: the Kind
	msgAttrsUnsorted     = "attributes not sorted/unique at %q"   // arg: the key
	msgMapKeysUnsorted   = "map keys not sorted/unique at %q"     // arg: the key (Validate)
)

// recordTooDeep reports whether a record at depth (the root record has
// depth 1) is nested beyond MaxDepth.
func recordTooDeep(depth int) bool { return depth > MaxDepth }

// valueTooDeep reports whether a value at depth (an attribute's own value
// has depth 1) is nested beyond MaxValueDepth.
func valueTooDeep(depth int) bool { return depth > MaxValueDepth }

// causeChainTooLong reports whether link n of an exception cause chain (the
// exception itself is link 1) is beyond max.
func causeChainTooLong(n, max int) bool { return n > max }

// keyOutOfOrder reports whether key may not follow prev in Attrs: keys are
// strictly ascending.
func keyOutOfOrder(prev, key string) bool { return prev >= key }

// firstUnsorted returns the index of the first attribute whose key does not
// follow its predecessor's, or -1 when a is sorted with unique keys.
func firstUnsorted(a Attrs) int {
	for i := 1; i < len(a); i++ {
		if keyOutOfOrder(a[i-1].Key, a[i].Key) {
			return i
		}
	}
	return -1
}
