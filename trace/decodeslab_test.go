package trace_test

import (
	"bytes"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// decodeBoth decodes the realistic batch from its chunk payload and from
// its Trace JSON lines.
func decodeBoth(t *testing.T) (want, fromCBOR, fromJSON []*trace.Span, payload, lines []byte) {
	t.Helper()
	want = benchBatch()
	payload = mustEncode(t, want)
	fromCBOR, err := trace.DecodeChunk(payload, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	lines, _ = realisticJSONLines(t)
	err = trace.DecodeJSONLines(bytes.NewReader(lines), trace.Limits{}, func(s *trace.Span) error {
		fromJSON = append(fromJSON, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return want, fromCBOR, fromJSON, payload, lines
}

// TestDecodedSlicesOwnTheirCapacity: the decoders carve records' child
// lists out of shared arrays, so each must end at its own capacity, and
// so must the attribute maps: appending to one (as assemble.go does to
// Children) must not write into another's elements.
func TestDecodedSlicesOwnTheirCapacity(t *testing.T) {
	want, fromCBOR, fromJSON, _, _ := decodeBoth(t)
	for name, got := range map[string][]*trace.Span{"cbor": fromCBOR, "json": fromJSON} {
		var recs []*trace.Record
		attrMaps := 0
		for _, s := range got {
			if cap(s.Attrs) != len(s.Attrs) {
				t.Fatalf("%s: span attrs len %d cap %d", name, len(s.Attrs), cap(s.Attrs))
			}
			s.Root.Walk(func(r *trace.Record, _ int) bool {
				if cap(r.Children) != len(r.Children) || cap(r.Attrs) != len(r.Attrs) {
					t.Fatalf("%s: record %q: children len %d cap %d, attrs len %d cap %d", name, r.Method,
						len(r.Children), cap(r.Children), len(r.Attrs), cap(r.Attrs))
				}
				if len(r.Attrs) > 0 {
					attrMaps++
				}
				recs = append(recs, r)
				return true
			})
		}
		if attrMaps == 0 {
			t.Fatalf("%s: no record attributes in the batch", name)
		}
		// Grow every list of every record: the spans must still be those
		// sent.
		extra := &trace.Record{Method: "appended"}
		for _, r := range recs {
			if len(r.Children) > 0 {
				_ = append(r.Children, extra)
			}
			if len(r.Attrs) > 0 {
				_ = append(r.Attrs, trace.Attr{Key: "zz.appended", Value: trace.Int(1)})
			}
		}
		for i := range want {
			if d := trace.Diff(want[i], got[i]); d != "" {
				t.Fatalf("%s: span %d changed by appending to other lists: %s", name, i, d)
			}
		}
	}
}

// TestDecodeAllocations bounds the allocations per record of decoding the
// realistic batch: records and child lists come from shared arrays, and a
// Trace JSON attribute map is allocated once at its final size (one
// allocation per child list, and appends growing each JSON map, were 0.59
// allocations per record from CBOR, 1.3 from Trace JSON).
func TestDecodeAllocations(t *testing.T) {
	want, _, _, payload, lines := decodeBoth(t)
	records := 0
	for _, s := range want {
		records += int(s.Root.CountRecords())
	}
	cbor := testing.AllocsPerRun(5, func() {
		if _, err := trace.DecodeChunk(payload, trace.Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	json := testing.AllocsPerRun(5, func() {
		if err := trace.DecodeJSONLines(bytes.NewReader(lines), trace.Limits{}, func(*trace.Span) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d records: %.0f allocations from CBOR, %.0f from Trace JSON", records, cbor, json)
	if per := cbor / float64(records); per > 0.2 {
		t.Errorf("CBOR: %.2f allocations per record, want <= 0.2", per)
	}
	if per := json / float64(records); per > 0.8 {
		t.Errorf("Trace JSON: %.2f allocations per record, want <= 0.8", per)
	}
}
