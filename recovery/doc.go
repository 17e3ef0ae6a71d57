// Package recovery owns the offline repair and verification of stores:
// what `ztsctl recover` and `ztsctl verify` run on a stopped data
// directory (or one store directory).
//
// # Recover
//
// Recover walks the ZCH0 magics of a store's data file with chunk.Scanner,
// validating every chunk completely (header bounds, CRC-32, decompression,
// and the CBOR payload by decoding it with trace.DecodeChunk). After a bad
// chunk it resynchronises on the next magic whose chunk validates, and it
// reports every bad region with its offset, length and reason. Then it:
//
//   - repairs a damaged file header (wrong magic, flipped flag or reserved
//     bits, a master checksum that does not match): the options are taken
//     from config.props or, failing that, from whichever candidate options
//     validate the most chunks; the old header bytes are in the report;
//   - cuts a torn tail (a last bad region that no valid chunk follows) with
//     chunk.File.TruncateTail, which first appends the cut bytes to
//     traces.zts.broken and fsyncs it: nothing is silently discarded. Bad
//     regions in the middle stay where they are (the data file is the source
//     of truth and is never rewritten); they are skipped and reported, and
//     `verify` keeps naming them;
//   - rebuilds both Pebble indexes from the good chunks into meta.rebuild/
//     and text.rebuild/ with storedir.IndexChunks — the function the write
//     path uses, so text ids and entries are exactly what the daemon would
//     have written; batches of consecutive chunks, cut at every bad
//     region — and swaps them in atomically (package indexswap);
//   - re-seals a sealed store whose data file it cut, and rewrites
//     config.props (counters, time range, options, state, master checksum).
//
// Scanning and decoding run in one goroutine and indexing in another, so a
// rebuild uses two cores. A dry run scans and reports without changing
// anything.
//
// # Crash safety
//
// Recover holds the data directory's LOCK (the daemon's flock), so a daemon
// cannot start while it runs. Every step is durable before the next one
// starts, and every state a crash can leave is one that a re-run of recover
// or the daemon's open converges from:
//
//   - during the scan or the rebuild: only meta.rebuild/ and text.rebuild/
//     were written; indexswap.FinishInterrupted discards them;
//   - after a tail cut but before the swap: the old indexes may point past
//     the end of the data file; their watermark is past the end, so the
//     daemon rebuilds them (and a re-run of recover rebuilds them too);
//   - during the swap: the REBUILD-COMMIT marker decides: present, the swap
//     is rolled forward; absent, rolled back. Never one new index and one
//     old;
//   - before config.props is rewritten: it is rewritten by the next run (and
//     the daemon tolerates stale counters).
//
// # Verify
//
// Verify is read-only (data files are opened read-only, indexes in Pebble's
// read-only mode) and reports every problem it finds: an unreadable or
// inconsistent config.props, a bad file header, a master checksum that
// does not match (sealed stores), every bad region, missing or damaged
// indexes, an interrupted index swap, and any disagreement between the
// indexes and the data file: an index entry whose chunk does not exist or
// holds a different span, a chunk (below the index watermark) whose spans
// are not all indexed, an index that lags or claims more than the data
// file holds, a chunk string the text index does not know. While a daemon
// holds the lock it checks the data files only.
package recovery
