package storedir

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// framesTestStore writes 1,500 spans of the bench workload in requests of
// 500 (chunks of ~200 KiB of payload, zstd) into an open store 000000 and
// closes the DB; it returns the spans and the data file's path.
func framesTestStore(t *testing.T, dir string) ([]*trace.Span, string) {
	t.Helper()
	reqs, spans, _ := benchRequests(5, 1500, 500)
	reqs, spans = reqs[:3], spans[:1500]
	o := testOptions()
	o.ChunkTargetSize = 1 << 20
	o.MaxStoreSize = 64 << 20
	if o.Chunk.Compression != chunk.Zstd {
		t.Fatalf("default compression %v, the test needs zstd", o.Chunk.Compression)
	}
	db := openTestDB(t, dir, o)
	for _, r := range reqs {
		if err := db.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return spans, filepath.Join(dir, StoreName(0), dataFile)
}

// framesTestStoreZstdLead is framesTestStore with the data file rewritten
// as chunks cut into frames were written before LZ4 lead frames (the same
// payloads cut at the same offsets, every frame a zstd frame with its
// literals stored raw) and the indexes dropped (the next Open rebuilds
// them from the data file): a store a ztsd before LZ4 lead frames wrote.
func framesTestStoreZstdLead(t *testing.T, dir string) ([]*trace.Span, string) {
	t.Helper()
	spans, path := framesTestStore(t, dir)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	opt := src.Options()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true),
		zstd.WithSingleSegment(true), zstd.WithNoEntropyCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var chunks []byte
	for off := int64(chunk.HeaderSize); off < src.Size(); {
		payload, next, err := src.ReadChunk(off)
		if err != nil {
			t.Fatal(err)
		}
		stored := raw[off+chunk.ChunkHeaderSize : next]
		if binary.LittleEndian.Uint32(stored) != 0x184D2A5C {
			t.Fatalf("chunk at %d: no LZ4 lead frame", off)
		}
		// The lead frame's content size, then its table's (stored, payload)
		// sizes of each later frame.
		cuts := []int{int(binary.LittleEndian.Uint32(stored[12:]))}
		for i := range int(binary.LittleEndian.Uint32(stored[16:])) {
			cuts = append(cuts, cuts[len(cuts)-1]+int(binary.LittleEndian.Uint32(stored[20+8*i+4:])))
		}
		var out []byte
		from := 0
		for _, c := range cuts {
			out = enc.EncodeAll(payload[from:c], out)
			from = c
		}
		if from != len(payload) {
			t.Fatalf("chunk at %d: the lead frame's table ends at %d of %d payload bytes", off, from, len(payload))
		}
		chunks = binary.BigEndian.AppendUint32(chunks, chunk.ChunkMagic)
		chunks = binary.BigEndian.AppendUint32(chunks, uint32(len(out)))
		chunks = binary.BigEndian.AppendUint32(chunks, uint32(len(payload)))
		chunks = binary.BigEndian.AppendUint32(chunks, crc32.ChecksumIEEE(out))
		chunks = append(chunks, out...)
		off = next
	}
	src.Close()
	for _, name := range []string{dataFile, metaDir, textDir} {
		if err := os.RemoveAll(filepath.Join(dir, StoreName(0), name)); err != nil {
			t.Fatal(err)
		}
	}
	dst, err := chunk.Create(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(chunks); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, frames := chunkFrames(t, path); len(frames) != 3 || frames[0] < 4 {
		t.Fatalf("rewritten chunks are %v frames, want 3 chunks of at least 4", frames)
	}
	return spans, path
}

// chunkFrames returns the offsets of a data file's chunks and how many zstd
// frames each is stored in.
func chunkFrames(t *testing.T, path string) (offs []int64, frames []int) {
	t.Helper()
	f, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off := int64(chunk.HeaderSize); off < f.Size(); {
		fr, next, err := f.ReadFrames(off)
		if err != nil {
			t.Fatal(err)
		}
		offs, frames = append(offs, off), append(frames, fr.Frames())
		off = next
	}
	return offs, frames
}

// checkAllSpans gets every span by trace and span id and compares it with
// what was stored.
func checkAllSpans(t *testing.T, db *DB, spans []*trace.Span) {
	t.Helper()
	for _, want := range spans {
		got, err := db.GetSpan(context.Background(), want.TraceID, want.SpanID)
		if err != nil {
			t.Fatalf("span %s/%s: %v", want.TraceID, want.SpanID, err)
		}
		w, g := *want, *got
		w.Children, g.Children = nil, nil
		if !g.Equal(&w) {
			t.Fatalf("span %s/%s differs: %s", want.TraceID, want.SpanID, trace.Diff(&w, &g))
		}
	}
}

// TestGetAcrossFrames: large chunks are written as several zstd frames, and
// every span of them reads back whole, each trace through a view that
// decompresses only the frames its spans are in.
func TestGetAcrossFrames(t *testing.T) {
	dir := t.TempDir()
	spans, path := framesTestStore(t, dir)
	_, frames := chunkFrames(t, path)
	if len(frames) != 3 {
		t.Fatalf("%d chunks, want 3 (one per request)", len(frames))
	}
	for i, n := range frames {
		if n < 4 {
			t.Fatalf("chunk %d is %d frames, want at least 4 for ~200 KiB of payload", i, n)
		}
	}
	db := openTestDB(t, dir, testOptions())
	defer db.Close()
	checkAllSpans(t, db, spans)
	// Whole traces too (the spans of a trace can straddle two frames).
	seen := map[trace.TraceID]int{}
	for _, sp := range spans {
		seen[sp.TraceID]++
	}
	for id, n := range seen {
		roots, err := db.GetTrace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		var count func(s []*trace.Span)
		count = func(s []*trace.Span) {
			for _, sp := range s {
				got++
				count(sp.Children)
			}
		}
		count(roots)
		if got != n {
			t.Fatalf("trace %s: %d spans, want %d", id, got, n)
		}
	}
}

// TestGetOldLayoutChunks: a data file whose large zstd chunks are one frame
// each (as every chunk was written before frames) reads back whole.
func TestGetOldLayoutChunks(t *testing.T) {
	dir := t.TempDir()
	spans, path := framesTestStore(t, dir)
	// Rewrite the data file with the same payloads as one frame each
	// (File.Append compresses as Encode always did) and drop the indexes,
	// which the next Open rebuilds from it.
	src, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	sc := src.Scanner()
	for sc.Next() {
		_, p := sc.Chunk()
		payloads = append(payloads, append([]byte(nil), p...))
	}
	opt := src.Options()
	src.Close()
	if sc.Err() != nil || len(payloads) != 3 {
		t.Fatalf("scan: %v, %d chunks", sc.Err(), len(payloads))
	}
	for _, name := range []string{dataFile, metaDir, textDir} {
		if err := os.RemoveAll(filepath.Join(dir, StoreName(0), name)); err != nil {
			t.Fatal(err)
		}
	}
	dst, err := chunk.Create(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		if _, err := dst.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if _, frames := chunkFrames(t, path); len(frames) != 3 || frames[0] != 1 || frames[1] != 1 || frames[2] != 1 {
		t.Fatalf("rewritten chunks are %v frames, want one each", frames)
	}
	db := openTestDB(t, dir, testOptions())
	defer db.Close()
	checkAllSpans(t, db, spans)
}

// TestDamagedFrame: a frame of a chunk damaged under a correct CRC-32 (so
// only zstd can tell) fails the read of a span in it as a damaged chunk:
// the get warns naming the store and the chunk's offset, the damage log's
// error names the frame and its offset in the stored bytes; a span in
// another frame of the chunk read before still read whole.
func TestDamagedFrame(t *testing.T) {
	dir := t.TempDir()
	spans, path := framesTestStore(t, dir)
	offs, _ := chunkFrames(t, path)
	off := offs[1]
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stored := raw[off+chunk.ChunkHeaderSize : offs[2]]
	stored[len(stored)-40] ^= 0x33 // inside the last frame's last block
	binary.BigEndian.PutUint32(raw[off+12:], crc32.ChecksumIEEE(stored))
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// The second request is the second chunk: its first span is in the
	// chunk's second frame, its last in the damaged last frame.
	inChunk := spans[500:1000]
	db := openTestDB(t, dir, testOptions())
	defer db.Close()
	first, last := inChunk[0], inChunk[len(inChunk)-1]
	if _, err := db.GetSpan(context.Background(), first.TraceID, first.SpanID); err != nil {
		t.Fatalf("span in an intact frame of the chunk: %v", err)
	}
	_, warns, err := db.GetSpanWithWarnings(context.Background(), last.TraceID, last.SpanID)
	if err != nil || len(warns) != 1 || warns[0].Store != StoreName(0) || warns[0].Offset != off {
		t.Fatalf("span in the damaged frame: %v, warnings %+v; want one naming store %s offset %d", err, warns, StoreName(0), off)
	}
	if !strings.Contains(warns[0].Error, "zstd: frame") || !strings.Contains(warns[0].Error, "at stored byte") {
		t.Fatalf("warning %q does not name the frame and its offset", warns[0].Error)
	}
	if n := db.DamagedChunks(); n != 1 {
		t.Fatalf("DamagedChunks = %d, want 1", n)
	}
}

// TestKnownLayoutReads: of a store written before LZ4 lead frames, a
// chunk read before, whose view left the chunk cache, is read again with
// its kept layout (chunk.ReadFramesKnown): every
// span still reads whole. Bytes damaged since are found when a read uses
// them: a span in a damaged frame warns naming the store and chunk (its
// content checksum), one in an intact frame still reads. A chunk damaged
// before its first read is read whole, and its CRC-32 mismatch fails any
// span of it, as before.
func TestKnownLayoutReads(t *testing.T) {
	dir := t.TempDir()
	spans, path := framesTestStoreZstdLead(t, dir)
	offs, _ := chunkFrames(t, path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ends := append(offs[1:], st.Size()) // a sealed file: no zero tail
	db := openTestDB(t, dir, testOptions())
	defer db.Close()
	db.cache = newChunkCache(1) // every chunk read leaves the chunk cache
	// The first and second chunks are read (and their layouts kept): the
	// spans of the traces that lie in them only.
	lastChunk := map[trace.TraceID]int{}
	for i, sp := range spans {
		lastChunk[sp.TraceID] = i / 500
	}
	var early []*trace.Span
	for _, sp := range spans[:1000] {
		if lastChunk[sp.TraceID] < 2 {
			early = append(early, sp)
		}
	}
	checkAllSpans(t, db, early)
	for _, off := range offs[:2] {
		if _, ok := db.layouts.get(db.stores[0].key(), off); !ok {
			t.Fatalf("no layout kept for the chunk at %d", off)
		}
	}
	if _, ok := db.layouts.get(db.stores[0].key(), offs[2]); ok {
		t.Fatalf("a layout kept for the chunk at %d, never read", offs[2])
	}
	checkAllSpans(t, db, early) // through the layouts
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Inside the last frame's last block of the second and third chunks.
	for _, k := range []int{1, 2} {
		at := ends[k] - 40
		if _, err := w.WriteAt([]byte{raw[at] ^ 0x33}, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	second := early[len(early)/2:]
	first, last := second[0], second[len(second)-1]
	if first.TraceID == last.TraceID {
		t.Fatal("the test needs the two spans in two traces")
	}
	if _, err := db.GetSpan(context.Background(), first.TraceID, first.SpanID); err != nil {
		t.Fatalf("span in an intact frame of a chunk read before: %v", err)
	}
	_, warns, err := db.GetSpanWithWarnings(context.Background(), last.TraceID, last.SpanID)
	if err != nil || len(warns) != 1 || warns[0].Store != StoreName(0) || warns[0].Offset != offs[1] {
		t.Fatalf("span in the frame damaged since: %v, warnings %+v; want one naming store %s offset %d", err, warns, StoreName(0), offs[1])
	}
	if !strings.Contains(warns[0].Error, "zstd: frame") {
		t.Fatalf("warning %q does not name the frame", warns[0].Error)
	}
	var third *trace.Span // of a trace only in the third chunk
	firstChunk := map[trace.TraceID]int{}
	for i := len(spans) - 1; i >= 0; i-- {
		firstChunk[spans[i].TraceID] = i / 500
	}
	for _, sp := range spans[1000:] {
		if firstChunk[sp.TraceID] == 2 {
			third = sp
			break
		}
	}
	_, warns, err = db.GetSpanWithWarnings(context.Background(), third.TraceID, third.SpanID)
	if err != nil || len(warns) != 1 || warns[0].Offset != offs[2] || !strings.Contains(warns[0].Error, "checksum") {
		t.Fatalf("span of a chunk damaged before its first read: %v, warnings %+v; want its checksum mismatch at %d", err, warns, offs[2])
	}
	if n := db.DamagedChunks(); n != 2 {
		t.Fatalf("DamagedChunks = %d, want 2", n)
	}
}

// TestDamagedStringTable: a chunk's first frame holds its string table
// with the literals stored raw (an LZ4 block; before LZ4 lead frames, a
// zstd frame without entropy coding), so a string of a span lies in the
// stored bytes as it is. One letter of it changed (a valid UTF-8 string
// still, under a recomputed CRC-32 so only the frame's own checksum can
// tell) fails every span of the chunk as damaged, naming the store, the
// chunk and frame 0: no read returns the changed string. The same change
// made after the chunk was read once (the CRC-32 left as it was) fails the
// next read too: of an LZ4 lead frame by its checksum again, of a chunk
// written before (its layout kept) by the chunk's CRC-32 when it is read
// whole again.
func TestDamagedStringTable(t *testing.T) {
	for _, tc := range []struct {
		format string
		after  bool
	}{{"lz4 lead", false}, {"lz4 lead", true}, {"zstd lead", false}, {"zstd lead", true}} {
		after := tc.after
		dir := t.TempDir()
		store := framesTestStore
		if tc.format == "zstd lead" {
			store = framesTestStoreZstdLead
		}
		spans, path := store(t, dir)
		offs, _ := chunkFrames(t, path)
		off := offs[1]
		inChunk := spans[500:1000] // the second request is the second chunk
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		stored := raw[off+chunk.ChunkHeaderSize : offs[2]]
		// A span whose user.id appears in the stored bytes (in the first
		// frame: it is the only one holding strings).
		var victim *trace.Span
		at := -1
		for _, sp := range inChunk {
			v, ok := sp.Attrs.Get("user.id")
			if !ok || len(v.Str) < 6 {
				continue
			}
			if i := bytes.Index(stored, []byte(v.Str)); i >= 0 && bytes.Count(stored, []byte(v.Str)) == 1 {
				victim, at = sp, i+len(v.Str)-1
				break
			}
		}
		if victim == nil {
			t.Fatal("no span's user.id lies in the chunk's stored bytes as it is")
		}
		db := openTestDB(t, dir, testOptions())
		db.cache = newChunkCache(1)
		if after {
			if _, err := db.GetSpan(context.Background(), victim.TraceID, victim.SpanID); err != nil {
				t.Fatal(err)
			}
			if _, ok := db.layouts.get(db.stores[0].key(), off); ok != (tc.format == "zstd lead") {
				t.Fatalf("%s: layout kept for the chunk read: %v", tc.format, ok)
			}
			if _, err := db.GetSpan(context.Background(), spans[0].TraceID, spans[0].SpanID); err != nil {
				t.Fatal(err) // another chunk: the victim's view leaves the cache
			}
		}
		b := stored[at]
		stored[at] = 'a' + (b-'a'+1)%26
		if b < 'a' || b > 'z' {
			stored[at] = 'x'
		}
		if !after {
			binary.BigEndian.PutUint32(raw[off+12:], crc32.ChecksumIEEE(stored))
		}
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteAt(raw[off:offs[2]], off); err != nil {
			t.Fatal(err)
		}
		w.Close()
		want := "frame 0 at stored byte 0 (payload bytes 0 to "
		switch {
		case tc.format == "lz4 lead":
			want = "frame 0 at stored byte 0: LZ4 lead frame: CRC-32"
		case after:
			want = "checksum" // read whole again: its CRC-32 no longer matches
		}
		for _, sp := range []*trace.Span{victim, inChunk[len(inChunk)-1]} {
			got, warns, err := db.GetSpanWithWarnings(context.Background(), sp.TraceID, sp.SpanID)
			if err != nil || got != nil || len(warns) != 1 || warns[0].Store != StoreName(0) || warns[0].Offset != off || !strings.Contains(warns[0].Error, want) {
				t.Fatalf("%s, after=%v: span %s of the damaged chunk: %v, %v, warnings %+v; want one naming store %s offset %d and %q",
					tc.format, after, sp.SpanID, got != nil, err, warns, StoreName(0), off, want)
			}
		}
		if n := db.DamagedChunks(); n != 1 {
			t.Fatalf("%s, after=%v: DamagedChunks = %d, want 1", tc.format, after, n)
		}
		_, warns, _ := db.GetSpanWithWarnings(context.Background(), victim.TraceID, victim.SpanID)
		t.Logf("%s, after=%v: %s", tc.format, after, warns[0].Error)
		db.Close()
	}
}

// TestWrittenChunkLayouts: the chunks the DB appends as several frames
// start with an LZ4 lead frame listing the others, so no layout is kept
// for them (chunk.EncodedChunk.Layout is nil) and even their first read
// reads only the frames it decodes; every span reads back whole. A frame
// damaged on disk after the write is found by its content checksum when a
// read uses it (a warning naming the store and chunk), and a span in an
// intact frame of the same chunk still reads.
func TestWrittenChunkLayouts(t *testing.T) {
	dir := t.TempDir()
	reqs, spans, _ := benchRequests(5, 1500, 500)
	reqs, spans = reqs[:3], spans[:1500]
	o := testOptions()
	o.ChunkTargetSize = 1 << 20
	o.MaxStoreSize = 64 << 20
	db := openTestDB(t, dir, o)
	defer db.Close()
	for _, r := range reqs {
		if err := db.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, StoreName(0), dataFile)
	f, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The store is open: its data file ends in preallocated zeros after
	// the three chunks (one per request).
	var offs []int64
	for off := int64(chunk.HeaderSize); len(offs) < 3; {
		fr, next, err := f.ReadFrames(off)
		if err != nil {
			t.Fatalf("chunk %d at %d: %v", len(offs), off, err)
		}
		l, ok := db.layouts.get(db.stores[0].key(), off)
		if ok || fr.Frames() < 4 || fr.Layout() != nil {
			t.Fatalf("chunk at %d of %d frames: layout kept %v (%+v), read %+v; want none", off, fr.Frames(), ok, l, fr.Layout())
		}
		offs = append(offs, off)
		off = next
	}
	db.cache = newChunkCache(1) // every chunk read leaves the chunk cache
	checkAllSpans(t, db, spans)

	// Inside the last frame's last block of the second chunk.
	at := offs[2] - 40
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := w.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte{b[0] ^ 0x33}, at); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	inChunk := func(k int) []*trace.Span { // spans of traces wholly in chunk k
		var out []*trace.Span
		where := map[trace.TraceID]map[int]bool{}
		for i, sp := range spans {
			if where[sp.TraceID] == nil {
				where[sp.TraceID] = map[int]bool{}
			}
			where[sp.TraceID][i/500] = true
		}
		for _, sp := range spans[k*500 : (k+1)*500] {
			if len(where[sp.TraceID]) == 1 {
				out = append(out, sp)
			}
		}
		return out
	}
	second := inChunk(1)
	first, last := second[0], second[len(second)-1]
	if _, err := db.GetSpan(context.Background(), first.TraceID, first.SpanID); err != nil {
		t.Fatalf("span in an intact frame: %v", err)
	}
	_, warns, err := db.GetSpanWithWarnings(context.Background(), last.TraceID, last.SpanID)
	if err != nil || len(warns) != 1 || warns[0].Store != StoreName(0) || warns[0].Offset != offs[1] || !strings.Contains(warns[0].Error, "zstd: frame") {
		t.Fatalf("span in the frame damaged after the write: %v, warnings %+v; want one naming store %s, offset %d and the frame", err, warns, StoreName(0), offs[1])
	}
}
