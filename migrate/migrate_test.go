package migrate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// TestCompressionRoundTrip: LZ4 stores migrated to zlib, then to
// uncompressed without checksums, then back to LZ4: every trace equals the
// original at every step, every result passes verify, the data-file
// headers and config.props say what was asked, and stores stay 1:1.
func TestCompressionRoundTrip(t *testing.T) {
	src, spans := sourceDir(t, 1, 3000, 3)
	ids := traceIDs(spans)
	orig := readTraces(t, src, ids)
	if len(orig) != len(ids) {
		t.Fatalf("source holds %d of %d traces", len(orig), len(ids))
	}
	steps := []struct {
		comp chunk.Compression
		crc  bool
	}{{chunk.Zlib, true}, {chunk.Zstd, true}, {chunk.None, false}, {chunk.LZ4, true}}
	from := src
	base := t.TempDir()
	for i, s := range steps {
		to := filepath.Join(base, s.comp.String())
		rep := migrateOK(t, Options{Sources: []string{from}, Target: to, Compression: ptr(s.comp), Checksums: ptr(s.crc), BatchBytes: 64 << 10})
		if rep.SpansRead != int64(len(spans)) || rep.SpansWritten != int64(len(spans)) || rep.Duplicates != 0 {
			t.Fatalf("step %d: read %d, wrote %d, %d duplicates; want %d, %d, 0", i, rep.SpansRead, rep.SpansWritten, rep.Duplicates, len(spans), len(spans))
		}
		if rep.StoresRead != 3 || rep.TargetStores != 3 || rep.SourceStores != 3 {
			t.Fatalf("step %d: %d stores read, %d target stores; want 3 and 3", i, rep.StoresRead, rep.TargetStores)
		}
		if rep.Verify.Traces != int64(len(ids)) || rep.Verify.Pieces != int64(len(spans)) || rep.Verify.TargetPieces != int64(len(spans)) || rep.Verify.StoresVerified != 3 {
			t.Fatalf("step %d: verification %+v", i, rep.Verify)
		}
		for j, h := range dataHeaders(t, to) {
			if h != (chunk.Options{Compression: s.comp, Checksums: s.crc}) {
				t.Fatalf("step %d: store %d header says %v", i, j, h)
			}
			p, err := config.ReadPropsFile(filepath.Join(to, storedir.StoreName(uint32(j)), propsFileName))
			if err != nil {
				t.Fatal(err)
			}
			sp, err := config.StorePropsFrom(p)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Compression != s.comp.String() || sp.Checksums != s.crc || sp.FormatVersion != storedir.FormatVersion {
				t.Fatalf("step %d: store %d config.props %+v", i, j, sp)
			}
		}
		if exists(filepath.Join(to, stateDirName)) || exists(filepath.Join(to, stateDeletingName)) || !exists(filepath.Join(to, reportFileName)) {
			t.Fatalf("step %d: state left behind or report missing", i)
		}
		mustVerify(t, to)
		sameTraces(t, "step "+s.comp.String(), orig, readTraces(t, to, ids), ids)
		from = to
	}
	// The source was not touched (beyond its LOCK file).
	sameTraces(t, "source after", orig, readTraces(t, src, ids), ids)
}

// TestMergeWithItself: naming a directory twice writes each piece once;
// the result equals the directory.
func TestMergeWithItself(t *testing.T) {
	src, spans := sourceDir(t, 2, 1500, 2)
	ids := traceIDs(spans)
	to := filepath.Join(t.TempDir(), "dst")
	rep := migrateOK(t, Options{Sources: []string{src, src}, Target: to})
	n := int64(len(spans))
	if rep.SpansRead != 2*n || rep.SpansWritten != n || rep.Duplicates != n {
		t.Fatalf("read %d, wrote %d, %d duplicates; want %d, %d, %d", rep.SpansRead, rep.SpansWritten, rep.Duplicates, 2*n, n, n)
	}
	if rep.TargetStores != 2 || rep.Verify.SourcePieces != 2*n || rep.Verify.TargetPieces != n {
		t.Fatalf("%d target stores, verification %+v", rep.TargetStores, rep.Verify)
	}
	if got := countPieces(t, to); got != n {
		t.Fatalf("target indexes %d pieces, want %d", got, n)
	}
	sameTraces(t, "self-merge", readTraces(t, src, ids), readTraces(t, to, ids), ids)
	mustVerify(t, to)
}

// TestMergeSharedTraces: two directories holding different spans of the
// same traces, and some spans in both, merge into complete traces with
// every span once.
func TestMergeSharedTraces(t *testing.T) {
	spans := workload.Spans(3, 2000) // traces of 1–10 spans
	var a, b []*trace.Span
	for i, sp := range spans {
		switch i % 3 {
		case 0:
			a = append(a, sp)
		case 1:
			b = append(b, sp)
		default: // in both
			a = append(a, sp)
			b = append(b, sp)
		}
	}
	base := t.TempDir()
	da, db := filepath.Join(base, "a"), filepath.Join(base, "b")
	writeDataDir(t, da, a, 2, lz4crc)
	writeDataDir(t, db, b, 1, chunk.Options{Compression: chunk.Zlib, Checksums: true})
	to := filepath.Join(base, "merged")
	rep := migrateOK(t, Options{Sources: []string{da, db}, Target: to})
	if rep.SpansWritten != int64(len(spans)) || rep.Duplicates != int64(len(a)+len(b)-len(spans)) {
		t.Fatalf("wrote %d, %d duplicates; want %d, %d", rep.SpansWritten, rep.Duplicates, len(spans), len(a)+len(b)-len(spans))
	}
	// Compression was kept from the first source store.
	for _, h := range dataHeaders(t, to) {
		if h != lz4crc {
			t.Fatalf("target header %v, want lz4+crc32", h)
		}
	}
	ids := traceIDs(spans)
	got := readTraces(t, to, ids)
	whole := filepath.Join(base, "whole")
	writeDataDir(t, whole, spans, 1, lz4crc)
	sameTraces(t, "merge", readTraces(t, whole, ids), got, ids)
	mustVerify(t, to)
}

// TestTimeRangeSplit: --until T and --since T split a directory into two
// whose union is the original, each trace wholly on the side of its
// earliest span.
func TestTimeRangeSplit(t *testing.T) {
	src, spans := sourceDir(t, 4, 2000, 2)
	ids := traceIDs(spans)
	start := map[trace.TraceID]int64{}
	for _, sp := range spans {
		if s, ok := start[sp.TraceID]; !ok || sp.StartNS < s {
			start[sp.TraceID] = sp.StartNS
		}
	}
	// Split at the start of a trace with several spans, so that a span of
	// another trace may lie on the other side of the cut.
	cut := spans[len(spans)/2].StartNS
	base := t.TempDir()
	early, late := filepath.Join(base, "early"), filepath.Join(base, "late")
	re := migrateOK(t, Options{Sources: []string{src}, Target: early, UntilNS: cut})
	rl := migrateOK(t, Options{Sources: []string{src}, Target: late, SinceNS: cut})
	if re.SpansWritten+rl.SpansWritten != int64(len(spans)) || re.DroppedByTime != rl.SpansWritten || rl.DroppedByTime != re.SpansWritten {
		t.Fatalf("early wrote %d dropped %d, late wrote %d dropped %d, of %d", re.SpansWritten, re.DroppedByTime, rl.SpansWritten, rl.DroppedByTime, len(spans))
	}
	if re.SpansWritten == 0 || rl.SpansWritten == 0 {
		t.Fatal("the cut left one side empty")
	}
	orig := readTraces(t, src, ids)
	ge, gl := readTraces(t, early, ids), readTraces(t, late, ids)
	for _, id := range ids {
		_, inE := ge[id]
		_, inL := gl[id]
		wantE := start[id] < cut
		if inE != wantE || inL == wantE {
			t.Fatalf("trace %s starting at %d (cut %d): in early %v, in late %v", id, start[id], cut, inE, inL)
		}
	}
	sameTraces(t, "early", orig, ge, idsWhere(ids, func(id trace.TraceID) bool { return start[id] < cut }))
	sameTraces(t, "late", orig, gl, idsWhere(ids, func(id trace.TraceID) bool { return start[id] >= cut }))
	mustVerify(t, early)
	mustVerify(t, late)
}

func idsWhere(ids []trace.TraceID, keep func(trace.TraceID) bool) []trace.TraceID {
	var out []trace.TraceID
	for _, id := range ids {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}

// TestDropAttr: every trace with a span carrying service.name=payment is
// dropped whole; the others are copied unchanged.
func TestDropAttr(t *testing.T) {
	src, spans := sourceDir(t, 5, 2000, 1)
	ids := traceIDs(spans)
	drop := map[trace.TraceID]bool{}
	for _, sp := range spans {
		if v, ok := sp.Attrs.Get("service.name"); ok && v.Str == "payment" {
			drop[sp.TraceID] = true
		}
	}
	var dropped int64
	for _, sp := range spans {
		if drop[sp.TraceID] {
			dropped++
		}
	}
	a, err := ParseDropAttr("service.name=payment")
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "dst")
	rep := migrateOK(t, Options{Sources: []string{src}, Target: to, DropAttrs: []trace.Attr{a}})
	if rep.DroppedByAttr != dropped || rep.SpansWritten != int64(len(spans))-dropped || dropped == 0 {
		t.Fatalf("dropped %d, wrote %d; want %d dropped of %d", rep.DroppedByAttr, rep.SpansWritten, dropped, len(spans))
	}
	got := readTraces(t, to, ids)
	for _, id := range ids {
		if _, ok := got[id]; ok == drop[id] {
			t.Fatalf("trace %s: in target %v, dropped %v", id, ok, drop[id])
		}
	}
	sameTraces(t, "kept", readTraces(t, src, ids), got, idsWhere(ids, func(id trace.TraceID) bool { return !drop[id] }))
}

// TestInPlace rewrites a directory in place: same path, new compression,
// equal traces, nothing left behind.
func TestInPlace(t *testing.T) {
	src, spans := sourceDir(t, 6, 1500, 2)
	ids := traceIDs(spans)
	orig := readTraces(t, src, ids)
	rep := migrateOK(t, Options{Sources: []string{src}, InPlace: true, Compression: ptr(chunk.Zlib)})
	if !rep.InPlace || rep.SpansWritten != int64(len(spans)) {
		t.Fatalf("report %+v", rep)
	}
	for _, h := range dataHeaders(t, src) {
		if h.Compression != chunk.Zlib {
			t.Fatalf("header %v after in-place migration to zlib", h)
		}
	}
	for _, p := range []string{src + newSuffix, src + oldSuffix, filepath.Join(src, stateDirName), filepath.Join(src, stateDeletingName)} {
		if exists(p) {
			t.Fatalf("%s left behind", p)
		}
	}
	sameTraces(t, "in place", orig, readTraces(t, src, ids), ids)
	mustVerify(t, src)
}

// TestRerunFinished: re-running a finished migration reports it complete
// without touching anything; other options on the same target are refused.
func TestRerunFinished(t *testing.T) {
	src, _ := sourceDir(t, 7, 300, 1)
	to := filepath.Join(t.TempDir(), "dst")
	first := migrateOK(t, Options{Sources: []string{src}, Target: to})
	again, err := Run(context.Background(), Options{Sources: []string{src}, Target: to})
	if err != nil || !again.AlreadyComplete || again.SpansWritten != first.SpansWritten {
		t.Fatalf("re-run: %v, %+v", err, again)
	}
	_, err = Run(context.Background(), Options{Sources: []string{src}, Target: to, Compression: ptr(chunk.Zlib)})
	if !errors.Is(err, ErrTargetNotEmpty) {
		t.Fatalf("re-run with other options: %v, want ErrTargetNotEmpty", err)
	}
}

// TestRefusals: a locked source, a non-empty target, overlapping paths,
// bad options, a store directory as source.
func TestRefusals(t *testing.T) {
	src, _ := sourceDir(t, 8, 200, 1)
	base := t.TempDir()
	o := storedir.DefaultOptions()
	db, err := storedir.Open(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Sources: []string{src}, Target: filepath.Join(base, "x")})
	db.Close()
	if !errors.Is(err, storedir.ErrLocked) {
		t.Fatalf("locked source: %v, want ErrLocked", err)
	}
	if exists(filepath.Join(base, "x")) {
		t.Fatal("a refused migration created its target")
	}
	full := filepath.Join(base, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "something"), []byte("x"), 0o644)
	cases := []struct {
		name string
		opt  Options
		want error
	}{
		{"non-empty target", Options{Sources: []string{src}, Target: full}, ErrTargetNotEmpty},
		{"target is source", Options{Sources: []string{src}, Target: src}, ErrUsage},
		{"target inside source", Options{Sources: []string{src}, Target: filepath.Join(src, "sub")}, ErrUsage},
		{"no source", Options{Target: filepath.Join(base, "y")}, ErrUsage},
		{"no target", Options{Sources: []string{src}}, ErrUsage},
		{"target and in-place", Options{Sources: []string{src}, Target: filepath.Join(base, "y"), InPlace: true}, ErrUsage},
		{"empty range", Options{Sources: []string{src}, Target: filepath.Join(base, "y"), SinceNS: 10, UntilNS: 10}, ErrUsage},
		{"bad compression", Options{Sources: []string{src}, Target: filepath.Join(base, "y"), Compression: ptr(chunk.Compression(7))}, ErrUsage},
		{"store as source", Options{Sources: []string{filepath.Join(src, "000000")}, Target: filepath.Join(base, "y")}, ErrUsage},
		{"missing source", Options{Sources: []string{filepath.Join(base, "nope")}, Target: filepath.Join(base, "y")}, os.ErrNotExist},
	}
	for _, c := range cases {
		_, err := Run(context.Background(), c.opt)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := ParseDropAttr("=x"); !errors.Is(err, ErrUsage) {
		t.Errorf("drop attribute =x: %v", err)
	}
	if a, err := ParseDropAttr("k=a=b"); err != nil || a.Key != "k" || a.Value.Str != "a=b" {
		t.Errorf("drop attribute k=a=b: %+v, %v", a, err)
	}
}

// TestUnknownVersion: a store of a format version no Upgrader reads is
// refused; registering one for it makes it migrate through that reader.
func TestUnknownVersion(t *testing.T) {
	src, spans := sourceDir(t, 9, 300, 1)
	props := filepath.Join(src, "000000", propsFileName)
	b, err := os.ReadFile(props)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(props, []byte(strings.Replace(string(b), "format.version=1", "format.version=2", 1)), 0o644)
	_, err = Run(context.Background(), Options{Sources: []string{src}, Target: filepath.Join(t.TempDir(), "x")})
	if !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("version 2 without an upgrader: %v", err)
	}
	// A stand-in "version 2" whose payloads mean the same with every span
	// type upper-cased.
	ups := Upgraders()
	ups[2] = func(payload []byte, lim trace.Limits) ([]*trace.Span, error) {
		spans, err := trace.DecodeChunk(payload, lim)
		for _, sp := range spans {
			sp.Type = strings.ToUpper(sp.Type)
		}
		return spans, err
	}
	to := filepath.Join(t.TempDir(), "y")
	rep := migrateOK(t, Options{Sources: []string{src}, Target: to, Upgraders: ups})
	if rep.UpgradedStores != 1 || rep.SpansWritten != int64(len(spans)) {
		t.Fatalf("upgraded %d stores, wrote %d", rep.UpgradedStores, rep.SpansWritten)
	}
	ids := traceIDs(spans)
	for id, roots := range readTraces(t, to, ids) {
		if roots[0].Type != "HTTP" {
			t.Fatalf("trace %s type %q after the upgrade", id, roots[0].Type)
		}
	}
	mustVerify(t, to)
}

// TestCorruptSource: a flipped bit in a middle chunk and a torn tail cost
// exactly their chunks; everything else is migrated and verified.
func TestCorruptSource(t *testing.T) {
	src, spans := sourceDir(t, 10, 2000, 1)
	data := filepath.Join(src, "000000", dataFileName)
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	// Find the chunk offsets to damage the third one and tear the last.
	var offs []int64
	sc := chunk.NewScanner(bytes.NewReader(b), int64(len(b)), lz4crc)
	for sc.Next() {
		off, _ := sc.Chunk()
		offs = append(offs, off)
	}
	if len(offs) < 5 {
		t.Fatalf("only %d chunks", len(offs))
	}
	b[offs[2]+chunk.ChunkHeaderSize+5] ^= 0x10
	b = b[:len(b)-7]
	os.WriteFile(data, b, 0o640)
	to := filepath.Join(t.TempDir(), "dst")
	rep := migrateOK(t, Options{Sources: []string{src}, Target: to})
	if rep.BadRegionsTotal != 2 || len(rep.BadRegions) != 2 || rep.BadRegions[0].Offset != offs[2] || rep.BadRegions[1].Offset != offs[len(offs)-1] {
		t.Fatalf("bad regions %+v, want chunks at %d and %d", rep.BadRegions, offs[2], offs[len(offs)-1])
	}
	if rep.SpansWritten >= int64(len(spans)) || rep.SpansWritten < int64(len(spans))/2 {
		t.Fatalf("wrote %d of %d spans", rep.SpansWritten, len(spans))
	}
	mustVerify(t, to)
}
