package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Store states, the values of StoreProps.State.
const (
	StateOpen   = "open"   // the store accepts appends
	StateSealed = "sealed" // the data file is complete and its master checksum final
)

// Compression algorithms of a store's chunks, the values of
// StoreProps.Compression and StoreConfig.Compression.
const (
	CompressionNone = "none"
	CompressionLZ4  = "lz4"
	CompressionZlib = "zlib"
	CompressionZstd = "zstd"
)

// Keys of a store's config.props, in the order ToProps writes them.
const (
	propFormatVersion  = "format.version"
	propCompression    = "compression"
	propChecksums      = "checksums"
	propCreated        = "created"
	propState          = "state"
	propFirstTraceNS   = "first.trace.ns"
	propLastTraceNS    = "last.trace.ns"
	propChunks         = "chunks"
	propMasterChecksum = "master.checksum"
)

var storePropKeys = [...]string{
	propFormatVersion, propCompression, propChecksums, propCreated, propState,
	propFirstTraceNS, propLastTraceNS, propChunks, propMasterChecksum,
}

// StoreProps is the typed content of a store directory's config.props:
//
//	format.version=1                          data file format version, >= 1
//	compression=lz4                           none | lz4 | zlib | zstd
//	checksums=true                            true | false (CRC32 per chunk)
//	created=2025-11-21T12:05:00.123456789Z    RFC 3339, UTC
//	state=open                                open | sealed
//	first.trace.ns=0                          earliest trace start, ns since epoch
//	last.trace.ns=0                           latest trace start, >= first.trace.ns
//	chunks=0                                  number of chunks, >= 0
//	master.checksum=00000000                  8 hex digits
//
// Every key is required and no other key is allowed.
type StoreProps struct {
	FormatVersion  int
	Compression    string // CompressionNone, CompressionLZ4, CompressionZlib or CompressionZstd
	Checksums      bool
	Created        time.Time
	State          string // StateOpen or StateSealed
	FirstTraceNS   int64
	LastTraceNS    int64
	Chunks         int64
	MasterChecksum uint32
}

// ToProps renders sp as properties, in the documented key order.
func (sp StoreProps) ToProps() *Props {
	p := NewProps()
	p.Set(propFormatVersion, strconv.Itoa(sp.FormatVersion))
	p.Set(propCompression, sp.Compression)
	p.Set(propChecksums, strconv.FormatBool(sp.Checksums))
	p.Set(propCreated, sp.Created.UTC().Format(time.RFC3339Nano))
	p.Set(propState, sp.State)
	p.Set(propFirstTraceNS, strconv.FormatInt(sp.FirstTraceNS, 10))
	p.Set(propLastTraceNS, strconv.FormatInt(sp.LastTraceNS, 10))
	p.Set(propChunks, strconv.FormatInt(sp.Chunks, 10))
	p.Set(propMasterChecksum, fmt.Sprintf("%08x", sp.MasterChecksum))
	return p
}

// Validate checks the fields' values; each problem is a *KeyError naming the
// config.props key.
func (sp StoreProps) Validate() error {
	var errs []error
	bad := func(key string, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: fmt.Errorf(format, args...)})
	}
	if sp.FormatVersion < 1 {
		bad(propFormatVersion, "format version %d is not positive", sp.FormatVersion)
	}
	if !isCompression(sp.Compression) {
		bad(propCompression, "%q is not one of none, lz4, zlib, zstd", sp.Compression)
	}
	if sp.State != StateOpen && sp.State != StateSealed {
		bad(propState, "%q is not one of open, sealed", sp.State)
	}
	if sp.LastTraceNS < sp.FirstTraceNS {
		bad(propLastTraceNS, "%d is before first.trace.ns %d", sp.LastTraceNS, sp.FirstTraceNS)
	}
	if sp.Chunks < 0 {
		bad(propChunks, "negative chunk count %d", sp.Chunks)
	}
	return errors.Join(errs...)
}

func isCompression(s string) bool {
	return s == CompressionNone || s == CompressionLZ4 || s == CompressionZlib || s == CompressionZstd
}

// StorePropsFrom parses and validates a store's properties. Every problem (a
// missing or unknown key, a value that does not parse, an invalid value) is a
// *KeyError naming the key and, for parsed text, its line; all of them are
// returned, joined.
func StorePropsFrom(p *Props) (StoreProps, error) {
	var (
		sp   StoreProps
		errs []error
	)
	bad := func(key string, err error) {
		errs = append(errs, &KeyError{Key: key, Line: p.Line(key), Err: err})
	}
	known := make(map[string]bool, len(storePropKeys))
	for _, k := range storePropKeys {
		known[k] = true
	}
	for _, k := range p.Keys() {
		if !known[k] {
			bad(k, errors.New("unknown key"))
		}
	}
	get := func(key string) (string, bool) {
		v, ok := p.Get(key)
		if !ok {
			bad(key, errors.New("missing"))
		}
		return v, ok
	}
	parseInt := func(key string, bits int) int64 {
		v, ok := get(key)
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			bad(key, fmt.Errorf("%q is not a decimal integer of %d bits", v, bits))
		}
		return n
	}
	fieldErrs := len(errs)
	sp.FormatVersion = int(parseInt(propFormatVersion, 32))
	if v, ok := get(propCompression); ok {
		sp.Compression = v
	}
	if v, ok := get(propChecksums); ok {
		switch v {
		case "true":
			sp.Checksums = true
		case "false":
		default:
			bad(propChecksums, fmt.Errorf("%q is not true or false", v))
		}
	}
	if v, ok := get(propCreated); ok {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			bad(propCreated, fmt.Errorf("%q is not an RFC 3339 time", v))
		}
		sp.Created = t.UTC()
	}
	if v, ok := get(propState); ok {
		sp.State = v
	}
	sp.FirstTraceNS = parseInt(propFirstTraceNS, 64)
	sp.LastTraceNS = parseInt(propLastTraceNS, 64)
	sp.Chunks = parseInt(propChunks, 64)
	if v, ok := get(propMasterChecksum); ok {
		n, err := strconv.ParseUint(v, 16, 32)
		if err != nil || len(v) != 8 {
			bad(propMasterChecksum, fmt.Errorf("%q is not 8 hex digits", v))
		}
		sp.MasterChecksum = uint32(min(n, math.MaxUint32))
	}
	if len(errs) == fieldErrs {
		// Every field parsed: check the values.
		if err := sp.Validate(); err != nil {
			for _, e := range unjoin(err) {
				var ke *KeyError
				if errors.As(e, &ke) {
					ke.Line = p.Line(ke.Key)
				}
				errs = append(errs, e)
			}
		}
	}
	if len(errs) > 0 {
		return StoreProps{}, errors.Join(errs...)
	}
	return sp, nil
}

// unjoin returns the errors joined in err (or err itself).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
