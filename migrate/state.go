package migrate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"

	"github.com/ztsd/ztsd/trace"
)

// The state database (.migrate/state, Pebble, WAL on) holds, under
// one-byte key prefixes:
//
//	'm' name          metadata: params, plan-done, checkpoint, stage, report (JSON)
//	'p' traceID       plan entry: earliest start (int64 BE) | flags (1 byte)
//	's' pieceKey      seen-set: SHA-256/128 of the encoding of the piece's version
//	                  written last | where that version was first read: manifest
//	                  index (u32) | chunk offset (int64) | span index in the chunk (u32)
//	'v' pieceKey loc  verification: a version of the piece was found in the target,
//	                  at target store (u32) | chunk offset (int64) | span index (u32);
//	                  the value is its SHA-256/128
//
// A pieceKey is traceID (16) | spanID (u64 BE) | chunk number (u32 BE), so
// the seen-set iterates grouped by trace.
const (
	prefixMeta   = 'm'
	prefixPlan   = 'p'
	prefixSeen   = 's'
	prefixVerify = 'v'

	metaParams   = "params"
	metaPlanDone = "plan-done"
	metaCkpt     = "checkpoint"
	metaStage    = "stage"
	metaReport   = "report"

	// maxMetaValue bounds a metadata value read back (JSON documents of
	// a few KB in practice).
	maxMetaValue = 16 << 20
)

// Stages recorded under metaStage.
const (
	stageCopy     = "copy"
	stageCopied   = "copied"
	stageVerified = "verified"
)

// pieceKey identifies a span piece: (trace id, span id, chunk number).
type pieceKey [28]byte

func keyOf(sp *trace.Span) pieceKey {
	var k pieceKey
	copy(k[:16], sp.TraceID[:])
	binary.BigEndian.PutUint64(k[16:24], uint64(sp.SpanID))
	binary.BigEndian.PutUint32(k[24:28], sp.ChunkNum)
	return k
}

func (k pieceKey) traceID() (id trace.TraceID) { copy(id[:], k[:16]); return id }
func (k pieceKey) spanID() trace.SpanID        { return trace.SpanID(binary.BigEndian.Uint64(k[16:24])) }
func (k pieceKey) chunkNum() uint32            { return binary.BigEndian.Uint32(k[24:28]) }

func (k pieceKey) String() string {
	return fmt.Sprintf("%s/%s#%d", k.traceID(), k.spanID(), k.chunkNum())
}

// pieceLoc is where a piece was read: a store of the manifest, the offset
// of its chunk and its index in the chunk's span list.
type pieceLoc struct {
	Store  uint32
	Offset int64
	Index  uint32
}

// before reports whether l comes before o in source order (manifest
// stores in copy order, chunk offsets, spans in a chunk).
func (l pieceLoc) before(o pieceLoc) bool {
	if l.Store != o.Store {
		return l.Store < o.Store
	}
	if l.Offset != o.Offset {
		return l.Offset < o.Offset
	}
	return l.Index < o.Index
}

// seenValue is a seen-set entry: the version of the piece written last,
// where it was first read (Loc) and its hash.
type seenValue struct {
	Hash [16]byte
	Loc  pieceLoc
}

const seenValueSize = 16 + 4 + 8 + 4

func (v seenValue) encode() []byte {
	b := make([]byte, 0, seenValueSize)
	b = append(b, v.Hash[:]...)
	b = binary.BigEndian.AppendUint32(b, v.Loc.Store)
	b = binary.BigEndian.AppendUint64(b, uint64(v.Loc.Offset))
	return binary.BigEndian.AppendUint32(b, v.Loc.Index)
}

// errCorruptState marks a state entry that does not decode.
var errCorruptState = errors.New("corrupt migration state")

func decodeSeen(b []byte) (seenValue, error) {
	var v seenValue
	if len(b) != seenValueSize {
		return v, fmt.Errorf("%w: seen entry of %d bytes, want %d", errCorruptState, len(b), seenValueSize)
	}
	copy(v.Hash[:], b[:16])
	v.Loc.Store = binary.BigEndian.Uint32(b[16:20])
	v.Loc.Offset = int64(binary.BigEndian.Uint64(b[20:28]))
	v.Loc.Index = binary.BigEndian.Uint32(b[28:32])
	if v.Loc.Offset < 0 {
		return v, fmt.Errorf("%w: seen entry with negative chunk offset %d", errCorruptState, v.Loc.Offset)
	}
	return v, nil
}

// planEntry is what the plan knows of a trace.
type planEntry struct {
	StartNS int64 // earliest span start over every source
	Drop    bool  // a span carries a dropped attribute
}

const (
	planValueSize = 9
	planFlagDrop  = 0x01
)

func (e planEntry) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, planValueSize), uint64(e.StartNS))
	if e.Drop {
		return append(b, planFlagDrop)
	}
	return append(b, 0)
}

func decodePlan(b []byte) (planEntry, error) {
	if len(b) != planValueSize {
		return planEntry{}, fmt.Errorf("%w: plan entry of %d bytes, want %d", errCorruptState, len(b), planValueSize)
	}
	if b[8]&^planFlagDrop != 0 {
		return planEntry{}, fmt.Errorf("%w: plan entry flags %#x", errCorruptState, b[8])
	}
	return planEntry{StartNS: int64(binary.BigEndian.Uint64(b[:8])), Drop: b[8]&planFlagDrop != 0}, nil
}

func (e planEntry) merge(o planEntry) planEntry {
	if o.StartNS < e.StartNS {
		e.StartNS = o.StartNS
	}
	e.Drop = e.Drop || o.Drop
	return e
}

// targetTip is how far the target's data files are accounted for by the
// seen-set: everything in stores below Store, and in Store below Size.
type targetTip struct {
	Known bool   `json:"known"`
	Store uint32 `json:"store"`
	Size  int64  `json:"size"`
}

// checkpoint is the durable progress of the copy.
type checkpoint struct {
	// Store is the manifest index of the next store to copy (len of the
	// manifest when done) and Offset where copying continues in it.
	Store  int   `json:"store"`
	Offset int64 `json:"offset"`
	// RotatedFor is the manifest index of the source store the target's
	// current store was started for; -1 when none was.
	RotatedFor int       `json:"rotated_for"`
	Target     targetTip `json:"target"`
	Counters   Counters  `json:"counters"`
}

func (c *checkpoint) validate(stores int) error {
	if c.Store < 0 || c.Store > stores || c.Offset < 0 || c.RotatedFor < -1 || c.RotatedFor >= stores || c.Target.Size < 0 {
		return fmt.Errorf("%w: checkpoint %+v out of range (%d source stores)", errCorruptState, *c, stores)
	}
	return nil
}

// decodeJSON decodes a metadata document, refusing oversized input and
// trailing data.
func decodeJSON(b []byte, v any) error {
	if len(b) > maxMetaValue {
		return fmt.Errorf("%w: %d-byte document exceeds %d", errCorruptState, len(b), maxMetaValue)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errCorruptState, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the document at offset %d", errCorruptState, dec.InputOffset())
	}
	return nil
}

// stateDB is the migration's Pebble database.
type stateDB struct {
	dir string
	db  *pebble.DB
}

// stateFormat is named explicitly so that a Pebble upgrade never changes
// the on-disk format of a state an older ztsctl may resume.
const stateFormat = pebble.FormatVirtualSSTables

type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("state db: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("migration state db: "+format, args...))
}

func openState(dir string, log *slog.Logger) (*stateDB, error) {
	// Point lookups of absent keys dominate (a piece not seen yet), so
	// every level has bloom filters; they apply to whole keys (Split).
	cmp := *pebble.DefaultComparer
	cmp.Split = func(key []byte) int { return len(key) }
	cache := pebble.NewCache(32 << 20)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:              cache,
		Comparer:           &cmp,
		FormatMajorVersion: stateFormat,
		Logger:             pebbleLogger{log},
		MemTableSize:       16 << 20,
	}
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("migration state %s: %w", dir, err)
	}
	return &stateDB{dir: dir, db: db}, nil
}

func (s *stateDB) close() error {
	if s == nil || s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("migration state %s: close: %w", s.dir, err)
	}
	return nil
}

func metaKey(name string) []byte { return append([]byte{prefixMeta}, name...) }

func prefixed(p byte, k []byte) []byte {
	out := make([]byte, 0, 1+len(k))
	return append(append(out, p), k...)
}

// get returns a copy of key's value.
func (s *stateDB) get(key []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("migration state %s: get %q: %w", s.dir, key, err)
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, true, nil
}

func (s *stateDB) getMeta(name string, v any) (bool, error) {
	b, ok, err := s.get(metaKey(name))
	if err != nil || !ok {
		return false, err
	}
	if err := decodeJSON(b, v); err != nil {
		return false, fmt.Errorf("migration state %s: %s: %w", s.dir, name, err)
	}
	return true, nil
}

func (s *stateDB) putMeta(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("migration state: encode %s: %w", name, err)
	}
	if err := s.db.Set(metaKey(name), b, pebble.Sync); err != nil {
		return fmt.Errorf("migration state %s: write %s: %w", s.dir, name, err)
	}
	return nil
}

func (s *stateDB) seen(k pieceKey) (seenValue, bool, error) {
	b, ok, err := s.get(prefixed(prefixSeen, k[:]))
	if err != nil || !ok {
		return seenValue{}, false, err
	}
	v, err := decodeSeen(b)
	if err != nil {
		return v, false, fmt.Errorf("migration state %s: piece %s: %w", s.dir, k, err)
	}
	return v, true, nil
}

func (s *stateDB) plan(id trace.TraceID) (planEntry, bool, error) {
	b, ok, err := s.get(prefixed(prefixPlan, id[:]))
	if err != nil || !ok {
		return planEntry{}, false, err
	}
	e, err := decodePlan(b)
	if err != nil {
		return e, false, fmt.Errorf("migration state %s: trace %s: %w", s.dir, id, err)
	}
	return e, true, nil
}

// deletePrefix removes every key under prefix p.
func (s *stateDB) deletePrefix(p byte) error {
	if err := s.db.DeleteRange([]byte{p}, []byte{p + 1}, pebble.Sync); err != nil {
		return fmt.Errorf("migration state %s: clear %q: %w", s.dir, p, err)
	}
	return nil
}

// scanSeen calls fn for every seen-set entry in key order.
func (s *stateDB) scanSeen(fn func(k pieceKey, v seenValue) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixSeen}, UpperBound: []byte{prefixSeen + 1}})
	if err != nil {
		return fmt.Errorf("migration state %s: %w", s.dir, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		key := it.Key()
		if len(key) != 1+len(pieceKey{}) {
			return fmt.Errorf("migration state %s: %w: seen key of %d bytes", s.dir, errCorruptState, len(key))
		}
		var k pieceKey
		copy(k[:], key[1:])
		v, err := decodeSeen(it.Value())
		if err != nil {
			return fmt.Errorf("migration state %s: piece %s: %w", s.dir, k, err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("migration state %s: %w", s.dir, err)
	}
	return nil
}

// iter returns an iterator over the keys under prefix p.
func (s *stateDB) iter(p byte) (*pebble.Iterator, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
	if err != nil {
		return nil, fmt.Errorf("migration state %s: %w", s.dir, err)
	}
	return it, nil
}

// verifyKey is the 'v' key (without its prefix) of a piece found in the
// target at loc.
func verifyKey(k pieceKey, loc pieceLoc) []byte {
	b := make([]byte, 0, len(k)+16)
	b = append(b, k[:]...)
	b = binary.BigEndian.AppendUint32(b, loc.Store)
	b = binary.BigEndian.AppendUint64(b, uint64(loc.Offset))
	return binary.BigEndian.AppendUint32(b, loc.Index)
}

// writeBatch is a Pebble batch committed with or without sync.
type writeBatch struct {
	s *stateDB
	b *pebble.Batch
}

func (s *stateDB) batch() *writeBatch { return &writeBatch{s: s, b: s.db.NewBatch()} }

func (w *writeBatch) set(p byte, k, v []byte) { w.b.Set(prefixed(p, k), v, nil) }

func (w *writeBatch) setMeta(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("migration state: encode %s: %w", name, err)
	}
	w.b.Set(metaKey(name), b, nil)
	return nil
}

func (w *writeBatch) commit(sync bool) error {
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	err := w.b.Commit(opt)
	if cerr := w.b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("migration state %s: commit: %w", w.s.dir, err)
	}
	return nil
}
