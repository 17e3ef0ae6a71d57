package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

// FuzzStateValues feeds arbitrary bytes to every decoder of the migration
// state: they return errors, never panic, and what decodes re-encodes to
// the same bytes.
func FuzzStateValues(f *testing.F) {
	f.Add(seenValue{Hash: [16]byte{1, 2, 3}, Loc: pieceLoc{Store: 2, Offset: 4096, Index: 7}}.encode())
	f.Add(planEntry{StartNS: -5, Drop: true}.encode())
	f.Add(planEntry{StartNS: 1 << 60}.encode())
	ck, _ := json.Marshal(checkpoint{Store: 1, Offset: 16, RotatedFor: 0, Target: targetTip{Known: true, Store: 3, Size: 99}})
	f.Add(ck)
	p, _ := json.Marshal(params{Sources: []string{"/a"}, Stores: []sourceStore{{Dir: "/a/000000", Size: 100, Version: 1, Compression: "lz4"}}})
	f.Add(p)
	f.Add([]byte(`{"store":1}{"store":2}`))
	f.Add([]byte(`{"store":"x"}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02})
	f.Add(bytes.Repeat([]byte{0xff}, seenValueSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := decodeSeen(b); err == nil {
			if !bytes.Equal(v.encode(), b) {
				t.Fatalf("seen value %x re-encodes to %x", b, v.encode())
			}
		} else if !errors.Is(err, errCorruptState) {
			t.Fatalf("seen value error %v does not wrap errCorruptState", err)
		}
		if e, err := decodePlan(b); err == nil {
			if !bytes.Equal(e.encode(), b) {
				t.Fatalf("plan entry %x re-encodes to %x", b, e.encode())
			}
		} else if !errors.Is(err, errCorruptState) {
			t.Fatalf("plan entry error %v does not wrap errCorruptState", err)
		}
		var c checkpoint
		if err := decodeJSON(b, &c); err == nil {
			c.validate(4) // must not panic either way
		} else if !errors.Is(err, errCorruptState) {
			t.Fatalf("checkpoint error %v does not wrap errCorruptState", err)
		}
		var pr params
		decodeJSON(b, &pr)
		var rf reportFile
		decodeJSON(b, &rf)
	})
}

// fuzzDataFile returns a small valid data file of the given options.
func fuzzDataFile(tb testing.TB, opt chunk.Options, spans []*trace.Span, perChunk int) []byte {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "traces.zts")
	f, err := chunk.Create(path, opt)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < len(spans); i += perChunk {
		payload, err := trace.EncodeChunk(nil, spans[i:min(i+perChunk, len(spans))])
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := f.Append(payload); err != nil {
			tb.Fatal(err)
		}
	}
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzReadStore feeds arbitrary data files to the source reader: it never
// panics, and the chunks and bad regions it reports lie inside the file,
// in order, without overlapping.
func FuzzReadStore(f *testing.F) {
	spans := workload.Spans(31, 12)
	for _, opt := range []chunk.Options{lz4crc, {Compression: chunk.Zlib, Checksums: true}, {}} {
		good := fuzzDataFile(f, opt, spans, 4)
		f.Add(good)
		f.Add(good[:len(good)-3])
		flipped := bytes.Clone(good)
		flipped[len(flipped)/2] ^= 0x40
		f.Add(flipped)
	}
	f.Add([]byte("ZTS0"))
	f.Add([]byte("ZTS0\x00\x00\x00\x11\x00\x00\x00\x00\x00\x00\x00\x00ZCH0\x7f\xff\xff\xff\x7f\xff\xff\xff\x00\x00\x00\x00"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, dataFileName)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		st := sourceStore{Dir: dir, Size: int64(len(b)), Version: 1}
		end := int64(chunk.HeaderSize)
		err := readStore(context.Background(), st, chunk.HeaderSize, trace.DecodeChunk, trace.Limits{}, func(c sourceChunk) error {
			if c.Off < end || c.End <= c.Off || c.End > st.Size {
				t.Fatalf("chunk [%d, %d) after %d in a %d-byte file", c.Off, c.End, end, st.Size)
			}
			if c.Err != nil && c.Spans != nil {
				t.Fatalf("chunk at %d: spans and an error", c.Off)
			}
			end = c.End
			return nil
		}, func(br chunk.BadRegion) error {
			if br.Offset < chunk.HeaderSize || br.Length <= 0 || br.Offset+br.Length > st.Size {
				t.Fatalf("bad region %+v in a %d-byte file", br, st.Size)
			}
			return nil
		})
		if err != nil && len(b) >= chunk.HeaderSize {
			if _, herr := chunk.ParseHeader(b); herr == nil {
				t.Fatalf("valid header, yet: %v", err)
			}
		}
	})
}

// FuzzMigrateDataFile migrates a data directory whose one store holds
// arbitrary bytes: the migration either refuses (a bad header) or
// succeeds and verifies — damage costs chunks, never correctness. It is
// slow (each input is a whole migration); plain `go test` runs the seeds.
func FuzzMigrateDataFile(f *testing.F) {
	spans := workload.Spans(32, 30)
	good := fuzzDataFile(f, lz4crc, spans, 7)
	f.Add(good)
	torn := bytes.Clone(good[:len(good)-11])
	f.Add(torn)
	flipped := bytes.Clone(good)
	flipped[chunk.HeaderSize+chunk.ChunkHeaderSize+3] ^= 1
	f.Add(flipped)
	f.Add(fuzzDataFile(f, chunk.Options{}, spans, 30))
	f.Fuzz(func(t *testing.T, b []byte) {
		base := t.TempDir()
		src := filepath.Join(base, "src")
		os.MkdirAll(filepath.Join(src, "000000"), 0o750)
		if err := os.WriteFile(filepath.Join(src, "000000", dataFileName), b, 0o640); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), Options{Sources: []string{src}, Target: filepath.Join(base, "dst"), Compression: ptr(chunk.Zlib)})
		if err != nil {
			if errors.Is(err, ErrVerifyFailed) {
				t.Fatalf("verification failed: %v", rep.Verify.Problems)
			}
			if _, herr := chunk.ParseHeader(b); herr == nil {
				t.Fatalf("valid header, yet: %v", err)
			}
			return
		}
		if !rep.Verify.OK || rep.Verify.TargetPieces != rep.SpansWritten {
			t.Fatalf("report %+v", rep)
		}
	})
}
