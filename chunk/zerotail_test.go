package chunk

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScannerZeroTail: crafted files that end in zeros. All zeros from a
// chunk boundary to the end are the end of the data (a preallocated tail);
// a torn chunk followed by zeros is a torn tail; zeros followed by any
// non-zero byte are damage, as before.
func TestScannerZeroTail(t *testing.T) {
	for _, opt := range allOptions {
		im := buildImage(t, opt, testPayloads(t, 6, 11))
		last := len(im.offs) - 1
		end := int64(len(im.data))
		lastChunk := im.data[im.offs[last]:end]
		cases := []struct {
			name string
			data []byte
			// wantChunks: how many of im's chunks are returned.
			wantChunks int
			// wantZero: the zero tail's offset and length (0: none).
			wantZeroOff, wantZeroLen int64
			// wantBad: the bad regions' offsets (in order), and whether
			// the last one reaches the end (a torn tail).
			wantBad  []int64
			wantTorn bool
			// wantChunkAfter: a chunk is found after the damage.
			wantChunkAfter bool
		}{
			{name: "zero tail", data: slices.Concat(im.data, make([]byte, 1<<20)),
				wantChunks: len(im.offs), wantZeroOff: end, wantZeroLen: 1 << 20},
			{name: "zero tail shorter than a chunk header", data: slices.Concat(im.data, make([]byte, 5)),
				wantChunks: len(im.offs), wantZeroOff: end, wantZeroLen: 5},
			{name: "zero tail past the scan window", data: slices.Concat(im.data, make([]byte, scanWindow+100)),
				wantChunks: len(im.offs), wantZeroOff: end, wantZeroLen: scanWindow + 100},
			{name: "no data, only zeros", data: slices.Concat(im.data[:HeaderSize], make([]byte, 4096)),
				wantChunks: 0, wantZeroOff: HeaderSize, wantZeroLen: 4096},
			{name: "torn chunk then zeros",
				data:       slices.Concat(im.data[:im.offs[last]], lastChunk[:len(lastChunk)/2], make([]byte, len(lastChunk)/2+4096)),
				wantChunks: last, wantBad: []int64{im.offs[last]}, wantTorn: true},
			{name: "torn chunk header then zeros",
				data:       slices.Concat(im.data[:im.offs[last]], lastChunk[:6], make([]byte, 4096)),
				wantChunks: last, wantBad: []int64{im.offs[last]}, wantTorn: true},
			{name: "zeros then garbage", data: slices.Concat(im.data, make([]byte, 4096), []byte("garbage")),
				wantChunks: len(im.offs), wantBad: []int64{end}, wantTorn: true},
			{name: "zeros then a byte", data: slices.Concat(im.data, make([]byte, scanWindow+7), []byte{1}, make([]byte, 100)),
				wantChunks: len(im.offs), wantBad: []int64{end}, wantTorn: true},
			{name: "zeros then a chunk",
				data:       slices.Concat(im.data[:im.offs[last]], make([]byte, 4096), lastChunk, make([]byte, 4096)),
				wantChunks: last, wantBad: []int64{im.offs[last]}, wantChunkAfter: true,
				wantZeroOff: im.offs[last] + 4096 + int64(len(lastChunk)), wantZeroLen: 4096},
		}
		for _, c := range cases {
			if (opt.Compression == None || !opt.Checksums) && strings.HasPrefix(c.name, "torn chunk") {
				// Without a checksum, or uncompressed, a chunk torn inside
				// zeros may read as a whole one: such files never
				// preallocate (File.preallocate).
				continue
			}
			r := scanBytes(c.data, opt, nil)
			if r.err != nil {
				t.Fatalf("%v %s: %v", opt, c.name, r.err)
			}
			checkTiling(t, c.data, opt, r)
			got := r.offs
			if c.wantChunkAfter {
				if len(got) != c.wantChunks+1 {
					t.Fatalf("%v %s: chunks %v, want %d and one after the damage", opt, c.name, got, c.wantChunks)
				}
				got = got[:c.wantChunks]
			}
			if !slices.Equal(got, im.offs[:c.wantChunks]) {
				t.Fatalf("%v %s: chunks %v, want %v", opt, c.name, got, im.offs[:c.wantChunks])
			}
			if r.zeroOff != c.wantZeroOff || r.zeroLen != c.wantZeroLen {
				t.Fatalf("%v %s: zero tail [%d,+%d), want [%d,+%d)", opt, c.name, r.zeroOff, r.zeroLen, c.wantZeroOff, c.wantZeroLen)
			}
			var bad []int64
			for _, b := range r.bad {
				bad = append(bad, b.Offset)
			}
			if !slices.Equal(bad, c.wantBad) {
				t.Fatalf("%v %s: bad regions %v, want at %v", opt, c.name, r.bad, c.wantBad)
			}
			if n := len(r.bad); n > 0 {
				torn := r.bad[n-1].Offset+r.bad[n-1].Length >= int64(len(c.data))
				if torn != c.wantTorn {
					t.Fatalf("%v %s: last bad region %v reaches the end: %v, want %v", opt, c.name, r.bad[n-1], torn, c.wantTorn)
				}
			}
			if c.wantZeroLen > 0 && !c.wantChunkAfter && r.end != c.wantZeroOff {
				t.Fatalf("%v %s: Offset() %d after the scan, want the end of the data %d", opt, c.name, r.end, c.wantZeroOff)
			}
		}
	}
}

// TestFilePreallocates: appends extend the file by PreallocStep ahead of
// the data; a copy of the file taken while it is open (what a kill -9
// leaves) opens with its zero tail, scans to the right end, takes SetEnd
// and further appends there; Close and Seal leave no zero tail.
func TestFilePreallocates(t *testing.T) {
	opt := Options{Compression: Zstd, Checksums: true}
	dir := t.TempDir()
	path := filepath.Join(dir, "traces.zts")
	f, err := Create(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	payloads := testPayloads(t, 10, 3)
	var offs []int64
	for _, p := range payloads {
		off, err := f.Append(p)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() <= f.Size() || st.Size() > f.Size()+PreallocStep {
			t.Fatalf("after an append: file %d bytes, data %d: want a zero tail of at most %d", st.Size(), f.Size(), PreallocStep)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	end := f.Size()
	// What a crash leaves: the file as it is on disk, tail included.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) <= end || !allZero(b[end:]) {
		t.Fatalf("file of %d bytes, data ends at %d: want zeros after it", len(b), end)
	}
	crashed := filepath.Join(dir, "crashed.zts")
	if err := os.WriteFile(crashed, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != end {
		t.Fatalf("after Close the file has %d bytes, want %d (no zero tail)", st.Size(), end)
	}

	g, err := Open(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Size() != int64(len(b)) || g.ZeroTail() == 0 || g.Size()-g.ZeroTail() > end {
		t.Fatalf("Open: size %d, zero tail %d; data ends at %d", g.Size(), g.ZeroTail(), end)
	}
	sc := g.Scanner()
	n := 0
	for sc.Next() {
		n++
	}
	zoff, zlen := sc.ZeroTail()
	if n != len(payloads) || len(sc.BadRegions()) != 0 || zoff != end || zoff+zlen != int64(len(b)) {
		t.Fatalf("scan: %d chunks, bad %v, zero tail [%d,+%d); want %d chunks and a zero tail at %d", n, sc.BadRegions(), zoff, zlen, len(payloads), end)
	}
	// SetEnd refuses an end with data after it.
	if err := g.SetEnd(offs[len(offs)-1]); err == nil {
		t.Fatal("SetEnd before the last chunk succeeded")
	}
	if err := g.SetEnd(zoff); err != nil {
		t.Fatal(err)
	}
	if g.Size() != end || g.ZeroTail() != 0 {
		t.Fatalf("after SetEnd: size %d, zero tail %d", g.Size(), g.ZeroTail())
	}
	off, err := g.Append(payloads[0])
	if err != nil || off != end {
		t.Fatalf("append after SetEnd at %d: %v (want offset %d)", off, err, end)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, o := range append(offs, off) {
		p, _, err := g.ReadChunk(o)
		if err != nil || !bytes.Equal(p, payloads[i%len(payloads)]) {
			t.Fatalf("chunk %d at %d: %v", i, o, err)
		}
	}
	master, err := g.Seal()
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(crashed); st.Size() != g.Size() {
		t.Fatalf("sealed file has %d bytes, data %d", st.Size(), g.Size())
	}
	if got, err := g.VerifyMaster(); err != nil || got != master {
		t.Fatalf("VerifyMaster: %08x, %v", got, err)
	}
}

// TestTruncateTailZeroTail: cutting a torn chunk followed by a zero tail
// keeps all the cut bytes in .broken, as any torn tail; cutting a zero tail
// alone keeps nothing and needs no .broken file.
func TestTruncateTailZeroTail(t *testing.T) {
	opt := Options{Compression: LZ4, Checksums: true}
	im := buildImage(t, opt, testPayloads(t, 4, 5))
	last := len(im.offs) - 1
	for _, torn := range [][]byte{im.data[im.offs[last] : im.offs[last]+20], nil} {
		cut := im.offs[last]
		data := slices.Concat(im.data[:cut], torn, make([]byte, 8192))
		dir := t.TempDir()
		path := filepath.Join(dir, "traces.zts")
		if err := os.WriteFile(path, data, 0o640); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		broken := filepath.Join(dir, "traces.zts.broken")
		arg := broken
		if torn == nil {
			arg = "" // zeros only: no .broken needed
		}
		moved, err := f.TruncateTail(cut, arg)
		if err != nil {
			t.Fatal(err)
		}
		kept, _ := os.ReadFile(broken)
		if want := data[cut:]; torn == nil {
			if moved != 0 || kept != nil {
				t.Fatalf("zero tail: moved %d bytes, .broken %d bytes, want none", moved, len(kept))
			}
		} else if moved != int64(len(want)) || !bytes.Equal(kept, want) {
			t.Fatalf("torn tail: moved %d bytes, want the %d cut", moved, len(want))
		}
		if st, _ := os.Stat(path); st.Size() != cut || f.Size() != cut {
			t.Fatalf("after the cut: file %d bytes, Size %d, want %d", st.Size(), f.Size(), cut)
		}
		f.Close()
	}
}

// TestNoPreallocationWithoutChecksums: an uncompressed file or one without
// checksums grows with its appends (a chunk torn inside zeros could pass
// for whole there).
func TestNoPreallocationWithoutChecksums(t *testing.T) {
	for _, opt := range allOptions {
		path := filepath.Join(t.TempDir(), "traces.zts")
		f, err := Create(path, opt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Append(testPayloads(t, 1, 1)[0]); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(path)
		want := opt.Checksums && opt.Compression != None
		if got := st.Size() > f.Size(); got != want {
			t.Fatalf("%v: file %d bytes, data %d: preallocated %v, want %v", opt, st.Size(), f.Size(), got, want)
		}
		f.Close()
	}
}
