package jaegerapi

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// TestNonFiniteTags: NaN and ±Inf, which a float64 tag cannot carry in
// JSON, become string tags spelled as everywhere in ztsd (and in the
// protobuf JSON mapping): "NaN", "Infinity", "-Infinity".
func TestNonFiniteTags(t *testing.T) {
	for f, want := range map[float64]string{math.Inf(1): "Infinity", math.Inf(-1): "-Infinity", math.NaN(): "NaN"} {
		kv := tag(trace.Attr{Key: "k", Value: trace.Float(f)})
		if kv.Value != want || kv.Type != "string" {
			t.Errorf("%v: tag %+v, want string %q", f, kv, want)
		}
		if _, err := json.Marshal(kv); err != nil {
			t.Errorf("%v: %v", f, err)
		}
		list := tag(trace.Attr{Key: "l", Value: trace.List(trace.Float(f))})
		if list.Value != `["`+want+`"]` {
			t.Errorf("%v in a list: %v", f, list.Value)
		}
	}
}
