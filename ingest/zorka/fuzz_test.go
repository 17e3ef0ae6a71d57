package zorka

import (
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// fuzzSession is the session the fuzz targets and robustness tests submit
// to: it holds the symbols of every sample and of the hand-written tests
// (later definitions overwrite earlier ones with the same id).
const fuzzSession = "fuzz"

var sampleAgds = []string{"zorka-tdb-sampled-tomcat-agd.cbor", "zico2-traces1-0-agd.cbor", "traces1-0-agd.cbor"}

func loadedSessions(t testing.TB) *Sessions {
	t.Helper()
	s := NewSessions(Options{})
	for i, name := range sampleAgds {
		if err := s.SubmitAgentData(fuzzSession, i == 0, readSample(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SubmitAgentData(fuzzSession, false, hx(t, testAgd190)); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkOutcome asserts what every decode must satisfy: either a
// DecodeError, or spans that pass Validate and assemble.
func checkOutcome(t *testing.T, spans []*trace.Span, err error) {
	t.Helper()
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("error is not a DecodeError: %v", err)
		}
		if de.Offset < 0 {
			t.Fatalf("negative offset: %v", err)
		}
		if spans != nil {
			t.Fatal("spans returned with an error")
		}
		return
	}
	for _, sp := range spans {
		if err := sp.Validate(); err != nil {
			t.Fatalf("invalid span: %v", err)
		}
		if sp.SpanID == 0 || sp.Source != trace.SourceZorka {
			t.Fatalf("span id %d source %q", sp.SpanID, sp.Source)
		}
		if _, err := trace.AssembleChunks([]*trace.Span{sp}); err != nil && sp.ChunkNum == 0 {
			t.Fatalf("assemble: %v", err)
		}
	}
}

// generatedTraceSeeds returns a few encoder-made trace bodies and the
// agent data they need.
func generatedTraceSeeds(n int) (agd []byte, bodies [][]byte) {
	g := newEncGen(99)
	for i := 0; i < n; i++ {
		tops := g.randTrace(12)
		g.encodeTrace(tops)
		bodies = append(bodies, append([]byte(nil), g.trc...))
	}
	return g.agd, bodies
}

var sampleTrcs = []string{"traces1-1-trc.cbor", "zorka-tdb-sampled-tomcat-trc.cbor", "zico2-traces1-1-trc.cbor"}

// FuzzTraceData decodes arbitrary trace bodies, split into two submissions
// of one streamed trace at a fuzzed offset.
func FuzzTraceData(f *testing.F) {
	for _, name := range sampleTrcs {
		f.Add(readSample(f, name), uint16(0))
		f.Add(readSample(f, name), uint16(40))
	}
	for _, body := range []string{
		recStart + prolog1 + begin1 + "c9 a1 c604 c606" + recStart + prolog1LE + epilog1LE + epilog1,
		recStart + prolog1 + begin1 + "d822 85 01 c605 60 00 81 84 01 02 03 05 d823 01 ce a1 0b 08" + epilog1,
		"d821 83 1b 0000016a79b81112 03 01 c9 a1 c604 6468747470 cf 08",
		"c39f 19 1000 01 c5 83 1b 0000016a79b81110 06 07 c6 82 04 fa3f800000 c4 83 19 1500 09 19 1000 ff",
	} {
		f.Add(hx(f, body), uint16(13))
	}
	genAgd, genBodies := generatedTraceSeeds(6)
	for _, body := range genBodies {
		f.Add(body, uint16(len(body)/2))
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		s := loadedSessions(t)
		if err := s.SubmitAgentData(fuzzSession, false, genAgd); err != nil {
			t.Fatal(err)
		}
		c := int(cut) % (len(body) + 1)
		spans, err := s.SubmitTraceData(fuzzSession, false, testTraceID, body[:c])
		checkOutcome(t, spans, err)
		spans, err = s.SubmitTraceData(fuzzSession, false, testTraceID, body[c:])
		checkOutcome(t, spans, err)
	})
}

// FuzzAgentData decodes arbitrary agent data, then a sample trace against
// whatever it defined.
func FuzzAgentData(f *testing.F) {
	for _, name := range sampleAgds {
		f.Add(readSample(f, name))
	}
	f.Add(hx(f, testAgd190))
	f.Add(hx(f, "c1 82 07 63 414243 c2 84 01 07 02 03"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := NewSessions(Options{MaxSymbols: 1000, MaxSymbolBytes: 1 << 16})
		err := s.SubmitAgentData(fuzzSession, true, body)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error is not a DecodeError: %v", err)
			}
		}
		for _, name := range sampleTrcs {
			spans, err := s.SubmitTraceData(fuzzSession, false, testTraceID, readSample(t, name))
			checkOutcome(t, spans, err)
		}
	})
}

// FuzzDecodeDump replays arbitrary request dumps.
func FuzzDecodeDump(f *testing.F) {
	f.Add(readSample(f, "zico-testdata-traces1.txt"), false)
	f.Add(readSample(f, "zico-2-testdata-traces1.txt"), true)
	f.Add([]byte(`{"uri":"/agent/submit/trc","headers":{"X-Zorka-Session-ID":"a"},"body":"yJ8="}`), true)
	f.Fuzz(func(t *testing.T, data []byte, keepGoing bool) {
		sum, err := Decode(context.Background(), "fuzz.txt", data, ingest.Options{KeepGoing: keepGoing}, func(sp *trace.Span) error {
			if err := sp.Validate(); err != nil {
				t.Fatalf("invalid span: %v", err)
			}
			return nil
		})
		if sum == nil || sum.Warnings == nil {
			t.Fatalf("summary %+v (err %v)", sum, err)
		}
	})
}

// Truncations at 100 random offsets and every single-bit flip of every
// sample never panic: each decode ends in a DecodeError or valid spans.
func TestSamplesTruncatedAndBitFlipped(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	mutants := func(b []byte, fn func([]byte)) {
		for i := 0; i < 100; i++ {
			fn(b[:rng.Intn(len(b)+1)])
		}
		for i := range b {
			for bit := 0; bit < 8; bit++ {
				m := append([]byte(nil), b...)
				m[i] ^= 1 << bit
				fn(m)
			}
		}
	}
	decoded, failed := 0, 0
	for _, name := range sampleTrcs {
		mutants(readSample(t, name), func(body []byte) {
			s := loadedSessions(t)
			spans, err := s.SubmitTraceData(fuzzSession, false, testTraceID, body)
			checkOutcome(t, spans, err)
			if err != nil {
				failed++
			} else {
				decoded++
			}
		})
	}
	for _, name := range sampleAgds {
		mutants(readSample(t, name), func(body []byte) {
			s := NewSessions(Options{})
			if err := s.SubmitAgentData(fuzzSession, true, body); err != nil {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("%s: %v", name, err)
				}
				failed++
				return
			}
			decoded++
			for _, trc := range sampleTrcs {
				spans, err := s.SubmitTraceData(fuzzSession, false, testTraceID, readSample(t, trc))
				checkOutcome(t, spans, err)
			}
		})
	}
	for _, name := range []string{"zico-testdata-traces1.txt", "zico-2-testdata-traces1.txt"} {
		mutants(readSample(t, name), func(data []byte) {
			for _, keep := range []bool{false, true} {
				sum, _ := Decode(context.Background(), name, data, ingest.Options{KeepGoing: keep}, func(sp *trace.Span) error {
					return sp.Validate()
				})
				if sum == nil || sum.Warnings == nil {
					t.Fatalf("%s: summary %+v", name, sum)
				}
			}
		})
	}
	t.Logf("mutated samples: %d decoded, %d rejected", decoded, failed)
	if decoded == 0 || failed == 0 {
		t.Fatal("mutations should both decode and fail")
	}
}
