// Package migrate owns offline store migration, what `ztsctl migrate` runs:
// it rewrites the stores of one or more stopped data directories into a new
// data directory (or in place), changing compression or checksums, upgrading
// stores written by an older format version, merging directories, copying a
// time range and dropping traces by attribute, and then proves that the
// result holds exactly what it should.
//
// # What is copied
//
// The data files of the sources are the source of truth: migrate reads each
// source store's traces.zts directly, chunk by chunk (chunk.Scanner), and
// never its indexes, so it works when meta/ or text/ are missing or damaged.
// Sources are taken store by store (ascending id), source directory by
// source directory (in the order given): source order is manifest store
// by manifest store, offsets ascending. Each span piece — a stored span, or
// one chunk of a streamed span — is identified by (trace id, span id, chunk
// number). A piece seen again with identical content (the same directory
// given twice, directories of daemons that stored the same spans,
// at-least-once retries inside one store) is a duplicate and is not written
// again. A piece seen again with different content is a newer version (see
// "Versions" in package storedir): it is written after the version before
// it, and storedir.DB.Append supersedes that one in the target exactly as
// the daemon did in the source. So the target's current version of each
// piece — what GetTrace and search return — is its last occurrence in
// source order: within a source directory the version the daemon served,
// and across directories a later directory's differing version. Older
// versions stay in the target's data files (counted as NewerVersions when
// written over), as in the source. A batch may hold several versions of a
// piece; it is appended in calls holding at most one of each, so that each
// call finds the version before it stored and indexed. Trace ids present
// in several sources are merged, not duplicated.
//
// Filters work on whole traces. A trace is in the time range [since, until)
// when its earliest span (over every source) starts in it; it is dropped by
// --drop-attr k=v when any of its spans carries k=v as a span attribute or an
// attribute of its root record — the attributes `search attr=k:v` matches.
// Every version of a span counts (an older version's start or attribute
// too). Filtering needs a first pass over the sources (the plan) that records each
// trace's start and drop decision.
//
// Pieces are written through storedir.DB.Append into the target data
// directory, so the target's chunks and indexes are exactly what the daemon
// writes. The target starts a new store for each source store that
// contributes pieces, so target stores mirror the source stores' time ranges
// (a store larger than the target's MaxStoreSize is split further).
//
// # State, checkpoints and resume
//
// The state of a migration lives in the target's .migrate/ directory, a
// Pebble database holding: the parameters and the source manifest (every
// source store with its data-file size), the plan, the seen-set (for every
// piece: a SHA-256 of the encoding of the version written last and where
// in the sources that version was first read), and the checkpoint (next source store and offset, counters, and how
// far the target's data files are accounted for). Work is done in batches of
// whole source chunks; after each batch the target is synced (DB.Sync) and
// only then is the checkpoint committed, with the batch's seen-set entries,
// in one synced Pebble batch.
//
// A re-run with the same parameters resumes from the checkpoint; a re-run
// with other parameters, or after a source changed, is refused. Pieces that
// reached the target after the last checkpoint (the batch in flight when the
// process died) are found by scanning the target's data files past the
// checkpointed position (in target order, several versions of a piece
// included); when the resumed copy meets them again in the sources, in the
// same order, it records them instead of writing them twice. So killing
// migrate at any moment and re-running it converges to the target an
// uninterrupted run writes: each version once, the newest last.
//
// # Verification
//
// Before a migration is declared done, Verify checks that:
//
//   - every piece of the sources that the filters keep is in the seen-set,
//     and the occurrence recorded there and every later one have the
//     content that was recorded (so it is the last occurrence's); pieces
//     the filters drop are not (a second pass over the sources);
//   - every piece in the target's data files is in the seen-set; the
//     copies of a piece, in target order, each differ from the one before
//     (no piece written twice) and the last, the current version, has the
//     recorded content (a pass over the target);
//   - every trace is readable through storedir.DB.GetTrace, index included,
//     with each span equal to the source's newest version (pieces of
//     streamed spans are assembled from the sources and compared);
//   - recovery.VerifyDataDir — what `ztsctl verify` runs — finds no problem
//     in the target.
//
// # Completion and --in-place
//
// A finished migration into a new directory writes .migrate-report.json into
// the target and removes .migrate/ (renamed to .migrate.deleting first, so
// that a crash while removing it is recognised). Re-running a finished
// migration with the same parameters reports it as already complete.
//
// --in-place migrates DIR into DIR.migrate-new/, verifies it, and then swaps
// the directories with two renames, each followed by an fsync of the parent:
// DIR → DIR.migrate-old, then DIR.migrate-new → DIR; DIR.migrate-old is
// removed only after that. A crash at any point is finished by re-running
// the same command: with DIR.migrate-new and DIR.migrate-old but no DIR the
// second rename is redone; with DIR and DIR.migrate-old, DIR is the verified
// new directory (its .migrate/ says so) and the old one is removed. Between
// the two renames DIR does not exist for a moment: a daemon started exactly
// then would create an empty DIR, and the second rename fails with an error
// naming both directories. Further --from directories are merged into DIR
// and left unchanged.
//
// # Format versions
//
// A store's config.props names the format version its data file was written
// in. The Upgraders map says how to read each version: a function decoding a
// chunk payload of that version into current trace values. Version 1 is the
// only released version (storedir.FormatVersion) and is read with
// trace.DecodeChunk. When version 2 is introduced: bump
// storedir.FormatVersion, make the new payload decoder the entry for 2, keep
// the version 1 decoder under 1, and add testdata/stores/v2/ (generated as
// v1 was, see fixture_test.go) with a test like TestFixtureV1. If a new
// version changes the data-file framing itself rather than the payload, this
// hook has to grow into a per-store reader.
//
// # Invariants
//
//   - Sources are never written to (only their LOCK files, which migrate
//     holds so that no daemon can start on them while it runs).
//   - A checkpoint never claims work whose target data is not durable.
//   - A migration is reported complete only after Verify passed.
package migrate
