package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

func TestProbeDisk(t *testing.T) {
	dir := t.TempDir()
	lim, err := ProbeDisk(dir, 3<<20+1, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", lim)
	if lim.ProbeBytes != 4<<20 {
		t.Errorf("ProbeBytes = %d, want 4 MiB (rounded up to whole MiB)", lim.ProbeBytes)
	}
	if lim.WriteMBPerS <= 0 || lim.ReadDirectMBPerS <= 0 || lim.FsyncsPerS <= 0 || lim.FsyncP50Ms <= 0 ||
		lim.AppendFsyncsPerS <= 0 || lim.AppendFsyncP50Ms <= 0 {
		t.Errorf("a probe measured nothing: %+v", lim)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probe left %d files behind", len(ents))
	}
	if _, err := ProbeDisk(filepath.Join(dir, "missing"), 1<<20, time.Millisecond); err == nil {
		t.Error("ProbeDisk in a missing directory succeeded")
	}
}

// testPayloads encodes n spans of the workload into chunk payloads of
// about 500 spans.
func testPayloads(t testing.TB, n int) [][]byte {
	spans, _ := genSpans(2, n)
	var out [][]byte
	for i := 0; i < len(spans); i += 500 {
		p, err := trace.EncodeChunk(nil, spans[i:min(i+500, len(spans))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestProbeLZ4(t *testing.T) {
	lim, err := ProbeLZ4(testPayloads(t, 2000), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", lim)
	if lim.CompressMBPerS <= 0 || lim.DecompressMBPerS <= lim.CompressMBPerS/10 || lim.Ratio < 1.3 || lim.SampleBytes == 0 {
		t.Errorf("implausible LZ4 probe: %+v", lim)
	}
	// Incompressible input is stored raw, as the store does.
	rnd := make([]byte, 64<<10)
	for i := range rnd {
		rnd[i] = byte(i*7919 + i>>3*31)
	}
	if _, err := ProbeLZ4([][]byte{rnd}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := ProbeLZ4(nil, time.Millisecond); err == nil {
		t.Error("ProbeLZ4 of nothing succeeded")
	}
}

// TestMeasureSpace builds a data directory by hand: two stores with data
// files, index files and other files, and a directory that is no store.
func TestMeasureSpace(t *testing.T) {
	dir := t.TempDir()
	payloads := testPayloads(t, 3000)
	var wantPayload, wantData int64
	for s, name := range []string{"000000", "000001"} {
		store := filepath.Join(dir, name)
		os.MkdirAll(filepath.Join(store, "meta"), 0o755)
		os.MkdirAll(filepath.Join(store, "text"), 0o755)
		os.WriteFile(filepath.Join(store, "meta", "000001.sst"), make([]byte, 1000), 0o644)
		os.WriteFile(filepath.Join(store, "text", "000002.sst"), make([]byte, 300), 0o644)
		os.WriteFile(filepath.Join(store, "config.props"), make([]byte, 10), 0o644)
		f, err := chunk.Create(filepath.Join(store, dataFileName), chunk.Options{Compression: chunk.LZ4, Checksums: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range payloads[s*3 : s*3+3] {
			if _, err := f.Append(p); err != nil {
				t.Fatal(err)
			}
			wantPayload += int64(len(p))
		}
		wantData += f.Size()
		f.Close()
	}
	os.WriteFile(filepath.Join(dir, "LOCK"), []byte("1\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "notastore"), 0o755)
	os.WriteFile(filepath.Join(dir, "notastore", dataFileName), make([]byte, 5), 0o644)

	sp, samples, err := MeasureSpace(dir, int64(len(payloads[3])+1))
	if err != nil {
		t.Fatal(err)
	}
	want := Space{Stores: 2, DataBytes: wantData, MetaBytes: 2000, TextBytes: 600, OtherBytes: 20 + 2 + 5,
		TotalBytes: wantData + 2000 + 600 + 27, Chunks: 6, Spans: 6 * 500, PayloadBytes: wantPayload}
	got := sp
	got.StoredBytes = 0
	if got != want {
		t.Fatalf("MeasureSpace:\n got %+v\nwant %+v", got, want)
	}
	if sp.StoredBytes <= 0 || sp.StoredBytes >= sp.PayloadBytes || sp.StoredBytes+6*chunk.ChunkHeaderSize+2*chunk.HeaderSize != wantData {
		t.Errorf("stored bytes %d of data files %d", sp.StoredBytes, wantData)
	}
	// Samples come from the newest store first, up to the byte budget.
	if len(samples) != 2 || string(samples[0]) != string(payloads[3]) {
		t.Errorf("%d samples, want the first two chunks of store 000001", len(samples))
	}
	files, err := dataFiles(dir)
	if err != nil || len(files) != 2 {
		t.Fatalf("dataFiles = %v, %v", files, err)
	}
}

func TestMeasureSpaceCorrupt(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "000000")
	os.MkdirAll(store, 0o755)
	f, err := chunk.Create(filepath.Join(store, dataFileName), chunk.Options{Compression: chunk.LZ4, Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	p := testPayloads(t, 500)[0]
	f.Append(p)
	f.Append(p)
	f.Close()
	path := filepath.Join(store, dataFileName)
	b, _ := os.ReadFile(path)
	b[chunk.HeaderSize+chunk.ChunkHeaderSize+10] ^= 0xff // inside the first chunk
	os.WriteFile(path, b, 0o644)
	if _, _, err := MeasureSpace(dir, 0); err == nil {
		t.Fatal("a data file with a bad chunk measured without error")
	}
}

func TestProcessCPU(t *testing.T) {
	t0, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; x++ {
	}
	t1, _ := processCPU(os.Getpid())
	if t1 < t0 || t1-t0 > 10*time.Second {
		t.Fatalf("cpu time went from %v to %v (%d spins)", t0, t1, x)
	}
	if _, err := processCPU(1 << 30); err == nil {
		t.Fatal("cpu time of a missing process")
	}
}

// TestProbeCBOR: the probe decodes the payloads it is given and measures
// both directions; a payload that does not decode is an error naming it.
func TestProbeCBOR(t *testing.T) {
	g := NewGenerator(Workload{Seed: 3})
	var enc trace.ChunkEncoder
	var payloads [][]byte
	var spans int
	for range 4 {
		var batch []*trace.Span
		for len(batch) < 50 {
			batch = append(batch, g.Trace()...)
		}
		spans += len(batch)
		p, err := enc.Encode(nil, batch)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, p)
	}
	lim, err := ProbeCBOR(payloads, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if lim.EncodeMBPerS <= 0 || lim.DecodeMBPerS <= 0 || lim.EncodeSpansPerS <= 0 || lim.DecodeSpansPerS <= 0 ||
		lim.EncodeRecordsPerS <= lim.EncodeSpansPerS {
		t.Errorf("limits %+v", lim)
	}
	// Spans per MB agree between the two directions: both count the same
	// payloads.
	if a, b := lim.EncodeSpansPerS/lim.EncodeMBPerS, lim.DecodeSpansPerS/lim.DecodeMBPerS; a/b > 1.0001 || b/a > 1.0001 {
		t.Errorf("spans per MB: encode %v, decode %v", a, b)
	}
	bad := append([][]byte{}, payloads...)
	bad = append(bad, []byte{0x83, 0x00})
	if _, err := ProbeCBOR(bad, time.Millisecond); err == nil || !strings.Contains(err.Error(), "payload 4") {
		t.Errorf("bad payload: %v", err)
	}
	if _, err := ProbeCBOR(nil, time.Millisecond); err == nil {
		t.Error("no payloads: no error")
	}
}
