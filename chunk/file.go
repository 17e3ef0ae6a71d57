package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// OSFile is the part of *os.File a data file needs. It is the seam for fault
// injection: an OSFile may fail or write short (ENOSPC, EIO) at will.
type OSFile interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Close() error
}

// Allocator is implemented by an OSFile that can preallocate: Allocate
// makes the file at least off+n bytes long, the new bytes zeros whose
// blocks are allocated (fallocate mode 0) and, where it can, written (so
// that data written over them later changes no extent). It fails wrapping
// errors.ErrUnsupported when the file system cannot, and ENOSPC when the
// disk has no room. A File preallocates its zero tail with it.
type Allocator interface {
	Allocate(off, n int64) error
}

// DataSyncer is implemented by an OSFile that can flush its data and only
// the metadata needed to read it back (fdatasync). File.Sync uses it.
type DataSyncer interface {
	Datasync() error
}

// FS opens files and syncs directories. OSFS is the real file system; tests
// wrap it to inject faults.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (OSFile, error)
	// SyncDir fsyncs a directory, making file creations in it durable.
	SyncDir(dir string) error
}

// OSFS is the FS of the operating system. Its files are Allocators and
// DataSyncers (on Linux: fallocate, fdatasync).
type OSFS struct{}

// OpenFile calls os.OpenFile.
func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (OSFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// PreallocStep is how far past the end of its data a File extends itself with
// fallocate and written zeros (Allocator) when an append needs room: appends
// then overwrite zeros already on disk without changing the file size or its
// extents, and the group commit's fdatasync has no metadata to record (on ext4
// about 30% cheaper than an fsync of an append). So an open data file may end
// in up to PreallocStep zero bytes after its last chunk: the zero tail, which
// every reader takes as the end of the data (Scanner). Seal and Close cut it.
// Only a compressed file with checksums preallocates: its CRC and sizes tell a
// chunk written partly into the zeros (a crash) from a whole one.
const PreallocStep = 1 << 20

// zeroTailScan bounds how far back Open looks for the zero tail.
const zeroTailScan = 2 * PreallocStep

// SyncDir opens dir and fsyncs it.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// filePerm is the mode of new data files and .broken files: traces may hold
// sensitive data, so they are not world-readable.
const filePerm = 0o640

// File is an open data file: appends at the logical end, random reads at any
// chunk offset. ReadChunk, Size, Options, MasterChecksum and Scanner may be
// called at any time, concurrently with appends; Sync may run concurrently
// with appends (group commit); Append, AppendEncoded, TruncateTail, Seal and
// Close serialise among themselves.
type File struct {
	path string
	fsys FS
	osf  OSFile
	opt  Options

	size    atomic.Int64  // logical end: next append offset
	master  atomic.Uint32 // master checksum as in the header
	closed  atomic.Bool
	pending atomic.Bool // appends not yet covered by a successful Sync

	mu sync.Mutex // serialises writers; guards the fields below
	// sealed: the file refuses appends (the header carries a master checksum).
	sealed bool
	// headersCRC is the running CRC-32 of all chunk headers appended since
	// the file was created; valid only while headersKnown.
	headersCRC   uint32
	headersKnown bool
	// tailDirty: a failed append could not be truncated away; the next
	// writer must truncate to size first.
	tailDirty bool
	// alloc is the length of the file on disk as far as the writer knows:
	// size plus the zero tail it preallocated (or found at Open).
	alloc int64
	// noPrealloc: the file cannot preallocate (not an Allocator, or the
	// file system refused); appends grow the file.
	noPrealloc bool
	// zeroTail is the length of the run of zero bytes that ended the file
	// when Open found it (at most zeroTailScan; 0 once SetEnd or
	// TruncateTail set the end).
	zeroTail atomic.Int64

	bufs sync.Pool // *[]byte scratch for Append and ReadChunk
	// leadHint is the moving average of the sizes of the LZ4 lead frames
	// ReadFrames met, from which it sizes the read of a chunk's header and
	// lead frame (leadPrefix, nextLeadHint); 0 until the first.
	leadHint atomic.Int64
}

// Create creates a new data file (it must not exist), writes its header and
// fsyncs the file and its directory.
func Create(path string, opt Options) (*File, error) { return CreateFS(OSFS{}, path, opt) }

// CreateFS is Create on fsys.
func CreateFS(fsys FS, path string, opt Options) (*File, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	osf, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return nil, fmt.Errorf("chunk: create data file: %w", err)
	}
	f, err := initialise(fsys, path, osf, opt)
	if err != nil {
		osf.Close()
		return nil, err
	}
	return f, nil
}

// Open opens an existing data file for appends and reads. The options come
// from its header. Open does not scan the chunks: a torn tail left by a crash
// stays until recovery cuts it with TruncateTail. A file shorter than the
// header yields an error wrapping ErrTornHeader (see Reinitialize); a header
// with a wrong magic, unknown flags or a non-zero reserved field, ErrBadHeader.
func Open(path string) (*File, error) { return OpenFS(OSFS{}, path) }

// OpenFS is Open on fsys.
func OpenFS(fsys FS, path string) (*File, error) {
	osf, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("chunk: open data file: %w", err)
	}
	f, err := openExisting(fsys, path, osf)
	if err != nil {
		osf.Close()
		return nil, err
	}
	return f, nil
}

// OpenOrCreate opens the data file at path, creating it with opt when it does
// not exist or is empty. The options of an existing header win over opt.
func OpenOrCreate(path string, opt Options) (*File, error) {
	return OpenOrCreateFS(OSFS{}, path, opt)
}

// OpenOrCreateFS is OpenOrCreate on fsys.
func OpenOrCreateFS(fsys FS, path string, opt Options) (*File, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	osf, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("chunk: open data file: %w", err)
	}
	st, err := osf.Stat()
	var f *File
	switch {
	case err != nil:
		err = fmt.Errorf("chunk: stat %s: %w", path, err)
	case st.Size() == 0:
		f, err = initialise(fsys, path, osf, opt)
	default:
		f, err = openExisting(fsys, path, osf)
	}
	if err != nil {
		osf.Close()
		return nil, err
	}
	return f, nil
}

// Reinitialize repairs a data file that holds no complete chunk (it is
// shorter than HeaderSize+ChunkHeaderSize bytes, e.g. a torn header after a
// crash during creation): its bytes are appended to brokenPath and fsynced,
// then the file is truncated and a fresh header with opt is written and
// fsynced. It refuses a file that could hold a chunk. It returns the open
// file and the number of bytes moved to brokenPath.
func Reinitialize(path string, opt Options, brokenPath string) (*File, int64, error) {
	return ReinitializeFS(OSFS{}, path, opt, brokenPath)
}

// ReinitializeFS is Reinitialize on fsys.
func ReinitializeFS(fsys FS, path string, opt Options, brokenPath string) (*File, int64, error) {
	if err := opt.validate(); err != nil {
		return nil, 0, err
	}
	osf, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, 0, fmt.Errorf("chunk: reinitialise: %w", err)
	}
	f, moved, err := reinitialise(fsys, path, osf, opt, brokenPath)
	if err != nil {
		osf.Close()
		return nil, moved, err
	}
	return f, moved, nil
}

func reinitialise(fsys FS, path string, osf OSFile, opt Options, brokenPath string) (*File, int64, error) {
	st, err := osf.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("chunk: reinitialise %s: %w", path, err)
	}
	size := st.Size()
	if size >= HeaderSize+ChunkHeaderSize {
		return nil, 0, fmt.Errorf("chunk: reinitialise %s: refused, %d bytes may hold a chunk", path, size)
	}
	if size > 0 {
		if err := copyToBroken(fsys, osf, 0, size, brokenPath); err != nil {
			return nil, 0, fmt.Errorf("chunk: reinitialise %s: %w", path, err)
		}
		if err := osf.Truncate(0); err != nil {
			return nil, size, fmt.Errorf("chunk: reinitialise %s: truncate: %w", path, err)
		}
	}
	f, err := initialise(fsys, path, osf, opt)
	return f, size, err
}

// initialise writes the header into the empty osf and makes it durable.
func initialise(fsys FS, path string, osf OSFile, opt Options) (*File, error) {
	hdr := appendHeader(make([]byte, 0, HeaderSize), Header{Options: opt})
	if n, err := osf.WriteAt(hdr, 0); err != nil || n != len(hdr) {
		if err == nil {
			err = io.ErrShortWrite
		}
		return nil, fmt.Errorf("chunk: write header of %s: %w", path, err)
	}
	if err := osf.Sync(); err != nil {
		return nil, fmt.Errorf("chunk: sync %s: %w", path, err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("chunk: sync directory of %s: %w", path, err)
	}
	f := &File{path: path, fsys: fsys, osf: osf, opt: opt, headersKnown: true, alloc: HeaderSize}
	f.size.Store(HeaderSize)
	return f, nil
}

func openExisting(fsys FS, path string, osf OSFile) (*File, error) {
	st, err := osf.Stat()
	if err != nil {
		return nil, fmt.Errorf("chunk: stat %s: %w", path, err)
	}
	h, err := ReadHeader(osf, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &File{path: path, fsys: fsys, osf: osf, opt: h.Options, sealed: h.Master != 0, alloc: st.Size()}
	f.size.Store(st.Size())
	f.master.Store(h.Master)
	if !f.sealed {
		z, err := trailingZeros(osf, HeaderSize, st.Size(), zeroTailScan)
		if err != nil {
			return nil, fmt.Errorf("chunk: %s: read its tail: %w", path, err)
		}
		f.zeroTail.Store(z)
	}
	return f, nil
}

// trailingZeros returns how many bytes of [from, to) at its end are zero,
// looking back at most limit bytes.
func trailingZeros(r io.ReaderAt, from, to, limit int64) (int64, error) {
	var buf [64 << 10]byte
	var n int64
	for end := to; end > from && n < limit; {
		k := min(int64(len(buf)), end-from)
		b := buf[:k]
		if err := readFull(r, b, end-k); err != nil {
			return 0, err
		}
		i := len(b)
		for i > 0 && b[i-1] == 0 {
			i--
		}
		n += int64(len(b) - i)
		if i > 0 {
			break
		}
		end -= k
	}
	return n, nil
}

// Path returns the path the file was opened with.
func (f *File) Path() string { return f.path }

// Options returns the options from the file header.
func (f *File) Options() Options { return f.opt }

// Size returns the logical end of the file: the offset of the next append.
// Every byte below it has been written completely. After Open it is the
// length of the file, zero tail included, until SetEnd or TruncateTail
// set the end of the data (recovery of the tail: storedir's catch-up).
func (f *File) Size() int64 { return f.size.Load() }

// ZeroTail returns how many zero bytes ended the file when it was opened
// (an open file's preallocated tail, or part of a torn one), at most
// 2×PreallocStep; 0 once the end of the data is set. Size()-ZeroTail() is
// a lower bound of the end of the data that never falls below a chunk's
// magic: an index watermark at or past it covers every chunk.
func (f *File) ZeroTail() int64 { return f.zeroTail.Load() }

// SetEnd sets the logical end to off, where a scan of the file found its
// zero tail (Scanner.ZeroTail): every byte from off to the end of the file
// must be zero, or SetEnd fails and changes nothing. The zeros stay, as
// preallocated room for the next appends.
func (f *File) SetEnd(off int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return ErrClosed
	}
	st, err := f.osf.Stat()
	if err != nil {
		return fmt.Errorf("chunk: set end of %s: %w", f.path, err)
	}
	end := st.Size()
	if off < HeaderSize || off > end {
		return fmt.Errorf("chunk: set end of %s at %d: %w (file has %d bytes)", f.path, off, ErrOutOfRange, end)
	}
	z, err := trailingZeros(f.osf, off, end, end-off)
	if err != nil {
		return fmt.Errorf("chunk: set end of %s: %w", f.path, err)
	}
	if z != end-off {
		return fmt.Errorf("chunk: set end of %s at %d: byte %d is not zero", f.path, off, end-z-1)
	}
	f.size.Store(off)
	f.alloc = end
	f.headersKnown = false
	f.zeroTail.Store(0)
	return nil
}

// MasterChecksum returns the master checksum in the header (0: not sealed).
func (f *File) MasterChecksum() uint32 { return f.master.Load() }

// Sealed reports whether the file refuses appends because it was sealed
// (by Seal, or on Open because its header carries a master checksum).
func (f *File) Sealed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sealed
}

// Append encodes payload with the file's options and appends the chunk. It
// returns the offset of the chunk's ZCH0 magic. The chunk is durable only
// after a later Sync.
func (f *File) Append(payload []byte) (int64, error) {
	bp := f.scratch()
	defer f.bufs.Put(bp)
	c, err := Encode(payload, f.opt, *bp)
	if err != nil {
		return 0, fmt.Errorf("chunk: append to %s: %w", f.path, err)
	}
	*bp = c.buf[:0]
	return f.AppendEncoded(c)
}

func (f *File) scratch() *[]byte {
	if bp, _ := f.bufs.Get().(*[]byte); bp != nil {
		return bp
	}
	return new([]byte)
}

// AppendEncoded appends a chunk produced by Encode with the file's options,
// writing its header and stored bytes in one positioned write at Size. On a
// failed or short write Size is unchanged, the file is truncated back to it
// (retried before the next append if that fails too) and the error returned.
func (f *File) AppendEncoded(c EncodedChunk) (int64, error) {
	if len(c.buf) < ChunkHeaderSize {
		return 0, fmt.Errorf("chunk: append to %s: empty EncodedChunk", f.path)
	}
	if c.opt != f.opt {
		return 0, fmt.Errorf("chunk: append to %s: chunk encoded for %v, file uses %v", f.path, c.opt, f.opt)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writable(); err != nil {
		return 0, err
	}
	off := f.size.Load()
	end := off + int64(len(c.buf))
	if end > f.alloc {
		f.preallocate(end)
	}
	n, err := f.osf.WriteAt(c.buf, off)
	if err == nil && n != len(c.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("chunk: append %d bytes to %s at offset %d: %w", len(c.buf), f.path, off, err)
		// Part of the chunk may have reached the file whatever n says.
		if terr := f.osf.Truncate(off); terr != nil {
			f.tailDirty = true
			err = errors.Join(err, fmt.Errorf("chunk: truncate %s back to %d: %w", f.path, off, terr))
		} else {
			f.alloc = off
		}
		return 0, err
	}
	f.alloc = max(f.alloc, end)
	if f.headersKnown {
		f.headersCRC = crc32.Update(f.headersCRC, crc32.IEEETable, c.buf[:ChunkHeaderSize])
	}
	f.pending.Store(true)
	f.size.Store(off + int64(len(c.buf)))
	return off, nil
}

// preallocate extends the file to PreallocStep past end (the end of the
// chunk about to be written) with zeros. When it cannot (no room for the
// step, a file system without fallocate) the append that follows grows
// the file itself, as without preallocation: a full disk fails that write
// with ENOSPC and is handled as always. f.mu held.
func (f *File) preallocate(end int64) {
	if f.noPrealloc {
		return
	}
	if !f.opt.Checksums || f.opt.Compression == None {
		// A chunk written only partly into zeros may pass for whole
		// without a CRC, and uncompressed with one (a header torn after
		// its magic reads as an empty chunk whose CRC is 0): such a file
		// grows with its appends, so a torn append ends the file.
		f.noPrealloc = true
		return
	}
	a, ok := f.osf.(Allocator)
	if !ok {
		f.noPrealloc = true
		return
	}
	target := (end + PreallocStep) &^ (4<<10 - 1)
	if err := a.Allocate(f.alloc, target-f.alloc); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			f.noPrealloc = true
		}
		// A failed fallocate may have allocated part of the range.
		if st, serr := f.osf.Stat(); serr == nil {
			f.alloc = max(f.alloc, st.Size())
		}
		return
	}
	f.alloc = target
}

// cutZeroTail truncates the file to its logical end when it is longer (the
// preallocated tail), for Seal and Close. f.mu held.
func (f *File) cutZeroTail() error {
	st, err := f.osf.Stat()
	if err != nil {
		return err
	}
	if st.Size() <= f.size.Load() {
		return nil
	}
	if err := f.osf.Truncate(f.size.Load()); err != nil {
		return err
	}
	f.alloc = f.size.Load()
	return nil
}

// writable checks that appends are allowed and repairs a dirty tail. f.mu held.
func (f *File) writable() error {
	if f.closed.Load() {
		return ErrClosed
	}
	if f.sealed {
		return fmt.Errorf("%w: %s", ErrSealed, f.path)
	}
	if f.tailDirty {
		if err := f.osf.Truncate(f.size.Load()); err != nil {
			return fmt.Errorf("chunk: %s: truncate the tail of a failed append at %d: %w", f.path, f.size.Load(), err)
		}
		f.tailDirty = false
		f.alloc = f.size.Load()
	}
	return nil
}

// Sync makes every chunk appended before the call durable (fdatasync when
// the OSFile is a DataSyncer, else fsync: what a reader needs of the
// metadata, the file's size and allocation, is flushed either way). After
// a failed Sync the durability of chunks appended since the last
// successful Sync is unknown; the caller must not acknowledge them.
func (f *File) Sync() error {
	if f.closed.Load() {
		return ErrClosed
	}
	pending := f.pending.Swap(false)
	sync := f.osf.Sync
	if ds, ok := f.osf.(DataSyncer); ok {
		sync = ds.Datasync
	}
	if err := sync(); err != nil {
		if pending {
			f.pending.Store(true)
		}
		return fmt.Errorf("chunk: sync %s: %w", f.path, err)
	}
	return nil
}

// ReadChunk reads the chunk at off, verifies its checksum and returns its
// payload (owned by the caller) and the offset just past it. A chunk that
// fails validation yields a *CorruptionError; an offset that cannot hold a
// chunk header yields an error wrapping ErrOutOfRange.
func (f *File) ReadChunk(off int64) ([]byte, int64, error) {
	if f.closed.Load() {
		return nil, 0, ErrClosed
	}
	bp := f.scratch()
	payload, next, err := readChunkAt(f.osf, f.size.Load(), f.opt, off, bp)
	f.bufs.Put(bp)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", f.path, err)
	}
	return payload, next, nil
}

// ReadChunkAt reads and decodes the chunk at off of a data file of the given
// size read through r, as File.ReadChunk does.
func ReadChunkAt(r io.ReaderAt, size int64, opt Options, off int64) ([]byte, int64, error) {
	return readChunkAt(r, size, opt, off, new([]byte))
}

// readChunkAt is ReadChunk over any reader. scratch holds the stored bytes of
// compressed chunks; the returned payload never aliases it.
func readChunkAt(r io.ReaderAt, size int64, opt Options, off int64, scratch *[]byte) ([]byte, int64, error) {
	h, stored, next, err := readStoredAt(r, size, opt, off, scratch)
	if err != nil {
		return nil, 0, err
	}
	payload, reason, err := decodeStored(h, stored, opt, nil)
	if reason != 0 {
		return nil, 0, &CorruptionError{Offset: off, Reason: reason, Err: err}
	}
	return payload, next, nil
}

// readStoredAt reads the header and stored bytes of the chunk at off and
// checks them (header, bounds, checksum) without decoding them. The stored
// bytes of a compressed chunk go to scratch's storage (a new buffer when
// scratch is nil); a verbatim chunk's stored bytes are always a new buffer.
func readStoredAt(r io.ReaderAt, size int64, opt Options, off int64, scratch *[]byte) (chunkHeader, []byte, int64, error) {
	if off < HeaderSize || off >= size {
		return chunkHeader{}, nil, 0, fmt.Errorf("%w: chunk offset %d, data spans [%d, %d)", ErrOutOfRange, off, HeaderSize, size)
	}
	if size-off < ChunkHeaderSize {
		return chunkHeader{}, nil, 0, &CorruptionError{Offset: off, Reason: Truncated,
			Err: fmt.Errorf("file ends %d bytes into the chunk header", size-off)}
	}
	var hb [ChunkHeaderSize]byte
	if err := readFull(r, hb[:], off); err != nil {
		return chunkHeader{}, nil, 0, readError(off, err)
	}
	h := parseChunkHeader(hb[:])
	if reason, err := h.check(opt); reason != 0 {
		return chunkHeader{}, nil, 0, &CorruptionError{Offset: off, Reason: reason, Err: err}
	}
	next := off + ChunkHeaderSize + int64(h.stored)
	if next > size {
		return chunkHeader{}, nil, 0, &CorruptionError{Offset: off, Reason: Truncated,
			Err: fmt.Errorf("chunk of %d stored bytes ends at %d, past the end of the data at %d", h.stored, next, size)}
	}
	var stored []byte
	if h.verbatim(opt) || scratch == nil {
		stored = make([]byte, h.stored) // the payload itself, or kept by the caller
	} else {
		*scratch = grow(*scratch, int(h.stored))
		stored = *scratch
	}
	if err := readFull(r, stored, off+ChunkHeaderSize); err != nil {
		return chunkHeader{}, nil, 0, readError(off, err)
	}
	if reason, err := verifyStored(h, stored, opt); reason != 0 {
		return chunkHeader{}, nil, 0, &CorruptionError{Offset: off, Reason: reason, Err: err}
	}
	return h, stored, next, nil
}

// readFull reads len(b) bytes at off; a short read is io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readError turns a failed read of the chunk at off into an error: the file
// ending early is a truncated chunk, anything else an I/O error.
func readError(off int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &CorruptionError{Offset: off, Reason: Truncated, Err: errors.New("file shorter than its recorded size")}
	}
	return fmt.Errorf("chunk at offset %d: read: %w", off, err)
}

// TruncateTail cuts the file at off (a chunk boundary found by recovery):
// the bytes [off, end of file) are first appended to brokenPath and fsynced,
// then the file is truncated and fsynced. It returns the number of bytes
// moved. When they are all zeros (a zero tail) nothing is moved and
// brokenPath may be empty. Cutting a sealed file clears its master checksum (the file is open
// again).
func (f *File) TruncateTail(off int64, brokenPath string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return 0, ErrClosed
	}
	st, err := f.osf.Stat()
	if err != nil {
		return 0, fmt.Errorf("chunk: truncate %s: %w", f.path, err)
	}
	end := st.Size()
	if off < HeaderSize || off > end {
		return 0, fmt.Errorf("chunk: truncate %s at %d: %w (file has %d bytes)", f.path, off, ErrOutOfRange, end)
	}
	if off == end {
		f.size.Store(off)
		f.alloc = off
		f.zeroTail.Store(0)
		return 0, nil
	}
	// The zero tail this File preallocated past its data (or set with
	// SetEnd) holds nothing, and neither does a cut of zeros only: those
	// are not kept aside. Anything else is kept whole, zeros included.
	keepEnd := end
	if size := f.size.Load(); f.alloc == end && size >= off && size < end {
		keepEnd = size
	}
	z, err := trailingZeros(f.osf, off, keepEnd, keepEnd-off)
	if err != nil {
		return 0, fmt.Errorf("chunk: truncate %s: %w", f.path, err)
	}
	moved := keepEnd - off
	if z == moved {
		moved = 0
	}
	if moved > 0 && brokenPath == "" {
		return 0, fmt.Errorf("chunk: truncate %s at %d: no .broken path for %d bytes", f.path, off, moved)
	}
	if moved > 0 {
		if err := copyToBroken(f.fsys, f.osf, off, keepEnd, brokenPath); err != nil {
			return 0, fmt.Errorf("chunk: truncate %s at %d: %w", f.path, off, err)
		}
	}
	if f.master.Load() != 0 {
		// Unseal first: a crash then leaves an open file with a tail to cut
		// again, never a sealed file whose master checksum is stale.
		var zero [4]byte
		if _, err := f.osf.WriteAt(zero[:], 8); err != nil {
			return 0, fmt.Errorf("chunk: %s: clear master checksum: %w", f.path, err)
		}
		if err := f.osf.Sync(); err != nil {
			return 0, fmt.Errorf("chunk: sync %s after clearing the master checksum: %w", f.path, err)
		}
		f.master.Store(0)
		f.sealed = false
	}
	if err := f.osf.Truncate(off); err != nil {
		return 0, fmt.Errorf("chunk: truncate %s at %d: %w", f.path, off, err)
	}
	if err := f.osf.Sync(); err != nil {
		return moved, fmt.Errorf("chunk: sync %s after truncating at %d: %w", f.path, off, err)
	}
	f.size.Store(off)
	f.alloc = off
	f.zeroTail.Store(0)
	f.headersKnown = false
	f.tailDirty = false
	return moved, nil
}

// copyToBroken appends the bytes [from, to) of src to brokenPath and fsyncs
// it (and its directory, in case it was created).
func copyToBroken(fsys FS, src OSFile, from, to int64, brokenPath string) error {
	dst, err := fsys.OpenFile(brokenPath, os.O_WRONLY|os.O_CREATE, filePerm)
	if err != nil {
		return fmt.Errorf("open %s: %w", brokenPath, err)
	}
	st, err := dst.Stat()
	if err != nil {
		dst.Close()
		return fmt.Errorf("stat %s: %w", brokenPath, err)
	}
	at := st.Size()
	buf := make([]byte, min(to-from, 1<<20))
	for pos := from; pos < to; {
		n := min(int64(len(buf)), to-pos)
		if err := readFull(src, buf[:n], pos); err != nil {
			dst.Close()
			return fmt.Errorf("read [%d, %d): %w", pos, pos+n, err)
		}
		if w, err := dst.WriteAt(buf[:n], at); err != nil || int64(w) != n {
			if err == nil {
				err = io.ErrShortWrite
			}
			dst.Close()
			return fmt.Errorf("write %s: %w", brokenPath, err)
		}
		pos += n
		at += n
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("sync %s: %w", brokenPath, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("close %s: %w", brokenPath, err)
	}
	if err := fsys.SyncDir(filepath.Dir(brokenPath)); err != nil {
		return fmt.Errorf("sync directory of %s: %w", brokenPath, err)
	}
	return nil
}

// Seal makes the file durable, computes the master checksum (CRC-32 of all
// chunk headers in file order), writes it into the header and fsyncs again.
// From then on the file refuses appends. Sealing a sealed file returns its
// master checksum. Seal fails, leaving the file open, if the chunk headers do
// not tile the file exactly (run recovery first).
func (f *File) Seal() (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return 0, ErrClosed
	}
	if f.sealed {
		return f.master.Load(), nil
	}
	if err := f.writable(); err != nil {
		return 0, err
	}
	// A sealed file ends with its last chunk: no zero tail.
	if err := f.cutZeroTail(); err != nil {
		return 0, fmt.Errorf("chunk: seal %s: cut the preallocated tail: %w", f.path, err)
	}
	if err := f.osf.Sync(); err != nil {
		return 0, fmt.Errorf("chunk: seal %s: sync: %w", f.path, err)
	}
	f.pending.Store(false)
	master := f.headersCRC
	if !f.headersKnown {
		m, err := computeMaster(f.osf, f.size.Load(), f.opt)
		if err != nil {
			return 0, fmt.Errorf("chunk: seal %s: %w", f.path, err)
		}
		master = m
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], master)
	if n, err := f.osf.WriteAt(b[:], 8); err != nil || n != 4 {
		if err == nil {
			err = io.ErrShortWrite
		}
		return 0, fmt.Errorf("chunk: seal %s: write master checksum: %w", f.path, err)
	}
	if err := f.osf.Sync(); err != nil {
		return 0, fmt.Errorf("chunk: seal %s: sync: %w", f.path, err)
	}
	f.master.Store(master)
	f.sealed = true
	return master, nil
}

// VerifyMaster recomputes the master checksum over the chunk headers and
// compares it with the header. It returns the computed value and an error
// wrapping ErrNotSealed (header says 0), ErrMasterMismatch, or a
// *CorruptionError if the chunk headers do not tile the file.
func (f *File) VerifyMaster() (uint32, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	f.mu.Lock()
	size, stored := f.size.Load(), f.master.Load()
	f.mu.Unlock()
	return verifyMaster(f.osf, size, f.opt, stored, f.path)
}

// VerifyMaster checks the master checksum of a data file of the given size
// read through r, as File.VerifyMaster does.
func VerifyMaster(r io.ReaderAt, size int64) (uint32, error) {
	h, err := ReadHeader(r, size)
	if err != nil {
		return 0, err
	}
	return verifyMaster(r, size, h.Options, h.Master, "data file")
}

func verifyMaster(r io.ReaderAt, size int64, opt Options, stored uint32, name string) (uint32, error) {
	computed, err := computeMaster(r, size, opt)
	if err != nil {
		return 0, fmt.Errorf("chunk: verify master checksum of %s: %w", name, err)
	}
	if stored == computed {
		return computed, nil
	}
	if stored == 0 {
		return computed, fmt.Errorf("%w: %s (computed %08x)", ErrNotSealed, name, computed)
	}
	return computed, fmt.Errorf("%w: %s header says %08x, chunk headers give %08x", ErrMasterMismatch, name, stored, computed)
}

// computeMaster walks the chunk headers from HeaderSize to size and returns
// the CRC-32 of their concatenation. Stored bytes are skipped, not verified
// (that is the Scanner's job); headers must pass check and tile the file.
func computeMaster(r io.ReaderAt, size int64, opt Options) (uint32, error) {
	var crc uint32
	var hb [ChunkHeaderSize]byte
	for off := int64(HeaderSize); off < size; {
		if size-off < ChunkHeaderSize {
			return 0, &CorruptionError{Offset: off, Reason: Truncated, Err: fmt.Errorf("%d bytes left for a chunk header", size-off)}
		}
		if err := readFull(r, hb[:], off); err != nil {
			return 0, readError(off, err)
		}
		h := parseChunkHeader(hb[:])
		if reason, err := h.check(opt); reason != 0 {
			return 0, &CorruptionError{Offset: off, Reason: reason, Err: err}
		}
		next := off + ChunkHeaderSize + int64(h.stored)
		if next > size {
			return 0, &CorruptionError{Offset: off, Reason: Truncated, Err: fmt.Errorf("chunk ends at %d, past the end at %d", next, size)}
		}
		crc = crc32.Update(crc, crc32.IEEETable, hb[:])
		off = next
	}
	return crc, nil
}

// Scanner returns a Scanner over the chunks of f from HeaderSize to the
// current Size.
func (f *File) Scanner() *Scanner { return NewScanner(f.osf, f.size.Load(), f.opt) }

// Close cuts the preallocated zero tail of a file that holds no torn tail
// (Size is its end of data), syncs pending appends and closes the file.
// Reads after Close fail.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Swap(true) {
		return ErrClosed
	}
	var err error
	if f.alloc > f.size.Load() && f.zeroTail.Load() == 0 && !f.tailDirty {
		if terr := f.cutZeroTail(); terr != nil {
			err = fmt.Errorf("chunk: %s: cut the preallocated tail on close: %w", f.path, terr)
		}
		f.pending.Store(true) // make the cut durable too
	}
	if f.pending.Load() {
		if serr := f.osf.Sync(); serr != nil {
			err = fmt.Errorf("chunk: sync %s on close: %w", f.path, serr)
		}
	}
	if cerr := f.osf.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("chunk: close %s: %w", f.path, cerr)
	}
	return err
}
