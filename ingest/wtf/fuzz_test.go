package wtf

import (
	"context"
	"encoding/json"
	"math/rand"
	"slices"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// decodeHostile decodes data in both modes and checks the invariants that
// must hold for any input: no panic, every emitted span valid, a consistent
// summary on success.
func decodeHostile(t testing.TB, data []byte) {
	for _, keep := range []bool{false, true} {
		var spans []*trace.Span
		var recs int64
		sum, err := Decode(context.Background(), "fuzz", data, ingest.Options{KeepGoing: keep}, func(s *trace.Span) error {
			if err := s.Validate(); err != nil {
				t.Fatalf("invalid span: %v", err)
			}
			if s.SpanID == 0 || s.Recs != s.Root.CountRecords() {
				t.Fatalf("span summary: id %v recs %d", s.SpanID, s.Recs)
			}
			recs += s.Recs
			spans = append(spans, s)
			return nil
		})
		if err != nil {
			if sum != nil || len(spans) != 0 {
				t.Fatalf("error %v with a summary or %d spans", err, len(spans))
			}
			continue
		}
		if sum.Warnings == nil || sum.Traces != int64(len(spans)) || sum.Records != recs {
			t.Fatalf("summary %+v for %d spans / %d records", sum, len(spans), recs)
		}
		acc := sum.Details["accounting"].(map[string]int64)
		if total := acc["definitions"] + acc["zone_events"] + acc["scopes"] + acc["leaves"] + acc["unmatched_leaves"] +
			acc["append_data"] + acc["instance_records"] + acc["dropped"]; total != sum.Events {
			t.Fatalf("accounting %v != events %d", acc, sum.Events)
		}
	}
}

// seedGenerated returns small generated files of one encoding.
func seedGenerated(enc encoding, n int) [][]byte {
	var out [][]byte
	for seed := int64(1); seed <= int64(n); seed++ {
		g := newGenerator(seed, enc)
		g.build()
		g.flatten()
		events := g.stream()
		switch enc {
		case encLegacyBinary:
			out = append(out, g.legacyFile(events, 1367885827385, seed%2 == 0))
		case encCFFBinary:
			out = append(out, g.cffFile(events, 1e12))
		case encCFFJSON:
			out = append(out, g.cffJSONFile(events, 1e12))
		case encLegacyJSON:
			out = append(out, g.legacyJSONFile(events, 1e12))
		}
	}
	return out
}

func FuzzDecodeLegacy(f *testing.F) {
	client := readSample(f, "blk-client.wtf-trace")
	server := readSample(f, "blk-server.wtf-trace")
	f.Add(client[:4096])
	f.Add(server[:4096])
	for _, d := range seedGenerated(encLegacyBinary, 6) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) { decodeHostile(t, data) })
}

func FuzzDecodeCFF(f *testing.F) {
	f.Add(readSample(f, "cff-js-node.wtf-trace"))
	f.Add(readSample(f, "cff-cpp-bindings.wtf-trace"))
	for _, d := range seedGenerated(encCFFBinary, 6) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) { decodeHostile(t, data) })
}

func FuzzDecodeJSON(f *testing.F) {
	for _, name := range []string{"cff-js-node.wtf-json", "legacy-json-combined-1.wtf-json", "legacy-json-out-of-order.wtf-json"} {
		f.Add(readSample(f, name))
	}
	for _, d := range seedGenerated(encCFFJSON, 3) {
		f.Add(d)
	}
	for _, d := range seedGenerated(encLegacyJSON, 3) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) { decodeHostile(t, data) })
}

// FuzzJSONValue checks the "any" parser against encoding/json: the same
// documents are valid, and every value satisfies the attribute invariants.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x\u00e9\ud83d\ude00"],"b":null,"c":true}`, `[[[[]]]]`, `-0.5e3`, `"\ud800"`, `{"a":1,"a":2}`, `01`, `[1,]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := parseJSONValue(text)
		if valid := json.Valid([]byte(text)); (err == nil) != valid {
			t.Fatalf("parse %q: ours %v, encoding/json valid %v", text, err, valid)
		}
		if err != nil {
			return
		}
		if verr := (&trace.Span{TraceID: trace.TraceID{1}, Attrs: trace.Attrs{{Key: "v", Value: v}}}).Validate(); verr != nil {
			t.Fatalf("value of %q invalid: %v", text, verr)
		}
	})
}

// TestTruncatedAndFlippedSamples: truncations of every sample at 100 random
// offsets and random bit flips (600 per small sample, 20 per large one) give
// errors or partial results, never a panic.
func TestTruncatedAndFlippedSamples(t *testing.T) {
	r := rand.New(rand.NewSource(42))
	for _, name := range []string{"blk-client.wtf-trace", "blk-server.wtf-trace", "cff-js-node.wtf-trace", "cff-js-node.wtf-json",
		"cff-cpp-bindings.wtf-trace", "legacy-json-combined-1.wtf-json", "legacy-json-combined-2.wtf-json",
		"legacy-json-deeply-nested.wtf-json", "legacy-json-out-of-order.wtf-json"} {
		data := readSample(t, name)
		big := len(data) > 1<<20
		cuts, flips := 100, min(len(data), 600)
		if big {
			flips = 20
		}
		if testing.Short() {
			cuts, flips = 20, min(flips, 200)
		}
		partial := 0
		for i := 0; i < cuts; i++ {
			cut := data[:r.Intn(len(data))]
			if big {
				// One mode only: the large samples dominate the run time.
				if sum, _, err := collect(t, name, cut, ingest.Options{KeepGoing: true}); err == nil && sum.Events > 0 {
					partial++
				}
				continue
			}
			decodeHostile(t, cut)
		}
		for i := 0; i < flips; i++ {
			bad := slices.Clone(data)
			bad[r.Intn(len(bad))] ^= byte(1 << r.Intn(8))
			if big {
				collect(t, name, bad, ingest.Options{KeepGoing: true})
				continue
			}
			decodeHostile(t, bad)
		}
		if big && partial < cuts/2 {
			t.Errorf("%s: only %d of %d truncations gave partial results", name, partial, cuts)
		}
	}
}
