package wtf

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/trace"
)

// File flags (wtf.data.formats.FileFlags).
const (
	fileFlagHighResTimes = 0x1
	fileFlagTimesAsCount = 0x2
)

// maxTimebaseMS bounds a file timebase (year 2096) so that nanosecond times
// (timebase + up to maxJSONTimeUS) fit an int64.
const maxTimebaseMS = 4e12

// flagNames renders a legacy flag bitmask as CFF's flag strings.
func flagNames(bits uint32) []string {
	var out []string
	if bits&fileFlagHighResTimes != 0 {
		out = append(out, "has_high_resolution_times")
	}
	if bits&fileFlagTimesAsCount != 0 {
		out = append(out, "times_as_count")
	}
	for b := uint32(4); b != 0; b <<= 1 {
		if bits&b != 0 {
			out = append(out, fmt.Sprintf("0x%x", b))
		}
	}
	return out
}

// timebaseFromText converts a JSON number of milliseconds to ms and exact
// ns: epoch milliseconds do not fit a float64 with nanosecond precision, so
// the decimal digits are used directly (exponent forms go through float).
func timebaseFromText(s string) (ms float64, ns int64, err error) {
	ms, err = strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(ms) || math.Abs(ms) > maxTimebaseMS {
		return 0, 0, errf(ErrMalformed, "timebase %q ms out of range", s)
	}
	if strings.ContainsAny(s, "eE") {
		return ms, int64(math.Round(ms * 1e6)), nil
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, 0, errf(ErrMalformed, "timebase %q", s)
	}
	ns = w * 1e6
	for i := 0; i < 6; i++ {
		d := int64(0)
		if i < len(frac) {
			d = int64(frac[i] - '0')
		}
		ns += d * pow10[5-i]
	}
	if len(frac) > 6 && frac[6] >= '5' {
		ns++
	}
	if neg {
		ns = -ns
	}
	return ms, ns, nil
}

var pow10 = [...]int64{1, 10, 100, 1000, 10000, 100000}

// setHeader records the file header: timebase (ms, may be fractional, and
// the same in exact ns), flags, the contextInfo object and the metadata
// object.
func (l *loader) setHeader(timebaseMS float64, timebaseNS int64, flags []string, context, metadata trace.Value) error {
	if l.haveHeader {
		l.warn.add("header-repeat", "more than one file header; the first one is used")
		return nil
	}
	if math.IsNaN(timebaseMS) || math.Abs(timebaseMS) > maxTimebaseMS {
		return errf(ErrMalformed, "timebase %v ms out of range", timebaseMS)
	}
	h := fileHeader{
		timebaseMS: timebaseMS,
		timebaseNS: timebaseNS,
		flags:      flags,
	}
	switch context.Kind {
	case trace.KindMap:
		if !flatten(&h.context, "wtf.context", context, 0) {
			l.warn.add("context-size", fmt.Sprintf("context info has more than %d fields; the rest are left out", maxHeaderAttrs))
		}
		if ct, ok := context.Map.Get("contextType"); ok && ct.Kind == trace.KindString && ct.Str != "script" {
			l.warn.add("context-type", fmt.Sprintf("context type %q (WTF expects \"script\")", ct.Str))
		}
	case trace.KindNull:
	default:
		l.warn.add("context", "context info is not a JSON object; ignored")
	}
	switch metadata.Kind {
	case trace.KindMap:
		if !flatten(&h.metadata, "wtf.metadata", metadata, 0) {
			l.warn.add("metadata-size", fmt.Sprintf("metadata has more than %d fields; the rest are left out", maxHeaderAttrs))
		}
	case trace.KindNull:
	default:
		l.warn.add("metadata", "metadata is not a JSON object; ignored")
	}
	// Browsers and node with microtime write an epoch timebase; C++ writes 0
	// and node without microtime process.hrtime (milliseconds since boot).
	if timebaseMS < 1e11 {
		l.warn.add("timebase", fmt.Sprintf("timebase %.3f ms is not wall-clock time (C++ bindings or node without microtime): span times are not real dates", timebaseMS))
	}
	l.header = h
	l.haveHeader = true
	return nil
}

// maxHeaderAttrs bounds the attributes taken from the context info and from
// the metadata: every span carries them (a real context has about a dozen).
const maxHeaderAttrs = 64

// flatten sets prefix.key for each field of a JSON object, descending one
// level into nested objects (userAgent, icon); null fields are left out.
// It reports false when maxHeaderAttrs would be exceeded.
func flatten(dst *trace.Attrs, prefix string, v trace.Value, level int) bool {
	if v.Kind != trace.KindMap || level > 1 {
		if v.Kind != trace.KindNull {
			if len(*dst) >= maxHeaderAttrs {
				return false
			}
			dst.Set(prefix, v)
		}
		return true
	}
	keys := make([]string, 0, len(v.Map))
	for _, a := range v.Map {
		keys = append(keys, a.Key)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, _ := v.Map.Get(k)
		if !flatten(dst, prefix+"."+k, e, level+1) {
			return false
		}
	}
	return true
}
