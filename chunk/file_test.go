package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

func TestFileRoundTrip(t *testing.T) {
	payloads := testPayloads(t, 30, 20)
	payloads = append(payloads, []byte{}, randomBytes(rand.New(rand.NewPCG(1, 1)), 5000))
	for _, opt := range allOptions {
		t.Run(opt.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "traces.zts")
			f, err := Create(path, opt)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Create(path, opt); !errors.Is(err, os.ErrExist) {
				t.Fatalf("second Create: %v, want ErrExist", err)
			}
			var offs []int64
			for _, p := range payloads {
				before := f.Size()
				off, err := f.Append(p)
				if err != nil {
					t.Fatal(err)
				}
				if off != before || f.Size() <= off {
					t.Fatalf("Append at %d returned %d, size now %d", before, off, f.Size())
				}
				offs = append(offs, off)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			check := func(f *File) {
				t.Helper()
				for i, off := range offs {
					got, next, err := f.ReadChunk(off)
					if err != nil {
						t.Fatalf("ReadChunk(%d): %v", off, err)
					}
					if !bytes.Equal(got, payloads[i]) {
						t.Fatalf("ReadChunk(%d): payload differs", off)
					}
					if want := f.Size(); i+1 < len(offs) {
						want = offs[i+1]
						if next != want {
							t.Fatalf("ReadChunk(%d): next %d, want %d", off, next, want)
						}
					} else if next != want {
						t.Fatalf("last chunk: next %d, want size %d", next, want)
					}
				}
			}
			check(f)
			size := f.Size()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.ReadChunk(offs[0]); !errors.Is(err, ErrClosed) {
				t.Fatalf("ReadChunk after Close: %v", err)
			}

			raw, _ := os.ReadFile(path)
			if int64(len(raw)) != size {
				t.Fatalf("file has %d bytes, Size was %d", len(raw), size)
			}
			if h, err := ParseHeader(raw); err != nil || h.Options != opt || h.Master != 0 {
				t.Fatalf("header %+v %v", h, err)
			}
			f, err = Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Options() != opt || f.Size() != size || f.Sealed() {
				t.Fatalf("reopened: options %v size %d sealed %v", f.Options(), f.Size(), f.Sealed())
			}
			check(f)
			r := scanBytes(raw, opt, nil)
			if !slices.Equal(r.offs, offs) || len(r.bad) != 0 {
				t.Fatalf("scan: %v %v", r.offs, r.bad)
			}
		})
	}
}

func TestReadChunkOutOfRange(t *testing.T) {
	f, err := Create(filepath.Join(t.TempDir(), "traces.zts"), Options{LZ4, true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off, _ := f.Append([]byte("hello, hello, hello, hello, hello"))
	for _, bad := range []int64{-1, 0, 15, f.Size(), f.Size() + 100} {
		if _, _, err := f.ReadChunk(bad); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("ReadChunk(%d): %v, want ErrOutOfRange", bad, err)
		}
	}
	// An offset inside a chunk: its bytes are not a chunk header.
	_, _, err = f.ReadChunk(off + 3)
	if ce := asCorruption(t, err); ce.Offset != off+3 {
		t.Errorf("ReadChunk inside a chunk: %v", err)
	}
}

func TestOpenShortAndBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := appendHeader(nil, Header{Options: Options{Zlib, true}})
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTornHeader},
		{"7 bytes", header[:7], ErrTornHeader},
		{"15 bytes", header[:15], ErrTornHeader},
		{"bad magic", append([]byte("ZTS1"), header[4:]...), ErrBadHeader},
		{"unknown flags", append(append([]byte("ZTS0"), 0, 0, 1, 0x12), header[8:]...), ErrBadHeader},
	} {
		p := write(tc.name, tc.b)
		if _, err := Open(p); !errors.Is(err, tc.want) {
			t.Errorf("%s: Open: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing): %v", err)
	}

	// OpenOrCreate writes the header into an empty or missing file, keeps an
	// existing header and refuses a torn one.
	opt := Options{LZ4, true}
	for _, p := range []string{write("empty2", nil), filepath.Join(dir, "new")} {
		f, err := OpenOrCreate(p, opt)
		if err != nil {
			t.Fatalf("OpenOrCreate(%s): %v", p, err)
		}
		f.Close()
		if b, _ := os.ReadFile(p); !bytes.Equal(b, appendHeader(nil, Header{Options: opt})) {
			t.Fatalf("OpenOrCreate(%s) wrote %x", p, b)
		}
	}
	f, err := OpenOrCreate(write("zlib", header), opt)
	if err != nil || f.Options() != (Options{Zlib, true}) {
		t.Fatalf("OpenOrCreate of an existing zlib file: %v %v", f.Options(), err)
	}
	f.Close()
	if _, err := OpenOrCreate(write("torn", header[:9]), opt); !errors.Is(err, ErrTornHeader) {
		t.Fatalf("OpenOrCreate(torn): %v", err)
	}
}

func TestReinitialize(t *testing.T) {
	dir := t.TempDir()
	path, broken := filepath.Join(dir, "traces.zts"), filepath.Join(dir, "traces.zts.broken")
	torn := []byte("ZTS0\x00\x00")
	os.WriteFile(path, torn, 0o644)
	f, moved, err := Reinitialize(path, Options{Zlib, true}, broken)
	if err != nil || moved != int64(len(torn)) {
		t.Fatalf("Reinitialize: moved %d, %v", moved, err)
	}
	if b, _ := os.ReadFile(broken); !bytes.Equal(b, torn) {
		t.Fatalf(".broken holds %q", b)
	}
	if _, err := f.Append([]byte("after reinit")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A file that may hold a chunk is refused and left alone.
	before, _ := os.ReadFile(path)
	if _, _, err := Reinitialize(path, Options{None, false}, broken); err == nil {
		t.Fatal("Reinitialize of a file with a chunk succeeded")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("refused Reinitialize changed the file")
	}
}

func TestTruncateTail(t *testing.T) {
	dir := t.TempDir()
	path, broken := filepath.Join(dir, "traces.zts"), filepath.Join(dir, "traces.zts.broken")
	opt := Options{LZ4, true}
	payloads := testPayloads(t, 5, 21)
	f, err := Create(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads[:4] {
		f.Append(p)
	}
	f.Close()

	// Simulate a crash in the middle of writing the fifth chunk.
	c, _ := Encode(payloads[4], opt, nil)
	torn := c.Bytes()[:c.Len()/2]
	raw, _ := os.ReadFile(path)
	tornAt := int64(len(raw))
	os.WriteFile(path, append(raw, torn...), 0o644)

	f, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Scanner()
	n := 0
	for s.Next() {
		n++
	}
	bad := s.BadRegions()
	if n != 4 || len(bad) != 1 || bad[0].Reason != Truncated || bad[0].Offset != tornAt {
		t.Fatalf("scan: %d chunks, bad %v", n, bad)
	}
	moved, err := f.TruncateTail(bad[0].Offset, broken)
	if err != nil || moved != int64(len(torn)) || f.Size() != tornAt {
		t.Fatalf("TruncateTail: moved %d, size %d, %v", moved, f.Size(), err)
	}
	if b, _ := os.ReadFile(broken); !bytes.Equal(b, torn) {
		t.Fatal(".broken does not hold the torn tail")
	}
	off, err := f.Append(payloads[4])
	if err != nil || off != tornAt {
		t.Fatalf("Append after TruncateTail at %d: %v", off, err)
	}
	raw, _ = os.ReadFile(path)
	if r := scanBytes(raw, opt, nil); len(r.offs) != 5 || len(r.bad) != 0 {
		t.Fatalf("after repair: %v %v", r.offs, r.bad)
	}
	// A second cut appends to the same .broken file.
	if moved, err := f.TruncateTail(off, broken); err != nil || moved != c.Len() {
		t.Fatalf("second TruncateTail: %d %v", moved, err)
	}
	if b, _ := os.ReadFile(broken); !bytes.Equal(b, append(slices.Clone(torn), c.Bytes()...)) {
		t.Fatal(".broken was not appended to")
	}
	if moved, err := f.TruncateTail(f.Size(), ""); err != nil || moved != 0 {
		t.Fatalf("no-op TruncateTail: %d %v", moved, err)
	}
	if _, err := f.TruncateTail(10, broken); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("TruncateTail into the header: %v", err)
	}
	if _, err := f.TruncateTail(HeaderSize, ""); err == nil {
		t.Fatal("TruncateTail without a .broken path discarded bytes")
	}
}

func TestSealAndVerifyMaster(t *testing.T) {
	dir := t.TempDir()
	opt := Options{Zlib, true}
	payloads := testPayloads(t, 12, 22)
	build := func(name string) (*File, string) {
		p := filepath.Join(dir, name)
		f, err := Create(p, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, pl := range payloads {
			if _, err := f.Append(pl); err != nil {
				t.Fatal(err)
			}
		}
		return f, p
	}

	f, pathA := build("a.zts")
	if _, err := f.VerifyMaster(); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("VerifyMaster of an open file: %v", err)
	}
	master, err := f.Seal()
	if err != nil {
		t.Fatal(err)
	}
	// The master checksum is the CRC-32 of all chunk headers in file order.
	raw, _ := os.ReadFile(pathA)
	im := buildImage(t, opt, payloads)
	var headers []byte
	for _, off := range im.offs {
		headers = append(headers, raw[off:off+ChunkHeaderSize]...)
	}
	if want := crc32.ChecksumIEEE(headers); master != want || binary.BigEndian.Uint32(raw[8:12]) != want {
		t.Fatalf("master %08x, header %08x, want %08x", master, binary.BigEndian.Uint32(raw[8:12]), want)
	}
	if got, err := f.VerifyMaster(); err != nil || got != master {
		t.Fatalf("VerifyMaster: %08x %v", got, err)
	}
	if _, err := f.Append([]byte("late")); !errors.Is(err, ErrSealed) {
		t.Fatalf("Append to a sealed file: %v", err)
	}
	if again, err := f.Seal(); err != nil || again != master {
		t.Fatalf("second Seal: %08x %v", again, err)
	}
	f.Close()

	// Sealing a reopened file walks the headers and gets the same value.
	g, pathB := build("b.zts")
	g.Close()
	g, err = Open(pathB)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := g.Seal(); err != nil || m != master {
		t.Fatalf("Seal after reopen: %08x %v, want %08x", m, err, master)
	}
	g.Close()

	// Reopened sealed files stay sealed and verify.
	f, err = Open(pathA)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Sealed() || f.MasterChecksum() != master {
		t.Fatalf("reopened: sealed %v master %08x", f.Sealed(), f.MasterChecksum())
	}
	if _, err := f.Append([]byte("late")); !errors.Is(err, ErrSealed) {
		t.Fatalf("Append to a reopened sealed file: %v", err)
	}
	f.Close()
	if _, err := VerifyMaster(bytes.NewReader(raw), int64(len(raw))); err != nil {
		t.Fatalf("VerifyMaster(reader): %v", err)
	}

	// Any change to a chunk header, or to the stored master, is detected.
	for name, mutate := range map[string]func([]byte){
		"chunk checksum field": func(b []byte) { b[im.offs[3]+13] ^= 1 },
		"master field":         func(b []byte) { b[9] ^= 0x80 },
		"chunk swapped": func(b []byte) {
			x, y := b[im.offs[1]:im.offs[2]], b[im.offs[2]:im.offs[3]]
			copy(b[im.offs[1]:], slices.Concat(y, x))
		},
	} {
		b := slices.Clone(raw)
		mutate(b)
		if _, err := VerifyMaster(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrMasterMismatch) {
			t.Errorf("%s changed: VerifyMaster %v", name, err)
		}
	}
	b := slices.Clone(raw)
	b[im.offs[5]+2] ^= 1 // magic: the headers no longer tile the file
	if _, err := VerifyMaster(bytes.NewReader(b), int64(len(b))); asCorruption(t, err).Offset != im.offs[5] {
		t.Errorf("bad magic: VerifyMaster %v", err)
	}
	if _, err := VerifyMaster(bytes.NewReader(raw[:len(raw)-1]), int64(len(raw)-1)); asCorruption(t, err).Reason != Truncated {
		t.Errorf("truncated: VerifyMaster %v", err)
	}

	// Cutting a sealed file unseals it.
	f, _ = Open(pathA)
	defer f.Close()
	if _, err := f.TruncateTail(im.offs[11], filepath.Join(dir, "a.broken")); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile(pathA)
	if f.Sealed() || f.MasterChecksum() != 0 || binary.BigEndian.Uint32(raw[8:12]) != 0 {
		t.Fatalf("after TruncateTail: sealed %v master %08x", f.Sealed(), f.MasterChecksum())
	}
	for _, p := range payloads[11:] {
		if _, err := f.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := f.Seal(); err != nil || m != master {
		t.Fatalf("reseal: %08x %v, want %08x", m, err, master)
	}
}

// TestAppendFaults injects ENOSPC with short writes and failing truncates.
func TestAppendFaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "traces.zts")
	fsys := &faultFS{}
	opt := Options{LZ4, true}
	f, err := CreateFS(fsys, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ff := fsys.files[0]
	payloads := testPayloads(t, 6, 23)
	f.Append(payloads[0])
	size := f.Size()

	fileSize := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	for _, limit := range []int{0, 1, 15, 16, 100} {
		ff.set(syscall.ENOSPC, limit, nil)
		if _, err := f.Append(payloads[1]); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("short write of %d bytes: %v, want ENOSPC", limit, err)
		}
		if f.Size() != size || fileSize() != size {
			t.Fatalf("after a failed append: Size %d, file %d, want %d", f.Size(), fileSize(), size)
		}
	}

	// The truncate back fails too: the next append repairs the tail first.
	ff.set(syscall.EIO, 40, syscall.EIO)
	if _, err := f.Append(payloads[2]); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with failing truncate: %v", err)
	}
	if f.Size() != size || fileSize() != size+40 {
		t.Fatalf("Size %d (want %d), file %d (want %d)", f.Size(), size, fileSize(), size+40)
	}
	ff.set(nil, 0, syscall.EIO)
	if _, err := f.Append(payloads[2]); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append while the tail cannot be truncated: %v", err)
	}
	ff.set(nil, 0, nil)
	off, err := f.Append(payloads[3])
	if err != nil || off != size {
		t.Fatalf("append after the faults: %d %v, want offset %d", off, err, size)
	}
	if fileSize() != f.Size() {
		t.Fatalf("file %d bytes, Size %d", fileSize(), f.Size())
	}
	raw, _ := os.ReadFile(path)
	r := scanBytes(raw, opt, nil)
	if len(r.bad) != 0 || len(r.offs) != 2 || !bytes.Equal(r.payloads[1], payloads[3]) {
		t.Fatalf("after the faults: chunks %v bad %v", r.offs, r.bad)
	}
}

func TestAppendEncodedChecksOptions(t *testing.T) {
	f, err := Create(filepath.Join(t.TempDir(), "traces.zts"), Options{LZ4, true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, _ := Encode([]byte("payload"), Options{Zlib, true}, nil)
	if _, err := f.AppendEncoded(c); err == nil {
		t.Fatal("AppendEncoded accepted a chunk encoded for other options")
	}
	if _, err := f.AppendEncoded(EncodedChunk{}); err == nil {
		t.Fatal("AppendEncoded accepted an empty chunk")
	}
	c, _ = Encode([]byte("payload"), Options{LZ4, true}, nil)
	off, err := f.AppendEncoded(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := f.ReadChunk(off); err != nil || string(got) != "payload" {
		t.Fatalf("ReadChunk: %q %v", got, err)
	}
}

// TestConcurrentReadDuringAppend reads published chunks while one writer
// appends and encoders compress in parallel (run with -race).
func TestConcurrentReadDuringAppend(t *testing.T) {
	for _, opt := range []Options{{LZ4, true}, {Zlib, false}, {Zstd, true}} {
		f, err := Create(filepath.Join(t.TempDir(), "traces.zts"), opt)
		if err != nil {
			t.Fatal(err)
		}
		const n = 600
		payloads := make([][]byte, n)
		for i := range payloads {
			payloads[i] = cborTrace(rand.New(rand.NewPCG(uint64(i), 9)), 500+i%700)
		}
		payload := func(i int) []byte { return payloads[i] }
		var (
			mu    sync.Mutex
			offs  []int64
			done  atomic.Bool
			wg    sync.WaitGroup
			reads atomic.Int64
		)
		errs := make(chan error, 8)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 0))
				for !done.Load() {
					mu.Lock()
					k := len(offs)
					var off int64
					i := 0
					if k > 0 {
						i = rng.IntN(k)
						off = offs[i]
					}
					mu.Unlock()
					if k == 0 {
						continue
					}
					got, _, err := f.ReadChunk(off)
					if err != nil || !bytes.Equal(got, payload(i)) {
						errs <- errors.Join(errors.New("concurrent read mismatch"), err)
						return
					}
					reads.Add(1)
				}
			}()
		}
		// Encoders run outside the append lock, as storedir does.
		encoded := make(chan EncodedChunk, 16)
		go func() {
			for i := range n {
				c, err := Encode(payload(i), opt, nil)
				if err != nil {
					panic(err)
				}
				encoded <- c
			}
			close(encoded)
		}()
		for c := range encoded {
			off, err := f.AppendEncoded(c)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			offs = append(offs, off)
			mu.Unlock()
			if len(offs)%100 == 0 {
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
		}
		done.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if reads.Load() == 0 {
			t.Fatal("no concurrent reads happened")
		}
		f.Close()
	}
}
