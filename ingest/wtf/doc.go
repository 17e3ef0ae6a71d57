// Package wtf imports Web Tracing Framework (WTF) traces into ztsd's trace
// model. It owns the byte-level decoding of every WTF file a user may hold
// and the mapping of WTF zones, scopes and instance events onto trace.Span
// values; it knows nothing about storage or sockets.
//
// # Encodings
//
// The encoding is detected from the first bytes (Sniff, and Decode on the
// whole file):
//
//   - legacy binary trace, BinaryTrace version 3: bytes DE AD BE EF, then
//     big-endian integers (floats little-endian, as the JS writer copied them),
//     packed arguments, inline Latin-1 "ascii" and CESU-8 "utf8" strings. The
//     little-endian layout the spec describes (EF BE AD DE, format version 3)
//     is read the same way with little-endian integers; its header strings may
//     be the writer's (u16 UTF-16 units, u16 bytes) or the spec's (u16 length);
//   - chunked file format (CFF) version 10, binary: bytes EF BE AD DE, chunks
//     of parts (file header JSON, per-chunk string table, event buffer of
//     4-byte little-endian slots, resources), 4-byte aligned;
//   - CFF version 10 as JSON (.wtf-json with "wtfVersion"/"chunks"), complete
//     or partial (one JSON document per chunk), event buffers base64-encoded;
//   - legacy JSON event lists (JsonTrace version 2: an array of
//     {"type": ...}/{"event": ...} entries, or an object holding it in
//     "events").
//
// Event types come from the file's own wtf.event#define records; wire id 1
// (wtf.event#define itself) is implicit. Every argument type of both binary
// encodings is decoded: bool, int8..uint32, float32, ascii, utf8, char,
// wchar, their arrays, any (JSON), time32 (milliseconds, as a float) and
// flowId. Unknown wire ids, truncated events, invalid signatures and string
// ordinals outside the chunk's string table are errors (a *DecodeError naming
// the encoding, chunk and offset); with ingest.Options.KeepGoing what was
// decoded before the error is kept and the error becomes a warning.
//
// # Mapping
//
// Zones (wtf.zone#create / #set / #delete) are threads: events are assigned
// to the zone current at the point they appear in the byte stream, each zone's
// events are stably sorted by time (WTF writes definitions and zone events
// first, with later or zero times), and then:
//
//   - a scope event (event class 1, including wtf.scope#enter, which is renamed
//     after its name argument) opens a record whose attributes are the event's
//     arguments; wtf.scope#leave closes the innermost open scope. Each
//     top-level scope of a zone becomes one trace (Span.Type "wtf.scope");
//     nested scopes are child records.
//   - an event flagged APPEND_SCOPE_DATA (by flag, not by name) adds its
//     arguments as attributes of the innermost open scope; the builtin
//     wtf.scope#appendData(name, value) adds one attribute name=value.
//   - every other event (marks, wtf.trace#timeStamp — renamed after its name
//     argument —, flows, frames, time ranges, user instance events) becomes a
//     zero-length record with its arguments as attributes: a child of the
//     innermost open scope, or, outside any scope, a one-record trace of its
//     own (Span.Type "wtf.instance"). Append-data events outside any scope are
//     kept the same way.
//   - scopes still open at the end of a zone are closed at the zone's last
//     event time and marked Record.Open; a leave without an open scope is
//     counted and reported as a warning.
//
// Definitions and zone events are consumed by the decoder and not stored
// (except in legacy JSON, where WTF stores wtf.zone#create as an event). The
// summary's "details" account for every event: see Decode.
//
// Times in the file are microseconds from the file's timebase; spans get
// nanoseconds since the Unix epoch (timebase + time), records nanoseconds
// from their span start. Each file keeps its own timebase, also when several
// files are imported together (WTF's loader shifted later files onto the
// first one's timebase). A timebase that is not wall-clock time (C++ bindings
// write 0, node without microtime writes process.hrtime) is reported as a
// warning.
//
// # Attributes
//
// Every span carries:
//
//	source.format        "wtf"
//	source.file          base name of the imported file
//	thread, wtf.zone     the zone name ("(default)" for events before any zone)
//	wtf.zone.type        zone type, e.g. "script" (absent when null)
//	wtf.zone.location    zone location, e.g. the page URI (absent when null)
//	wtf.encoding         legacy-binary, cff-binary, cff-json or legacy-json
//	wtf.timebase_ms      the file's timebase in ms
//	wtf.flags            file flags, e.g. ["has_high_resolution_times"]
//	wtf.context.<key>    each contextInfo field: wtf.context.uri,
//	                     wtf.context.title, wtf.context.taskId,
//	                     wtf.context.args, wtf.context.userAgent.value,
//	                     wtf.context.userAgent.type, ….platform,
//	                     ….platformVersion, ….device, wtf.context.icon.uri
//	wtf.metadata.<key>   each metadata field, e.g. wtf.metadata.nowTimeNs
//
// Records carry the event's arguments under their argument names (plus
// appended scope data); Record.Method is the event name, Record.Calls the
// number of records in its subtree (itself included).
//
// # Memory
//
// A file is read once; decoded events are kept as 16-byte entries (their
// arguments apart) until each zone is sorted and turned into spans, so memory
// stays proportional to the file.
//
// # Identity
//
// Ids are deterministic: TraceID is the first 16 bytes of SHA-256 over
// ("wtf", base file name, file size, zone index, zone name, ordinal of the
// trace within its zone); SpanID is the first 8 bytes of SHA-256 over the
// TraceID and "span" (never 0). Re-importing a file yields the same ids.
//
// # Differences from WTF's own loader
//
// Counts, scopes, nesting, durations and argument values match WTF's loader
// (reference tables in shared/testdata/wtf/reference), except where WTF loses
// information or crashes: a string-table ordinal outside the table is an
// error (WTF reads null); an empty string-table entry reads as "" (WTF: null);
// wtf.trace#timeStamp keeps its value as attribute "value" (WTF drops it);
// time-range ids are the file's (WTF renumbers them); legacy int16[] values
// are signed (WTF's legacy reader returned them unsigned); char, wchar and
// their arrays, which no legacy writer could produce, are read from legacy
// files as 1 byte, 2 bytes and u32 count + elements; a wtf.zone#set to an
// undefined zone falls back to the default zone with a warning (WTF crashes);
// a later define of a wire id with a different signature is honoured (WTF
// reused the first signature of the same name). Files imported together are
// not merged onto one timebase. Arrays longer than 65536 elements are cut
// (with a warning), and at most 64 context and 64 metadata fields become
// attributes.
//
// # Limits
//
// Every length read from the input is checked against the bytes that remain
// before anything is allocated; scopes nest at most trace.MaxDepth-1 deep
// (WTF's own loader stops at 1024) and JSON values at most
// trace.MaxValueDepth deep (deeper parts are kept as JSON text). The 32-bit
// microsecond event times wrap after 71.6 minutes; nothing in the file marks
// the wrap, so it is not undone.
package wtf
