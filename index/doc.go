// Package index owns a store's metadata index (the store's meta/ directory):
// the Pebble database that maps trace ids to the data-file locations of
// their spans and answers searches by time, duration, error flag, attribute
// and text.
//
// # Model
//
// The store's single writer (storedir) feeds the index one SpanEntry per
// span chunk it appends to the data file, in data-file order, through a
// Batch; Commit writes the batch atomically together with the watermark (the
// data-file offset up to which the index is complete) and the counters.
// Pebble runs without its WAL: after a crash the index holds a prefix of the
// committed batches, its watermark says which, and the writer re-indexes the
// data file from there. Everything stored is derived from the data file and
// from the order of AddSpan calls, so rebuilding yields the same index.
//
// Each entry gets a sequence number, dense from 0 in AddSpan order. Entries
// are grouped into blocks of 1<<BlockShift consecutive sequence numbers;
// secondary structures are per block and refer to an entry by its offset in
// the block, which keeps them small:
//
//   - 't' traceID → the records of every entry of the trace (span id,
//     parent, chunk number, location, start, duration, error); the answer to
//     TraceSpans and Span in one point lookup.
//   - 'q' group → the trace ids of 64 consecutive sequence numbers, to turn
//     a search candidate back into its trace.
//   - 'c' block → the time column: start time, error bit and duration class
//     of every entry of the block, in sequence order.
//   - 'b' block → the summary (min and max start) of a sealed (full) block,
//     kept in memory: searches visit blocks in descending max-start order.
//   - 'a' key value block, 'w' text block → posting lists (block offsets) of
//     a sealed block, written once when the block fills up; 'v' value key
//     records which keys a value occurs under (for text search).
//   - 'r' block → the rows (attribute and text ids) of the open block, the
//     one still filling up; deleted when it is sealed. The index keeps the
//     open block's rows in memory too (read back on open): the commit path
//     only appends rows, the block's posting lists are built from them once
//     when it is sealed, and searches build in-memory lists from the rows
//     on demand (see openBlock); a search that outlives the open block in
//     memory evaluates the rows it reads.
//   - 'm' → format record; state record (counters, watermark, open block
//     summary), written with every batch.
//
// The state record counts distinct traces: Commit counts a batch's trace
// id as new unless the index holds it. An index created empty in this
// process keeps an in-memory Bloom filter of every trace id committed
// (traceFilter), so a new trace id costs no lookup; only ids the filter or
// the recent-ids set may have seen are looked up in Pebble.
//
// So a batch writes a handful of keys per trace plus one per block,
// whatever its size. Multi-entry values are written with Pebble merge
// operations (one operand per batch). The exact byte layout is in
// docs/format/index-keys.md.
//
// # Search
//
// Search returns entries newest first (StartNS desc, then trace id desc,
// span id desc), one hit per (StartNS, trace id, span id): when several
// chunks of one span match, the hit is the lowest chunk number. It visits
// blocks in descending max-start order, finds candidates in each block by
// intersecting posting lists (attributes AND, texts OR; for the open block,
// lists built in memory from its rows), filters them with
// the time column (start, error bit, duration class: minimum and maximum
// duration), and emits a candidate once no unvisited block can hold a
// newer one, after its exact duration and the caller's Accept (a condition
// the index cannot express, asked once per span) have passed it. Blocks that a rare attribute or text does not occur in are
// skipped without being read.
//
// A Matcher answers the same query for one trace at a time: from the
// trace's records ('t') and the posting lists or rows of the blocks its
// entries are in, it finds the trace's first matching entry in search order
// (optionally only among those before a position), without walking other
// matches. storedir pages through traces with it.
//
// # Concurrency
//
// One writer (one Batch at a time; a Batch is not safe for concurrent use)
// and any number of concurrent readers. A reader sees a consistent prefix
// of committed batches as of the start of its call (a Matcher: as of its
// creation). A running Search and an open Matcher hold the index open:
// Close waits for them.
package index
