package dial9

import (
	"bytes"
	"context"
	"flag"
	"math"
	"os"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

var updateFixtures = flag.Bool("update-fixtures", false, "rewrite ../../testdata/nonfinite/f64.dial9 from the test writer")

// nonFiniteFixture is the project fixture the end-to-end tests import:
// F64 fields holding NaN, +Inf, -Inf and ordinary values, inside an active
// period (a poll's neighbour) and in a later, separate trace.
const nonFiniteFixture = "../../testdata/nonfinite/f64.dial9"

var tMetric = &Schema{TypeID: 9, Name: "GaugeSampleEvent", HasTimestamp: true, Fields: []Field{
	{"worker_id", TypeVarint}, {"ratio", TypeF64}, {"load", TypeF64}, {"floor", TypeF64}, {"plain", TypeF64},
	{"label", TypeString}}}

func f64(f float64) Value { return Value{Float: f} }
func str(s string) Value  { return Value{Str: s} }

func nonFiniteFile() []byte {
	w := &testWriter{}
	w.header(Version)
	w.schema(tClock)
	w.event(tClock, mono0, []Value{u(wall0)})
	w.header(Version)
	for _, s := range []*Schema{tUnpark, tPark, tPollStart, tPollEnd, tMetric} {
		w.schema(s)
	}
	w.stringPool([]uint32{0}, []string{"src/main.rs:10:5"})
	w.event(tUnpark, mono0, []Value{u(0), u(0), u(100), u(5), u(42)})
	w.event(tPollStart, mono0+100_000, []Value{u(0), u(1), u(7), u(0)})
	w.event(tPollEnd, mono0+200_000, []Value{u(0)})
	w.event(tMetric, mono0+300_000, []Value{u(0), f64(math.NaN()), f64(math.Inf(1)), f64(math.Inf(-1)), f64(0.25), str("NaN")})
	w.event(tPark, mono0+400_000, []Value{u(0), u(0), u(900), u(42)})
	// A later trace: outside any active period.
	w.event(tMetric, mono0+9_000_000, []Value{u(0), f64(math.Inf(-1)), f64(math.NaN()), f64(math.Inf(1)), f64(-0.5), str("Infinity")})
	return w.buf.Bytes()
}

// TestNonFiniteFixture: the fixture is what the writer produces, and its
// NaN/±Inf fields import as floats that Trace JSON carries exactly (the
// string "NaN" stays a string).
func TestNonFiniteFixture(t *testing.T) {
	data := nonFiniteFile()
	if *updateFixtures {
		if err := os.MkdirAll("../../testdata/nonfinite", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(nonFiniteFixture, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	disk, err := os.ReadFile(nonFiniteFixture)
	if err != nil || !bytes.Equal(disk, data) {
		t.Fatalf("%s differs from the writer's output (%v): run go test -run TestNonFiniteFixture -update-fixtures", nonFiniteFixture, err)
	}
	var spans []*trace.Span
	if _, err := Import(context.Background(), nonFiniteFixture, ingest.Options{}, func(sp *trace.Span) error {
		spans = append(spans, sp)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	nonFinite := 0
	var walk func(a trace.Attrs)
	walk = func(a trace.Attrs) {
		for _, kv := range a {
			if kv.Value.Kind == trace.KindFloat && (math.IsNaN(kv.Value.Float) || math.IsInf(kv.Value.Float, 0)) {
				nonFinite++
			}
		}
	}
	for _, sp := range spans {
		walk(sp.Attrs)
		if sp.Root != nil {
			sp.Root.Walk(func(r *trace.Record, _ int) bool { walk(r.Attrs); return true })
		}
		b, err := sp.MarshalJSON()
		if err != nil {
			t.Fatalf("span %s: %v", sp.SpanID, err)
		}
		var back trace.Span
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if d := trace.Diff(sp, &back); d != "" {
			t.Errorf("span %s does not read back: %s\n%s", sp.SpanID, d, b)
		}
	}
	if nonFinite != 6 {
		t.Errorf("%d non-finite float attributes imported, want 6", nonFinite)
	}
}
