package dial9

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/ztsd/ztsd/ingest"
)

// allSamples are every dial9 sample, the legacy one included.
var allSamples = []string{"demo-2026-05-15.bin", "demo-2026-03-18-small.bin", "demo-2026-03-17-callframes.bin",
	"demo-2026-04-16-optional-fields.bin", "demo-2026-05-01-pooled-stacks.bin", "legacy-tokiotrc-v9.bin"}

// rawSample returns a sample's decoded bytes (gunzipped when compressed).
func rawSample(t testing.TB, name string) []byte {
	data := readSample(t, name)
	if !IsGzip(data) {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// readerSurvives decodes data with the Reader: it must end cleanly or with
// a *DecodeError within the input, and count what it returned.
func readerSurvives(t *testing.T, data []byte, what string) int64 {
	t.Helper()
	r, err := NewBytesReader(data)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("%s: header error %v is not a *DecodeError", what, err)
		}
		return 0
	}
	var n int64
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 {
				t.Fatalf("%s: error %v is not a *DecodeError", what, err)
			}
			break
		}
		n++
	}
	if r.Stats().Events != n {
		t.Fatalf("%s: stats say %d events, %d returned", what, r.Stats().Events, n)
	}
	return n
}

// importSurvives maps data keeping going past decode errors: whatever was
// decoded is emitted as valid spans and every decoded event accounted for.
func importSurvives(t *testing.T, data []byte, what string) {
	t.Helper()
	var c collected
	sum, err := Decode(context.Background(), "damaged.bin", data, ingest.Options{KeepGoing: true}, c.emit)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) || sum.Events != 0 {
			t.Fatalf("%s: %v after %d events", what, err, sum.Events)
		}
		return
	}
	c.check(t, sum, "damaged.bin")
}

// window bounds the part of a sample that most damage is applied to.
const window = 256 << 10

func sweep(full int) int {
	switch {
	case raceEnabled:
		return full / 10
	case testing.Short():
		return full / 4
	}
	return full
}

// TestSamplesTruncated cuts every sample at 100 random offsets: decoding
// stops with an error naming an offset inside the input and keeps what was
// before the cut; mapping still emits valid spans.
func TestSamplesTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, name := range allSamples {
		raw := rawSample(t, name)
		total := readerSurvives(t, raw, name)
		for i := 0; i < sweep(100); i++ {
			// Most cuts in the first 256 KiB (every frame kind occurs
			// there), some anywhere: decoding cost grows with the cut.
			cut := rng.IntN(min(len(raw), window))
			if i%20 == 0 {
				cut = rng.IntN(len(raw))
			}
			n := readerSurvives(t, raw[:cut], name)
			if n > total {
				t.Fatalf("%s cut at %d: %d events, more than the whole file's %d", name, cut, n, total)
			}
			if i%10 == 5 || name == "demo-2026-03-18-small.bin" {
				importSurvives(t, raw[:cut], name)
			}
		}
		if data := readSample(t, name); IsGzip(data) { // cut inside the compressed stream
			for i := 0; i < sweep(10); i++ {
				cut := rng.IntN(len(data))
				readerSurvives(t, data[:cut], name+" (gzip)")
			}
		}
	}
}

// TestSamplesBitFlipped flips random bits of every sample (in the first
// 256 KiB of the decoded bytes, and in the compressed stream of gzip
// samples).
func TestSamplesBitFlipped(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, name := range allSamples {
		raw := rawSample(t, name)
		prefix := raw[:min(len(raw), window)]
		for i := 0; i < sweep(100); i++ {
			damaged := bytes.Clone(prefix)
			for k := 1 + rng.IntN(3); k > 0; k-- {
				p := rng.IntN(len(damaged))
				damaged[p] ^= 1 << rng.IntN(8)
			}
			readerSurvives(t, damaged, name)
			if i%10 == 0 {
				importSurvives(t, damaged, name)
			}
		}
		if data := readSample(t, name); IsGzip(data) {
			for i := 0; i < sweep(10); i++ {
				damaged := bytes.Clone(data)
				p := rng.IntN(len(damaged))
				damaged[p] ^= 1 << rng.IntN(8)
				readerSurvives(t, damaged, name+" (gzip)")
			}
		}
	}
}

// TestDamagedMidFileHeader: a damaged mid-file header stops decoding at
// its offset; the stream before it is emitted whole.
func TestDamagedMidFileHeader(t *testing.T) {
	data := syntheticTelemetry()
	i := bytes.Index(data[1:], []byte(Magic)) + 1
	data[i+1] = 'X' // "TXC\0": an unknown tag 0x54 where a frame tag is expected
	var c collected
	sum, err := Decode(context.Background(), "x.bin", data, ingest.Options{}, c.emit)
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrUnknownTag) || de.Offset != int64(i) {
		t.Fatalf("err = %v, want unknown tag at %d", err, i)
	}
	if sum.Events != 5 || sum.Traces != 1 || len(c.spans) != 5 {
		t.Fatalf("kept %d events, %d traces, %d spans; want the 5 events of stream 0 as 5 spans of 1 trace",
			sum.Events, sum.Traces, len(c.spans))
	}
	for _, s := range c.spans {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHostileShapes feeds inputs whose cost would be quadratic (or whose
// trees would be too deep) with a naive mapping; each must import quickly
// into valid spans with every event accounted for.
func TestHostileShapes(t *testing.T) {
	meta := &Schema{TypeID: 9, Name: "SegmentMetadataEvent", HasTimestamp: true,
		Fields: []Field{{"entries", TypeStringMap}}}
	for _, tc := range []struct {
		name  string
		build func(w *testWriter)
	}{
		{"5000 nested span enters, then 5000 mismatched exits", func(w *testWriter) {
			for _, s := range []*Schema{tUnpark, tPark, tPollStart, tPollEnd, tEnter, tExit} {
				w.schema(s)
			}
			w.stringPool([]uint32{0, 1}, []string{"loc", "span"})
			w.event(tPollStart, mono0, []Value{u(0), u(0), u(1), u(0)})
			for i := uint64(0); i < 5000; i++ {
				w.event(tEnter, mono0+i, []Value{u(0), u(i), absent(), u(1), absent()})
			}
			for i := uint64(0); i < 5000; i++ {
				w.event(tExit, mono0+9000+i, []Value{u(0), u(1 << 40), u(1), absent()})
			}
			w.event(tPollEnd, mono0+20000, []Value{u(0)})
		}},
		{"a 200000-entry string map", func(w *testWriter) {
			w.schema(meta)
			pairs := make([]StringPair, 200000)
			for i := range pairs {
				pairs[i] = StringPair{Key: string(rune('a' + i%26)), Value: "v"}
				if i%3 == 0 {
					pairs[i].Key = fmt.Sprint(i)
				}
			}
			w.event(meta, mono0, []Value{{Pairs: pairs}})
		}},
		{"100000 symbol rows for one address", func(w *testWriter) {
			w.schema(tSymbol)
			w.stringPool([]uint32{0}, []string{"f"})
			for i := uint64(0); i < 100000; i++ {
				w.event(tSymbol, 0, []Value{u(0x1000), u(1), u(0), u(i), u(0), u(i)})
			}
		}},
		{"20000 streams registering type id 65535", func(w *testWriter) {
			s := &Schema{TypeID: 65535, Name: "X", HasTimestamp: true}
			for i := 0; i < 20000; i++ {
				w.header(Version)
				w.schema(s)
				w.event(s, uint64(i), nil)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := frames(tc.build)
			var c collected
			sum, err := Decode(context.Background(), "hostile.bin", data, ingest.Options{}, c.emit)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, sum, "hostile.bin")
		})
	}
}
