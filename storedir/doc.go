// Package storedir owns the stores of a data directory: each store is one
// hex-named directory holding a data file (traces.zts, the source of truth),
// a metadata index (meta/) and a text index (text/); the DB is the set of
// them under one LOCK file, with one open store taking writes.
//
// # Writes
//
// DB.Append validates a request's spans, encodes them into chunk payloads in
// the caller's goroutine (so encoding and compression use every core), and
// hands the encoded chunks to the single committer goroutine. The committer
// writes every pending chunk, makes them durable with one fsync for the whole
// group (sync=batch), one per request (sync=always) or none (sync=none),
// indexes them — all of a group's chunks in one batch per index
// (IndexChunks), the text and metadata commits running in parallel — and
// only then acknowledges. Indexing before the acknowledgement gives
// read-your-writes; it never costs durability because the indexes run
// without a WAL and are rebuilt from the data file.
//
// # Invariants
//
//   - Everything in meta/ and text/ is derived from traces.zts. Each index
//     records a watermark: the data-file offset up to which it is complete,
//     committed in the same Pebble batch as the entries it covers.
//   - Text ids are assigned in data-file order by one deterministic function
//     (internSpan), so rebuilding text/ alone yields the same ids meta/ uses.
//     If either index claims more than the data file holds (its watermark is
//     past the end), both are rebuilt from offset 0.
//   - Opening a store re-indexes from the lower watermark to the end of the
//     data file. A torn tail (an incomplete or corrupt last chunk that no
//     valid chunk follows) is cut, and the cut bytes are appended to
//     traces.zts.broken, never silently discarded. A bad chunk in the middle
//     is skipped and logged; `ztsctl verify` names it.
//   - Only the newest store is open for writes. Sealing flushes, fsyncs,
//     writes the master checksum and then state=sealed in config.props
//     (atomic replace). Retention renames a sealed store to .deleting-NNNNNN
//     before removing it; leftovers are removed at start-up.
package storedir
