// Package atf imports ADA Trace Format v2 (ATF v2) sessions: per-thread
// index.atf files of fixed 32-byte call/return events, optional detail.atf
// files of register and stack snapshots, and an optional manifest.json that
// names functions (specs/ada-trace-format-v2.md; the writer's real behaviour
// is in notes/dial9-and-atf-v2.md, part B).
//
// The package owns three layers:
//
//   - the binary layouts (format.go): headers, footers, index events and
//     detail records, all decoded by explicit little-endian offsets;
//   - file readers (index.go, detail.go, manifest.go, session.go): the
//     event-count recovery of index files, the record walk of detail files,
//     O(1) navigation both ways between them (Thread), session discovery;
//   - the mapping onto the trace model (build.go, atf.go): per thread, every
//     top-level call with its matching return becomes one trace.Span and the
//     calls it makes become child records.
//
// Invariants:
//
//   - Nothing read from a file is trusted to size an allocation: every count
//     is clamped to what the file can hold before memory is reserved.
//   - A crashed session is normal input, not an error: a placeholder header,
//     a missing footer, a footer whose header was never rewritten and a torn
//     last record all decode; the recovery decision is reported per file.
//     The event count comes from a valid footer at header.footer_offset, else
//     from a valid "2ITA" footer in the last 64 bytes, else from the whole
//     events that fit; it is always clamped to the file size.
//   - Index files are not assumed sorted or duplicate-free. Events are
//     ordered by (timestamp, position); the writer's duplicated lane copies
//     (same function, kind and depth, timestamps at most DuplicateWindowNS
//     apart, exactly one of them linked to a detail record) are merged,
//     keeping the linked copy.
//   - Every index event is accounted for: as the start or end of a record, an
//     exception on a record, a removed duplicate, or a counted orphan or
//     invalid event (Summary.Details).
//   - Identifiers are deterministic: re-importing the same files yields the
//     same trace and span ids (see traceID).
//   - Decoding never panics and never hangs on hostile input; malformed
//     headers produce a *FormatError naming the file and offset.
package atf
