package atf

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// sampleThreads returns the index and detail images of every sample thread
// (detail nil when absent), keyed by path.
func sampleThreads(t testing.TB) map[string][2][]byte {
	needSamples(t)
	out := map[string][2][]byte{}
	for _, sess := range []string{cleanSession, crashedSession} {
		dirs, err := filepath.Glob(filepath.Join(sess, "thread_*"))
		if err != nil || len(dirs) == 0 {
			t.Fatalf("no thread dirs in %s: %v", sess, err)
		}
		for _, d := range dirs {
			idx, err := os.ReadFile(filepath.Join(d, IndexFileName))
			if err != nil {
				t.Fatal(err)
			}
			det, err := os.ReadFile(filepath.Join(d, DetailFileName))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			out[d] = [2][]byte{idx, det}
		}
	}
	return out
}

// decodeChecked decodes a thread and checks the invariants that hold for
// any input: no panic (the caller is the fuzzer), every span valid, and the
// summary consistent with what was emitted.
func decodeChecked(t testing.TB, name string, index, detail, manifest []byte) (*ingest.Summary, error) {
	var traces, records int64
	sum, err := DecodeThread(context.Background(), ThreadInput{Name: name, Index: index, Detail: detail, Manifest: manifest},
		ingest.Options{KeepGoing: true}, func(s *trace.Span) error {
			if err := s.Validate(); err != nil {
				t.Fatalf("invalid span: %v", err)
			}
			if s.TraceID.IsZero() || s.SpanID == 0 || s.Recs != s.Root.CountRecords() {
				t.Fatalf("span identity/summary broken: %+v", s)
			}
			traces++
			records += s.Recs
			return nil
		})
	if sum == nil || sum.Warnings == nil {
		t.Fatalf("nil summary or warnings")
	}
	if sum.Traces != traces || sum.Records != records || sum.Traces > sum.Events || sum.Records > sum.Events {
		t.Fatalf("summary %+v disagrees with %d traces / %d records emitted", sum, traces, records)
	}
	if err != nil {
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("error is not a *FormatError: %v", err)
		}
	}
	return sum, err
}

// TestSampleTruncationsAndBitFlips: truncations at 100 random offsets and
// every single-bit flip of every sample file decode without panic, to an
// error or a partial result.
func TestSampleTruncationsAndBitFlips(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const name = "session_20250101_120000/pid_1/thread_0/index.atf"
	for path, files := range sampleThreads(t) {
		idx, det := files[0], files[1]
		var flips, errs int
		for i := range 100 {
			n := r.IntN(len(idx) + 1)
			if i == 0 {
				n = len(idx) - 1
			}
			decodeChecked(t, name, idx[:n], det, nil)
			if det != nil {
				decodeChecked(t, name, idx, det[:r.IntN(len(det)+1)], nil)
			}
		}
		for bit := range len(idx) * 8 {
			b := append([]byte{}, idx...)
			b[bit/8] ^= 1 << (bit % 8)
			if _, err := decodeChecked(t, name, b, det, nil); err != nil {
				errs++
			}
			flips++
		}
		for bit := range len(det) * 8 {
			b := append([]byte{}, det...)
			b[bit/8] ^= 1 << (bit % 8)
			decodeChecked(t, name, idx, b, nil)
			flips++
		}
		// Flips of the magic, endian, version and event-size bytes are
		// the ones that must be rejected: 4*8 + 8 + 8 + 32 bits.
		if errs < 80 {
			t.Errorf("%s: only %d of %d index bit flips rejected", path, errs, flips)
		}
	}
}

func fuzzSeeds(f *testing.F) [][2][]byte {
	var seeds [][2][]byte
	if _, err := os.Stat(samples); err == nil {
		for _, files := range sampleThreads(f) {
			seeds = append(seeds, files)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for shape := range 3 {
		th := genThreadModel(r, 0, 1000, 0.5)
		th.shape = fileShape(shape)
		th.write(r, shape == 0)
		seeds = append(seeds, [2][]byte{th.index, th.detail})
	}
	return seeds
}

// FuzzDecode decodes arbitrary bytes as a lone index.atf.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s[0])
	}
	f.Add([]byte("ATI2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeChecked(t, "session_20250101_120000/pid_1/thread_0/index.atf", data, nil, nil)
	})
}

// FuzzDecodeThread decodes an index image with a detail image (links,
// payloads, lane-copy merging) and a manifest.
func FuzzDecodeThread(f *testing.F) {
	manifest := []byte(`{"modules":[{"module_id":28,"path":"/a"}],"symbols":[{"function_id":"0x0000001c00000001","name":"main"},{"function_id":"zz","module_id":28,"symbol_index":2,"name":"parse"}]}`)
	for _, s := range fuzzSeeds(f) {
		if s[1] != nil {
			f.Add(s[0], s[1], manifest)
		}
	}
	f.Fuzz(func(t *testing.T, index, detail, manifest []byte) {
		decodeChecked(t, "thread_3/index.atf", index, detail, manifest)
	})
}

// FuzzParseDetail walks arbitrary bytes as a detail file and reads every
// record and payload.
func FuzzParseDetail(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		if s[1] != nil {
			f.Add(s[1])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDetail("detail.atf", data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a *FormatError: %v", err)
			}
			return
		}
		var total int64
		for i := range d.Len() {
			r, ok := d.Record(uint32(i))
			if !ok || r.Length < DetailRecordHeaderSize {
				t.Fatalf("record %d: %+v", i, r)
			}
			total += int64(r.Length)
			DecodePayload(r.Payload)
		}
		if int64(d.Header.EventsOffset)+total > int64(len(data)) {
			t.Fatalf("records exceed the file")
		}
	})
}
