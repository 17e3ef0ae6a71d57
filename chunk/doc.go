// Package chunk owns the data file of a store, traces.zts: the 16-byte ZTS0
// file header followed by ZCH0 chunks, each an independently compressed and
// checksummed payload. The data file is the source of truth of a store; every
// index is derived from it. The byte-level format is specified in
// docs/format/data-file.md.
//
// The package provides three views of a data file:
//
//   - File: the open, writable file. Append encodes a payload and writes the
//     chunk header and stored bytes with one positioned write at the logical
//     end; ReadChunk reads, verifies and decompresses the chunk at an offset.
//     Reads use ReadAt (pread) and never take the append lock, so they run
//     concurrently with appends.
//   - Encode: the pure, concurrency-safe encoder, so callers can compress
//     outside whatever lock serialises their appends (AppendEncoded).
//     EncodeFrames compresses a zstd chunk's payload as several
//     independent frames cut where the caller says, the first an LZ4 lead
//     frame (lz4frame.go: one LZ4 block, which decodes in about a third of
//     a zstd frame's time, and the table of the later frames), and
//     File.ReadFrames (Frames) reads such a chunk as its header and lead
//     frame only, and decompresses only the frames a reader asks for
//     (Fill), each into a buffer of its own and checked by its own
//     checksum: a reader of one span of a large chunk reads, decompresses
//     and allocates a part of it. A Frames keeps no stored bytes; the
//     frames it decodes later are read from the file again (a chunk never
//     changes once appended). A chunk whose first frame is a zstd frame
//     (written before LZ4 lead frames) is read whole by ReadFrames, its
//     CRC-32 and frame layout checked; a reader that kept its Layout
//     (Frames.Layout) reads it again with File.ReadFramesKnown: its header
//     and only the frames it decodes, each checked by its content
//     checksum; a header other than the one kept, or a first frame that
//     does not decode, sends it back to ReadFrames.
//   - Scanner: a sequential reader over any io.ReaderAt, used by recovery and
//     verify. It reports every bad region (bad magic, sizes out of bounds,
//     checksum or decompression failure, truncated tail, invalid payload) and
//     resynchronises on the next ZCH0 magic whose chunk validates, so one
//     damaged chunk costs only that chunk.
//
// Invariants:
//
//   - File.Size is the logical end of the data: every byte below it belongs to
//     a completely written chunk (or to a torn tail or zero tail that existed
//     before Open; Open does not scan: the caller's scan cuts a torn tail
//     with TruncateTail and sets the end before a zero tail with SetEnd). An
//     append that fails leaves Size unchanged and truncates the file back.
//   - Zero tail: a compressed file with checksums is extended with zeros up
//     to PreallocStep past its data (fallocate) when an append needs room,
//     and appends overwrite them; Sync is fdatasync. Where a chunk is
//     expected and only zeros follow to the end of the file, the data ends
//     (Scanner); zeros followed by anything else are damage. Seal and Close
//     truncate the file to its data, so a sealed file has no zero tail.
//   - Every length read from disk is bounded before it is used to allocate:
//     stored and logical sizes by MaxChunkSize, the logical size of a
//     compressed chunk also by the codec's maximum expansion ratio, and every
//     read by the size of the file.
//   - Bytes are never silently discarded: TruncateTail and Reinitialize first
//     append the bytes they cut to a ".broken" file and fsync it.
//   - The master checksum in the file header is 0 while the file is open for
//     appends; Seal writes the CRC-32 of all chunk headers, after which the
//     file refuses appends.
//   - Decoders never panic on hostile input; failures are *CorruptionError
//     values naming the offset of the chunk and a Reason.
package chunk
