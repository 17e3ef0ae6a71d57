// Package dial9 imports dial9 tokio-runtime telemetry (the
// dial9-trace-format, "TRC\0" files) into ztsd's trace model.
//
// # Decoding
//
// Reader decodes a file one event at a time, as the format is implemented
// today (shared/notes/dial9-and-atf-v2.md, part A; it differs from SPEC.md):
//
//   - gzip is sniffed by its magic and unwrapped whatever the file name;
//     legacy TOKIOTRC files are rejected with ErrLegacyFormat;
//   - a file is one or more streams: a TRC header where a frame tag is
//     expected starts a new stream and discards schemas, the string pool,
//     the stack pool and the timestamp base, so ids are stream-scoped;
//   - frames: schema (0x01, idempotent re-registration, conflicting
//     re-registration is an error), event (0x02, packed u24 delta that
//     advances the timestamp base), string pool (0x03; entries that are not
//     UTF-8 are dropped), stack pool (0x04), timestamp reset (0x05) and
//     schema annotations (0x06, LEB128 type id);
//   - field types 1–15 and the 0x80 optional bit (a presence byte); inside
//     dynamic containers element tags are plain types and an optional
//     element tag decodes as its base type without a presence byte; U8, U16
//     and U32 are fixed width; LEB128 is at most 10 bytes;
//   - any version byte is accepted (a warning if it is not 1).
//
// An undecodable frame (unknown tag, unknown type id, truncation, bad
// UTF-8 in a schema, ...) stops decoding with a *DecodeError naming the
// frame's byte offset in the decoded (decompressed) file; everything before
// it stays decoded. The Reader never allocates for a length it has not
// read: its window only grows while one frame does not fit and only after
// it was filled with real input.
//
// # Mapping (Import, Decode)
//
// Each stream is one thread's buffer (a worker's thread, the sampler
// thread, ...). Events are keyed by schema name and field name, so old and
// new layouts (inline StackFrames or pooled call chains, optional or
// mandatory thread_name, CallframeDefEvent or SymbolTableEntry) map alike.
//
//   - Each worker is a thread named "worker-N" (255 "non-worker", 254
//     "blocking"). A worker's active period, WorkerUnparkEvent →
//     WorkerParkEvent, is a trace. The period itself is not a span: it has
//     no source event with a duration, and a span lasting from unpark to
//     park would be found by every duration search meant for polls (the
//     acceptance search "source.format=dial9, min duration 1 ms, spans"
//     returns exactly the long polls). Its spans, all without parent, are:
//     a zero-length "worker-N unpark" span (Type "dial9.unpark", the
//     unpark's fields as dial9.unpark.*); the polls; every other event in
//     the period outside the polls as a zero-length span of its own (Type
//     "dial9.event", root record named by its schema); and a zero-length
//     "worker-N park" span (Type "dial9.park", the park's fields as
//     dial9.park.*) carrying the period's totals dial9.active_ns (unpark
//     to park), dial9.cpu_time_ns (CPU time used in it) and dial9.polls.
//   - Each poll, PollStartEvent → PollEndEvent, is a span (Type
//     "dial9.poll", the active period's trace id) whose root record is
//     "poll <spawn location>" lasting the poll; span attributes
//     dial9.task_id, dial9.spawn_location, dial9.local_queue. So a
//     spans-mode search by duration finds long polls; dial9.kind ("poll",
//     "unpark", "park", "event", "tracing_span", "symbol_table") tells the
//     kinds apart.
//   - Tracing spans (SpanEnter:<callsite> → SpanExit:<callsite>, matched by
//     span_id on the worker) are nested records named by their callsite,
//     inside the poll they were entered in; one entered and not exited
//     when its poll ends is closed there and marked Open. One entered
//     outside any poll is a span of its own (Type "dial9.tracing_span")
//     lasting as it did.
//   - Every other event becomes a zero-length record named by its schema,
//     with one attribute dial9.<field> per field (a StringMap field one
//     dial9.<field>.<key> per entry; call chains a list of frame strings
//     resolved through the file's symbol table, innermost inline frame
//     first): wakes, task spawns and terminations, span closes and custom
//     events go into the open poll of their stream's worker, else they are
//     event spans of its open active period; CPU samples go into the poll,
//     else the active period, of their worker that contains their
//     timestamp; task dumps, queue samples of the sampler thread and
//     everything else outside any active period are event spans of one
//     trace per stream segment, as are polls outside any active period.
//   - SymbolTableEntry and CallframeDefEvent rows are the symbol table:
//     they are counted in dial9.symbol_table_entries on one zero-length
//     span of their segment (Type "dial9.symbol_table").
//   - A PollStart without an end at the end of the input gives an
//     unterminated poll (root record Open, dial9.unterminated); an Unpark
//     without a Park gives no park span and dial9.unterminated on the
//     unpark span; an end without a start (it began before the file) is a
//     zero-length event.
//     Every event is accounted for exactly once (Summary.Details
//     "accounting").
//
// Times: the first ClockSyncEvent anchors the monotonic clock to wall-clock
// time (older files: a wall-clock-stamped SegmentMetadataEvent; else the
// monotonic times are used as they are, with a warning). A record stamped
// outside its poll (or tracing span) is clamped into it and keeps its
// monotonic time in dial9.timestamp_ns.
//
// Every span carries source.format = "dial9", source.file (base name),
// thread, dial9.kind, dial9.stream and dial9.worker when it has one.
// Trace ids are derived from the file (format, base name, size) and a
// stable key ("active/<worker>/<ordinal>", "segment/<stream>"); span ids
// from the trace id and the span's place in it ("/poll/<worker>/<ordinal>",
// "/event/<index in time order>", "/park", "/symbols"), so importing a
// file twice yields the same ids.
//
// Import reads the file twice, streaming both times: the symbolizer
// appends the symbol table at the end of a file, and CPU samples from the
// sampler thread precede the worker events they fall into, so a first pass
// collects the symbol table, the clock anchor, the stream owners and the
// time ranges of polls and active periods (memory proportional to those),
// and the second pass builds and emits spans as they complete.
package dial9
