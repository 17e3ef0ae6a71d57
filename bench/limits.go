package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
	"golang.org/x/sys/unix"
)

// DiskLimits are the measured limits of the file system holding a
// directory.
type DiskLimits struct {
	// WriteMBPerS is sequential write throughput including the final
	// fsync: ProbeBytes written in 1 MiB writes, then fdatasync.
	WriteMBPerS float64 `json:"disk_write_mb_per_s"`
	// FsyncsPerS is how many group commits of unbatched writers the disk
	// completes per second, measured the way the daemon's committer makes
	// one: append one chunk of ProbeChunkBytes to a data file (chunk.File,
	// so into its preallocated, written zeros) and fdatasync it. It is the
	// ceiling of group commits per second, and so of a closed-loop
	// writer's requests per second.
	FsyncsPerS float64 `json:"disk_fsyncs_per_s"`
	// FsyncP50Ms is the median duration of one such round.
	FsyncP50Ms float64 `json:"disk_fsync_p50_ms"`
	// AppendFsyncsPerS and AppendFsyncP50Ms are the same for "append
	// 4 KiB at the end of a file, growing it, then fdatasync" (the probe
	// before the daemon preallocated): each sync then records a new size
	// and a new extent.
	AppendFsyncsPerS float64 `json:"disk_append_fsyncs_per_s"`
	AppendFsyncP50Ms float64 `json:"disk_append_fsync_p50_ms"`
	// ReadDirectMBPerS is sequential read throughput with O_DIRECT (1 MiB
	// reads, bypassing the page cache) of the file just written.
	ReadDirectMBPerS float64 `json:"disk_read_direct_mb_per_s"`
	// ReadDirect is false when the file system refused O_DIRECT; the read
	// then went through the page cache after evicting the file from it
	// (posix_fadvise DONTNEED).
	ReadDirect bool `json:"disk_read_direct"`
	// ProbeBytes is the size of the probe file.
	ProbeBytes int64 `json:"disk_probe_bytes"`
}

const probeBlock = 1 << 20

// ProbeChunkBytes is the size of the chunk the fsync probe appends before
// each fdatasync: about one group commit of two unbatched writers of the
// bench workload (two spans, ~600 stored bytes each).
const ProbeChunkBytes = 1200

// ProbeDisk measures the file system holding dir with a temporary file of
// size bytes (rounded up to whole MiB) and two fsync loops lasting
// fsyncFor each (4 KiB appends growing that file; ProbeChunkBytes chunks
// appended to a data file as the committer appends them). The files are
// removed before it returns.
func ProbeDisk(dir string, size int64, fsyncFor time.Duration) (DiskLimits, error) {
	var lim DiskLimits
	blocks := max((size+probeBlock-1)/probeBlock, 1)
	lim.ProbeBytes = blocks * probeBlock
	f, err := os.CreateTemp(dir, ".bench-probe-*")
	if err != nil {
		return lim, fmt.Errorf("disk probe in %s: %w", dir, err)
	}
	path := f.Name()
	defer os.Remove(path)
	defer f.Close()

	// Sequential write + fdatasync. Random bytes: nothing below may
	// compress or deduplicate them.
	buf, err := alignedBuffer(probeBlock)
	if err != nil {
		return lim, err
	}
	defer unix.Munmap(buf)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(buf); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			buf[i+j] = byte(v >> (8 * j))
		}
	}
	start := time.Now()
	for i := int64(0); i < blocks; i++ {
		buf[0], buf[1] = byte(i), byte(i>>8) // every block differs
		if _, err := f.Write(buf); err != nil {
			return lim, fmt.Errorf("disk probe: write %s at %d: %w", path, i*probeBlock, err)
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return lim, fmt.Errorf("disk probe: fdatasync %s: %w", path, err)
	}
	lim.WriteMBPerS = mbPerS(lim.ProbeBytes, time.Since(start))

	// Sequential read, bypassing the page cache.
	lim.ReadDirectMBPerS, lim.ReadDirect, err = readProbe(path, buf, lim.ProbeBytes)
	if err != nil {
		return lim, err
	}

	// Append 4 KiB + fdatasync, growing the file.
	var lat Latencies
	off := lim.ProbeBytes
	fd := int(f.Fd())
	deadline := time.Now().Add(fsyncFor)
	for n := 0; n < 5 || time.Now().Before(deadline); n++ {
		t0 := time.Now()
		if _, err := unix.Pwrite(fd, buf[:4096], off); err != nil {
			return lim, fmt.Errorf("disk probe: write %s at %d: %w", path, off, err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			return lim, fmt.Errorf("disk probe: fdatasync %s: %w", path, err)
		}
		lat.Add(time.Since(t0))
		off += 4096
	}
	lim.AppendFsyncsPerS = float64(time.Second) / float64(max(lat.Mean(), 1))
	lim.AppendFsyncP50Ms = ms(lat.Quantile(0.5))

	// A group commit as the committer makes it.
	lat, err = probeChunkSyncs(dir, buf[:ProbeChunkBytes], fsyncFor)
	if err != nil {
		return lim, err
	}
	lim.FsyncsPerS = float64(time.Second) / float64(max(lat.Mean(), 1))
	lim.FsyncP50Ms = ms(lat.Quantile(0.5))
	return lim, nil
}

// probeChunkSyncs times rounds of "append a chunk holding payload to a data
// file, fdatasync it" for at least d (and 5 rounds), with the file the
// daemon writes (chunk.File, zstd and checksums as a store's default: it
// preallocates written zeros ahead of its data, which the appends
// overwrite). The payload is random, so the chunk is about as large as it.
// The data file is removed before it returns.
func probeChunkSyncs(dir string, payload []byte, d time.Duration) (Latencies, error) {
	var lat Latencies
	tmp, err := os.MkdirTemp(dir, ".bench-probe-chunks-*")
	if err != nil {
		return lat, fmt.Errorf("disk probe in %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	opt := chunk.Options{Compression: chunk.Zstd, Checksums: true}
	path := filepath.Join(tmp, "traces.zts")
	f, err := chunk.Create(path, opt)
	if err != nil {
		return lat, fmt.Errorf("disk probe: %w", err)
	}
	defer f.Close()
	c, err := chunk.Encode(payload, opt, nil)
	if err != nil {
		return lat, fmt.Errorf("disk probe: encode a %d-byte chunk: %w", len(payload), err)
	}
	deadline := time.Now().Add(d)
	for n := 0; n < 5 || time.Now().Before(deadline); n++ {
		t0 := time.Now()
		if _, err := f.AppendEncoded(c); err != nil {
			return lat, fmt.Errorf("disk probe: %w", err)
		}
		if err := f.Sync(); err != nil {
			return lat, fmt.Errorf("disk probe: sync %s: %w", path, err)
		}
		lat.Add(time.Since(t0))
	}
	return lat, nil
}

// readProbe reads path sequentially with O_DIRECT into buf (page-aligned),
// falling back to a cold page-cache read when O_DIRECT is refused.
func readProbe(path string, buf []byte, size int64) (mbps float64, direct bool, err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	direct = err == nil
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
		}
	}
	if err != nil {
		return 0, false, fmt.Errorf("disk probe: open %s for reading: %w", path, err)
	}
	defer unix.Close(fd)
	start := time.Now()
	for off := int64(0); off < size; {
		n, err := unix.Pread(fd, buf, off)
		if err != nil {
			return 0, direct, fmt.Errorf("disk probe: read %s at %d: %w", path, off, err)
		}
		if n == 0 {
			return 0, direct, fmt.Errorf("disk probe: %s ends at %d, want %d bytes", path, off, size)
		}
		off += int64(n)
	}
	return mbPerS(size, time.Since(start)), direct, nil
}

// alignedBuffer returns n bytes of page-aligned memory (as O_DIRECT needs);
// release it with unix.Munmap.
func alignedBuffer(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("disk probe: %d-byte aligned buffer: %w", n, err)
	}
	return b, nil
}

// EvictFromPageCache asks the kernel to drop path's cached pages, so that
// the next read of it comes from the disk.
func EvictFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise %s: %w", path, err)
	}
	return nil
}

// CodecLimits are single-core LZ4 throughputs on given payloads.
type CodecLimits struct {
	// CompressMBPerS is LZ4 block compression on one core, in payload
	// (uncompressed) megabytes per second.
	CompressMBPerS float64 `json:"lz4_compress_mb_per_s"`
	// DecompressMBPerS is LZ4 block decompression on one core, in payload
	// megabytes per second.
	DecompressMBPerS float64 `json:"lz4_decompress_mb_per_s"`
	// Ratio is payload bytes over compressed bytes.
	Ratio float64 `json:"lz4_ratio"`
	// SampleBytes is the payload bytes measured (each pass).
	SampleBytes int64 `json:"lz4_sample_bytes"`
}

// ProbeLZ4 compresses and then decompresses payloads on the calling
// goroutine (locked to its thread), repeating each pass until minDur has
// elapsed, with the same compressor the store uses (pierrec/lz4 block
// format, default level).
func ProbeLZ4(payloads [][]byte, minDur time.Duration) (CodecLimits, error) {
	var lim CodecLimits
	if len(payloads) == 0 {
		return lim, errors.New("lz4 probe: no payloads")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var total, maxLen int
	for _, p := range payloads {
		total += len(p)
		maxLen = max(maxLen, len(p))
	}
	lim.SampleBytes = int64(total)
	compressed := make([][]byte, len(payloads))
	var c lz4.Compressor
	var stored int
	var bytesDone int64
	start := time.Now()
	for pass := 0; pass == 0 || time.Since(start) < minDur; pass++ {
		for i, p := range payloads {
			dst := compressed[i]
			if bound := lz4.CompressBlockBound(len(p)); cap(dst) < bound {
				dst = make([]byte, bound)
			}
			n, err := c.CompressBlock(p, dst[:cap(dst)])
			if err != nil {
				return lim, fmt.Errorf("lz4 probe: compress payload %d: %w", i, err)
			}
			if n == 0 { // incompressible: the store keeps it raw
				n = copy(dst[:cap(dst)], p)
			}
			compressed[i] = dst[:n]
			if pass == 0 {
				stored += n
			}
		}
		bytesDone += int64(total)
	}
	lim.CompressMBPerS = mbPerS(bytesDone, time.Since(start))
	lim.Ratio = float64(total) / float64(max(stored, 1))
	out := make([]byte, maxLen)
	bytesDone = 0
	start = time.Now()
	for pass := 0; pass == 0 || time.Since(start) < minDur; pass++ {
		for i, p := range payloads {
			if len(compressed[i]) == len(p) {
				copy(out, compressed[i])
				continue
			}
			n, err := lz4.UncompressBlock(compressed[i], out[:len(p)])
			if err != nil || n != len(p) {
				return lim, fmt.Errorf("lz4 probe: decompress payload %d: %d of %d bytes: %v", i, n, len(p), err)
			}
		}
		bytesDone += int64(total)
	}
	lim.DecompressMBPerS = mbPerS(bytesDone, time.Since(start))
	return lim, nil
}

func mbPerS(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// CBORLimits are single-core throughputs of the chunk payload codec (the
// store's CBOR encoding of spans, package trace) on given payloads: what
// one core can turn into or out of chunks, whatever the transport.
type CBORLimits struct {
	// EncodeMBPerS is trace.ChunkEncoder.Encode of the payloads' spans on
	// one core, in payload megabytes per second; EncodeSpansPerS the same
	// in spans and EncodeRecordsPerS in method-call records.
	EncodeMBPerS      float64 `json:"cbor_encode_mb_per_s"`
	EncodeSpansPerS   float64 `json:"cbor_encode_spans_per_s"`
	EncodeRecordsPerS float64 `json:"cbor_encode_records_per_s"`
	// DecodeMBPerS is trace.DecodeChunk (whole spans with their record
	// trees) on one core; DecodeSpansPerS the same in spans.
	DecodeMBPerS    float64 `json:"cbor_decode_mb_per_s"`
	DecodeSpansPerS float64 `json:"cbor_decode_spans_per_s"`
}

// ProbeCBOR decodes payloads once (untimed) and then times, on the calling
// goroutine locked to its thread, re-encoding their spans and decoding the
// payloads, repeating each pass until minDur has elapsed.
func ProbeCBOR(payloads [][]byte, minDur time.Duration) (CBORLimits, error) {
	var lim CBORLimits
	if len(payloads) == 0 {
		return lim, errors.New("cbor probe: no payloads")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	decoded := make([][]*trace.Span, len(payloads))
	var total int64
	var spans, records int64
	for i, p := range payloads {
		sp, err := trace.DecodeChunk(p, trace.Limits{})
		if err != nil {
			return lim, fmt.Errorf("cbor probe: payload %d: %w", i, err)
		}
		decoded[i] = sp
		total += int64(len(p))
		spans += int64(len(sp))
		for _, s := range sp {
			records += s.Recs
		}
	}
	var enc trace.ChunkEncoder
	var buf []byte
	passes := 0
	start := time.Now()
	for ; passes == 0 || time.Since(start) < minDur; passes++ {
		for i, sp := range decoded {
			var err error
			if buf, err = enc.Encode(buf[:0], sp); err != nil {
				return lim, fmt.Errorf("cbor probe: encode payload %d: %w", i, err)
			}
		}
	}
	d := time.Since(start)
	lim.EncodeMBPerS = mbPerS(total*int64(passes), d)
	lim.EncodeSpansPerS = float64(spans*int64(passes)) / d.Seconds()
	lim.EncodeRecordsPerS = float64(records*int64(passes)) / d.Seconds()
	passes = 0
	start = time.Now()
	for ; passes == 0 || time.Since(start) < minDur; passes++ {
		for i, p := range payloads {
			if _, err := trace.DecodeChunk(p, trace.Limits{}); err != nil {
				return lim, fmt.Errorf("cbor probe: decode payload %d: %w", i, err)
			}
		}
	}
	d = time.Since(start)
	lim.DecodeMBPerS = mbPerS(total*int64(passes), d)
	lim.DecodeSpansPerS = float64(spans*int64(passes)) / d.Seconds()
	return lim, nil
}
