package dial9

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// fuzzSeeds are small inputs covering every frame kind and field type.
func fuzzSeeds(f *testing.F) {
	small := readSample(f, "demo-2026-03-18-small.bin")
	f.Add(small[:4096])
	f.Add(rawSample(f, "demo-2026-05-15.bin")[:6000])
	f.Add(readSample(f, "legacy-tokiotrc-v9.bin")[:64])
	synth := syntheticTelemetry()
	f.Add(synth)
	f.Add(gzipBytes(synth))
	rng := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 4; i++ {
		data, _ := randomFile(rng)
		f.Add(data)
		f.Add(randomTelemetry(rng))
	}
	f.Add([]byte("TRC\x00\x01\x06\x80\x80\x04\x00\x00"))
	f.Add([]byte("TRC\x00\x01TRC\x00\x02\x05\x01\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte{})
}

// FuzzReader: arbitrary bytes never panic; the in-memory and streaming
// paths agree on every event and on where they stop.
func FuzzReader(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		type outcome struct {
			events int64
			offset int64
			err    string
		}
		run := func(r *Reader, err error) outcome {
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("header error %T %v", err, err)
				}
				return outcome{err: err.Error()}
			}
			var o outcome
			for {
				ev, err := r.Next()
				if err == io.EOF {
					return o
				}
				if err != nil {
					var de *DecodeError
					if !errors.As(err, &de) {
						t.Fatalf("error %T %v", err, err)
					}
					o.err, o.offset = err.Error(), de.Offset
					return o
				}
				if len(ev.Values) != len(ev.Schema.Fields) {
					t.Fatalf("%d values for %d fields", len(ev.Values), len(ev.Schema.Fields))
				}
				o.events++
			}
		}
		a := run(NewBytesReader(data))
		if len(data) <= 1<<16 {
			b := run(NewReader(iotest.OneByteReader(bytes.NewReader(data))))
			if a != b {
				t.Fatalf("in-memory %+v, streaming %+v", a, b)
			}
		}
	})
}

// FuzzDecode: the importer never panics, emits only valid spans, and
// accounts for every decoded event.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var spans []*trace.Span
		sum, err := Decode(context.Background(), "fuzz.bin", data, ingest.Options{KeepGoing: true}, func(s *trace.Span) error {
			if err := s.Validate(); err != nil {
				t.Fatalf("invalid span: %v", err)
			}
			spans = append(spans, s)
			return nil
		})
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		acc := sum.Details["accounting"].(map[string]int64)
		if acc["span_boundaries"]+acc["records"]+acc["symbol_rows"] != sum.Events {
			t.Fatalf("accounting %v for %d events", acc, sum.Events)
		}
		var traces int64
		seen := map[trace.TraceID]bool{}
		for _, s := range spans {
			if !seen[s.TraceID] {
				seen[s.TraceID] = true
				traces++
			}
		}
		if traces != sum.Traces {
			t.Fatalf("%d traces emitted, summary says %d", traces, sum.Traces)
		}
	})
}
