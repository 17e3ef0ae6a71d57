// Package zorka decodes what Zorka agents send to a collector — agent data
// (string and method definitions) and trace data — into trace.Span values,
// and replays ZICO request dumps (JSON lines of uri, headers and base64
// bodies) through the same decoder for `ztsctl import --format zorka`, as
// well as raw captured bodies (ImportBodies: agent-data files, then the
// trace-data files that use their definitions, as one agent session).
//
// # Wire formats
//
// Two generations are decoded; a trace body's generation is detected from
// its first bytes (or taken from the trace it continues):
//
//   - Zorka 1.90 (the format zorka-tdb consumes): string defs C1 [id, text,
//     type], method defs C2 [id, class, method, signature]; trace records
//     C8 9F … FF carrying a prolog (CA/CB: 40-bit start ticks, 24-bit method
//     id, big- or little-endian), an optional TraceBegin D8 21 [clock ms,
//     span id, parent id] with 1–3 elements, trace flags CF, attribute maps
//     C9 (keys are C6 string refs or plain text, values any CBOR scalar,
//     string ref, list or map, but no floats), nested records, exceptions
//     D8 22 with stack and cause, exception refs D8 23, trace info maps CE,
//     and an epilog (CC/CD: 40-bit stop ticks and 24-bit calls, or a 16-byte
//     form with a 64-bit call counter) followed by the record's break; a bare
//     break also ends a record. 1 tick = 2^16 ns.
//   - Zorka 2.x: string defs C1 [id, text], TRACE_START C3 9F tstart-ns
//     method-id …, TRACE_END C4 [tstop-ns, calls, flags?] FF, TRACE_BEGIN
//     C5 [clock ms, trace-type symbol, span id?, parent id?], attributes
//     C6 [key, value] or upward C6 [trace type, key, value], EXCEPTION C7,
//     EXCEPTION_REF C8.
//
// # Mapping onto the trace model
//
// Every record that carries a TraceBegin starts a span (Span.Source =
// trace.SourceZorka); records below it without a TraceBegin are its record
// tree. A span nested inside another one is cut out of the enclosing span's
// tree and becomes a span of its own whose ParentID is the enclosing span's
// id when the agent sent none. A span without a span id gets one derived
// from the trace id, the submission and the byte offset (never 0, and the
// same on a resubmission of the same bytes). Span.StartNS is the TraceBegin
// clock in ns; record times are relative to the span's root record. Span
// attributes are the root record's Zorka attributes plus call.method (the
// method as ZICO renders it, e.g. `void a.b.C.m(Request, Response)`) and
// source.format=zorka. Attribute keys and values are kept as sent: string
// refs resolve to their text, integers stay integers (beyond int64: decimal
// text), null and undefined become null, byte strings become text (0x-hex
// when not UTF-8), lists and maps nest; text that is not UTF-8 is read as
// ISO-8859-1. Span.Type is the 2.x TRACE_BEGIN trace type; a 1.90
// TraceBegin [clock, n] with 0 < n < 65536 comes from a pre-1.90 agent
// where n is a trace-type id, not a span id: Type is its symbol when
// defined, else the span gets a zorka.trace_type attribute. Such an agent
// (the 2017 Tomcat sample) wrote prolog tstart in nanoseconds, not ticks,
// while tstop - tstart is ticks: when its records do not nest as ticks but
// do as nanoseconds, starts are read as nanoseconds and the span gets
// zorka.tstart_unit = "ns" (zorka-tdb reads ticks, so ZICO drew its
// children minutes after the trace ended). An exception marks its record
// and counts in Errors; only the ERROR_MARK trace flag sets Span.Error, as
// in Zorka and ZICO (a caught exception is no failure). A TraceBegin outside any record (accepted by
// zorka-tdb) yields a span without a root record that takes the attributes
// and flags following it at top level.
//
// # Sessions and streamed traces
//
// Sessions holds, per agent session id, the agent-id → string translation
// and the records that streamed traces left open. It is safe for concurrent
// use; each session is locked while one of its bodies is decoded. Re-
// definitions overwrite; reset clears a session's symbols (not its open
// records, so a trace continues after the agent resends its symbols);
// sessions and open traces idle longer than Options.IdleTimeout are dropped;
// the number of sessions, symbols per session and open traces per session
// are bounded.
//
// A trace submission may leave records open; the next submission for the
// same trace id in the same session continues inside the innermost one.
// Each submission yields one piece per span it touched, numbered by
// Span.ChunkNum 0, 1, 2, … per span; open records have Record.Open set, and
// the next piece repeats the open path as first children (see
// trace.AssembleChunks, which merges pieces back into one span).
//
// # Files
//
// Record handling exists once; each wire generation only supplies its
// framing and field numbering:
//
//   - items.go: wireVersion, what a generation supplies (its tag switch,
//     whether its record times are ticks, whether attributes may hold
//     string refs or floats); format detection; the one item loop (a break
//     ends the innermost record); the items both generations send in the
//     same shape, read once and laid out by per-version forms: TraceBegin
//     (beginForm), exceptions with stacks and attributes (exceptionForm),
//     exception refs, symbol-keyed attribute maps, and the errors of
//     record framing (no 9F after a record start, no break after its end).
//   - wire190.go: Zorka 1.90 tags and forms, its item switch, prolog and
//     epilog words (40-bit ticks), trace info maps, C9 attribute maps,
//     pre-1.90 trace types and nanosecond starts.
//   - wire2x.go: Zorka 2.x tags and forms, its item switch, TRACE_START /
//     TRACE_END (ns), upward TRACE_ATTR.
//   - tracedata.go: the decoder state and record handling: open records,
//     spans begun and nested, exceptions and causes, attributes, error
//     marks, limits (depth, exceptions, cause chains), generated span ids,
//     continuing a streamed trace, and turning it all into trace.Span
//     pieces.
//   - value.go: attribute keys and values, both generations.
//   - symbols.go: a session's symbol table, resolving string and method
//     ids in trace data, rendering methods as ZICO does.
//   - agentdata.go: agent-data bodies (string and method definitions of
//     both generations), staged and accounted, applied whole.
//   - cbor.go: bounds-checked CBOR reading, agent text to UTF-8.
//   - errors.go: DecodeError and the sentinel errors.
//   - sessions.go: Sessions, Options and their bounds.
//   - dump.go, bodies.go: ZICO request dumps and raw captured bodies for
//     ztsctl import.
//
// # Errors
//
// Malformed input is rejected with a *DecodeError naming the byte offset:
// unknown tags, floats in 1.90 data, undefined symbols, truncation, lengths
// beyond the body, nesting beyond trace.MaxDepth. Nothing is changed by a
// rejected body: symbols and open records stay as they were. A trace body
// for a session that does not exist (or expired) fails with
// ErrUnknownSession; a malformed session or trace id header with
// ErrInvalidRequest. Decoding never panics and allocates in proportion to
// the body.
package zorka
