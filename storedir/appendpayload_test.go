package storedir

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// storedChunks returns the stored bytes (header included) and the payload
// of each chunk of a closed store's data file, in file order.
func storedChunks(t *testing.T, dir string) (raw, payloads [][]byte) {
	t.Helper()
	path := filepath.Join(dir, StoreName(0), dataFile)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off := int64(chunk.HeaderSize); off < f.Size(); {
		p, next, err := f.ReadChunk(off)
		if err != nil {
			t.Fatalf("chunk at %d: %v", off, err)
		}
		raw, payloads = append(raw, file[off:next]), append(payloads, bytes.Clone(p))
		off = next
	}
	return raw, payloads
}

// widened rewrites payload (as ChunkEncoder wrote it, with a span index)
// with its span list head in the 9-byte form instead of the shortest: a
// payload every reader decodes (the span index counts from the list's
// first span) and that is storable, but not the encoder's bytes.
func widened(t *testing.T, spans []*trace.Span) []byte {
	t.Helper()
	var enc trace.ChunkEncoder
	p, err := enc.Encode(nil, spans)
	if err != nil {
		t.Fatal(err)
	}
	cuts := enc.FrameCuts(nil, 1)
	if len(cuts) == 0 {
		t.Fatal("payload without a span index")
	}
	bodyAt := cuts[0]
	head := 3 // h(4, n) for 256 <= n < 65536
	if n := len(spans); n < 24 {
		head = 1
	} else if n < 256 {
		head = 2
	}
	out := append([]byte(nil), p[:bodyAt-head]...)
	out = append(out, 0x9b)
	out = binary.BigEndian.AppendUint64(out, uint64(len(spans)))
	return append(out, p[bodyAt:]...)
}

// decodeBody decodes a request body as the server does.
func decodeBody(t *testing.T, body []byte, lim trace.Limits) ([]*trace.Span, *trace.PayloadLayout) {
	t.Helper()
	spans, layout, err := trace.DecodeChunkLayout(body, lim)
	if err != nil {
		t.Fatal(err)
	}
	return spans, layout
}

// TestAppendPayloadStoresTheBody: a request body that is storable and one
// chunk's worth becomes the chunk as it was sent. For bodies the encoder
// wrote, the data file is byte for byte the one Append writes for the same
// spans (the same payload, cut into the same zstd frames); a body that is
// not the encoder's bytes (a longer head) is stored as sent all the same,
// and every span of every chunk reads back, before and after a reopen.
func TestAppendPayloadStoresTheBody(t *testing.T) {
	reqs, spans, _ := benchRequests(5, 1500, 500)
	reqs, spans = reqs[:3], spans[:1500]
	var enc trace.ChunkEncoder
	bodies := make([][]byte, len(reqs))
	for i, r := range reqs {
		var err error
		if bodies[i], err = enc.Encode(nil, r); err != nil {
			t.Fatal(err)
		}
	}
	wide := widened(t, reqs[1])
	if bytes.Equal(wide, bodies[1]) {
		t.Fatal("widened payload equals the encoder's")
	}
	o := testOptions()
	o.ChunkTargetSize = 1 << 20
	if o.Chunk.Compression != chunk.Zstd {
		t.Fatalf("default compression %v, the test needs zstd", o.Chunk.Compression)
	}
	ctx := context.Background()
	asSentDir, encodedDir := t.TempDir(), t.TempDir()
	asSent, encoded := openTestDB(t, asSentDir, o), openTestDB(t, encodedDir, o)
	for i, body := range [][]byte{bodies[0], wide, bodies[2]} {
		if len(body) <= asSent.groupableSize() || len(body) <= payloadFramedMin {
			t.Fatalf("body %d: %d bytes, too small for the test", i, len(body))
		}
		got, layout := decodeBody(t, body, trace.Limits{})
		if err := asSent.AppendPayload(ctx, got, body, layout); err != nil {
			t.Fatal(err)
		}
		if err := encoded.Append(ctx, reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkAllSpans(t, asSent, spans)
	for _, db := range []*DB{asSent, encoded} {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rawAsSent, payloadsAsSent := storedChunks(t, asSentDir)
	rawEncoded, payloadsEncoded := storedChunks(t, encodedDir)
	if len(rawAsSent) != 3 || len(rawEncoded) != 3 {
		t.Fatalf("%d and %d chunks, want 3 each", len(rawAsSent), len(rawEncoded))
	}
	for _, i := range []int{0, 2} {
		if !bytes.Equal(rawAsSent[i], rawEncoded[i]) {
			t.Errorf("chunk %d: stored as sent (%d bytes) differs from the encoded one (%d bytes)", i, len(rawAsSent[i]), len(rawEncoded[i]))
		}
		if !bytes.Equal(payloadsAsSent[i], bodies[i]) {
			t.Errorf("chunk %d: payload is not the body", i)
		}
	}
	if !bytes.Equal(payloadsAsSent[1], wide) {
		t.Errorf("chunk 1: payload (%d bytes) is not the widened body as sent (%d bytes)", len(payloadsAsSent[1]), len(wide))
	}
	if !bytes.Equal(payloadsEncoded[1], bodies[1]) {
		t.Errorf("chunk 1 of Append: payload is not the encoder's")
	}
	_, frames := chunkFrames(t, filepath.Join(asSentDir, StoreName(0), dataFile))
	_, framesEncoded := chunkFrames(t, filepath.Join(encodedDir, StoreName(0), dataFile))
	if frames[1] < 2 || frames[1] != framesEncoded[1] {
		t.Errorf("widened chunk in %d zstd frames, the encoded one in %d", frames[1], framesEncoded[1])
	}
	db := openTestDB(t, asSentDir, o)
	defer db.Close()
	checkAllSpans(t, db, spans)
}

// TestAppendPayloadFallsBackToEncoding: a body is not stored as sent when
// its spans are not all stored as they are in it, or it is more than a
// chunk, or its layout is not storable; the chunks are then the
// encoder's for the spans stored, exactly as Append writes them, and read
// back. Each case sends a widened body (storable, not the encoder's bytes)
// so that the stored payload tells which way it went.
func TestAppendPayloadFallsBackToEncoding(t *testing.T) {
	reqs, _, _ := benchRequests(6, 500, 500)
	full := reqs[0][:500]
	ctx := context.Background()
	cases := []struct {
		name string
		// prepare runs before the request (on a fresh store) and
		// returns the spans it sends; want is what the request's chunks
		// hold.
		prepare  func(t *testing.T, db *DB) (send []*trace.Span, want [][]*trace.Span)
		lim      trace.Limits
		target   int
		before   int  // chunks prepare writes
		noLayout bool // AppendPayload gets a nil layout
	}{
		{name: "half of the spans stored already", before: 1, prepare: func(t *testing.T, db *DB) ([]*trace.Span, [][]*trace.Span) {
			if err := db.Append(ctx, clones(full[:250])); err != nil {
				t.Fatal(err)
			}
			return full, [][]*trace.Span{full[250:]}
		}},
		{name: "a span repeated later in the request", prepare: func(t *testing.T, db *DB) ([]*trace.Span, [][]*trace.Span) {
			send := append(clones(full[:499]), clones(full[:1])...)
			return send, [][]*trace.Span{send[1:]}
		}},
		{name: "a span without a span id", prepare: func(t *testing.T, db *DB) ([]*trace.Span, [][]*trace.Span) {
			send := clones(full)
			send[7].SpanID = 0
			return send, nil // the id is random: want is what was sent, with it
		}},
		{name: "more than a chunk", target: 96 << 10, prepare: func(t *testing.T, db *DB) ([]*trace.Span, [][]*trace.Span) {
			return full, nil // split as the encoder splits: want is computed below
		}},
		{name: "no layout", noLayout: true, prepare: func(t *testing.T, db *DB) ([]*trace.Span, [][]*trace.Span) {
			return full, [][]*trace.Span{full}
		}},
		{name: "decoded under limits beyond the defaults", lim: trace.Limits{MaxStrings: 1 << 23},
			prepare: func(t *testing.T, db *DB) ([]*trace.Span, [][]*trace.Span) {
				return full, [][]*trace.Span{full}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions()
			o.ChunkTargetSize = 1 << 20
			if c.target != 0 {
				o.ChunkTargetSize = c.target
			}
			dir := t.TempDir()
			db := openTestDB(t, dir, o)
			send, want := c.prepare(t, db)
			body := widened(t, send)
			got, layout := decodeBody(t, body, c.lim)
			if c.noLayout {
				layout = nil
			}
			if err := db.AppendPayload(ctx, got, body, layout); err != nil {
				t.Fatal(err)
			}
			if want == nil {
				if c.target != 0 {
					chunks, err := db.encode(got)
					if err != nil {
						t.Fatal(err)
					}
					for _, ch := range chunks {
						want = append(want, ch.spans)
					}
				} else {
					want = [][]*trace.Span{got}
				}
			}
			if got[7].SpanID == 0 {
				t.Fatal("span without an id was not given one")
			}
			var stored []*trace.Span
			for _, w := range want {
				stored = append(stored, w...)
			}
			checkAllSpans(t, db, stored)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			_, payloads := storedChunks(t, dir)
			payloads = payloads[c.before:]
			if len(payloads) != len(want) {
				t.Fatalf("%d chunks written, want %d", len(payloads), len(want))
			}
			for i, w := range want {
				p, err := trace.EncodeChunk(nil, w)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Equal(payloads[i], body) {
					t.Fatalf("chunk %d: the body was stored as sent", i)
				}
				if !bytes.Equal(payloads[i], p) {
					t.Fatalf("chunk %d: payload (%d bytes) is not the encoder's for the spans stored (%d bytes)", i, len(payloads[i]), len(p))
				}
			}
		})
	}
}

// TestAppendPayloadSmallBodies: a storable body small enough to be grouped
// is not encoded again. Written alone, it is the chunk as sent (a widened
// body, not the encoder's bytes, is stored widened). Grouped with another
// small request, the committer encodes both requests' spans into one
// shared chunk, the encoder's payload for them, as for Append's small
// requests. Every span reads back, before and after a reopen.
func TestAppendPayloadSmallBodies(t *testing.T) {
	reqs, _, _ := benchRequests(7, 60, 20)
	ctx := context.Background()
	o := testOptions()
	o.ChunkTargetSize = 4 << 20 // small requests: up to 256 KiB
	o.Sync = SyncBatch
	o.BatchMaxDelay = 200 * time.Millisecond // the two grouped requests join one group
	dir := t.TempDir()
	db := openTestDB(t, dir, o)

	alone := widened(t, reqs[0])
	if len(alone) > db.groupableSize() {
		t.Fatalf("body of %d bytes is not small (groupable up to %d)", len(alone), db.groupableSize())
	}
	got, layout := decodeBody(t, alone, trace.Limits{})
	if err := db.AppendPayload(ctx, got, alone, layout); err != nil {
		t.Fatal(err)
	}

	bodies := [][]byte{widened(t, reqs[1]), widened(t, reqs[2])}
	decoded := make([][]*trace.Span, 2)
	start := make(chan struct{})
	errs := make(chan error, 2)
	for i, body := range bodies {
		got, layout := decodeBody(t, body, trace.Limits{})
		decoded[i] = got
		go func() {
			<-start
			errs <- db.AppendPayload(ctx, got, body, layout)
		}()
	}
	close(start)
	for range bodies {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	all := append(append(append([]*trace.Span(nil), reqs[0]...), reqs[1]...), reqs[2]...)
	checkAllSpans(t, db, all)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, payloads := storedChunks(t, dir)
	if len(payloads) != 2 {
		t.Fatalf("%d chunks written, want 2 (the lone request's, the group's)", len(payloads))
	}
	if !bytes.Equal(payloads[0], alone) {
		t.Errorf("lone small request: payload (%d bytes) is not its body as sent (%d bytes)", len(payloads[0]), len(alone))
	}
	var want [][]byte
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		p, err := trace.EncodeChunk(nil, append(append([]*trace.Span(nil), decoded[order[0]]...), decoded[order[1]]...))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	if !bytes.Equal(payloads[1], want[0]) && !bytes.Equal(payloads[1], want[1]) {
		t.Errorf("grouped small requests: payload (%d bytes) is not the encoder's for their spans (%d bytes)", len(payloads[1]), len(want[0]))
	}
	db = openTestDB(t, dir, o)
	defer db.Close()
	checkAllSpans(t, db, all)
}

// clones returns deep enough copies of spans for a request (Append may
// give a span without one an id in place).
func clones(spans []*trace.Span) []*trace.Span {
	out := make([]*trace.Span, len(spans))
	for i, sp := range spans {
		c := *sp
		out[i] = &c
	}
	return out
}
