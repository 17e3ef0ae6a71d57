// Package objstore is ztsd's view of an S3-compatible bucket: the Bucket
// interface the rest of ztsd reads and writes objects through, the layout
// of a store's objects under <prefix>/<node>/<store id>/, and the store
// manifest, the object written last that makes an upload visible.
//
// # Layout
//
//	<prefix>/<node>/<store id>/manifest.json      the store's manifest (written last)
//	<prefix>/<node>/<store id>/<generation>/<file> the store's files (traces.zts,
//	                                              config.props, meta/..., text/..., superseded)
//
// A generation is one upload of a store (a fresh name per attempt, or per
// re-upload of a repaired store): objects of an upload that never wrote its
// manifest, or of a generation a newer manifest replaced, are garbage and
// never read. A store is visible in the bucket exactly when its manifest
// exists, and the manifest names the generation to read, with every file's
// size and SHA-256, so a reader never depends on listing consistency and a
// store is never visible twice.
//
// The S3 implementation (NewS3) uses the AWS SDK v2; tests run it against a
// real S3 server process (internal/s3test).
package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"time"
)

// ErrNotFound is returned (wrapped) for a key that does not exist.
var ErrNotFound = errors.New("object not found")

// Object describes one stored object.
type Object struct {
	Key     string
	Size    int64
	ETag    string
	ModTime time.Time
}

// Bucket is an S3-compatible bucket. Keys are full keys (prefix included).
// Every method honours ctx; implementations are safe for concurrent use.
type Bucket interface {
	// Put stores size bytes read from body under key, replacing any object
	// there; sha256 (32 bytes, or nil) is sent for the server to check the
	// body against, so a corrupted upload fails rather than being stored.
	Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sha256 []byte) error
	// Get opens the whole object.
	Get(ctx context.Context, key string) (io.ReadCloser, Object, error)
	// GetRange reads n bytes at offset off (one ranged GET); a range past
	// the end of the object is an error.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Head describes the object without reading it.
	Head(ctx context.Context, key string) (Object, error)
	// List calls fn for every object whose key starts with prefix, in key
	// order, stopping at fn's first error.
	List(ctx context.Context, prefix string, fn func(Object) error) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ManifestName is the manifest's object name inside a store's prefix.
const ManifestName = "manifest.json"

// StorePrefix is the key prefix of one store's objects ("" prefix allowed),
// ending in "/".
func StorePrefix(prefix, node string, store uint32) string {
	return path.Join(prefix, node, storeName(store)) + "/"
}

// NodePrefix is the key prefix of one node's stores, ending in "/".
func NodePrefix(prefix, node string) string {
	if prefix == "" {
		return node + "/"
	}
	return path.Join(prefix, node) + "/"
}

// ManifestKey is the key of a store's manifest.
func ManifestKey(prefix, node string, store uint32) string {
	return StorePrefix(prefix, node, store) + ManifestName
}

// FileKey is the key of one file of a store's upload generation; file is
// the path inside the store directory ("traces.zts", "meta/000005.sst").
func FileKey(prefix, node string, store uint32, generation, file string) string {
	return StorePrefix(prefix, node, store) + generation + "/" + file
}

func storeName(id uint32) string {
	const hex = "0123456789abcdef"
	var b [6]byte
	for i := 5; i >= 0; i-- {
		b[i] = hex[id&15]
		id >>= 4
	}
	return string(b[:])
}

// NewGeneration names one upload of a store (an uploader's attempt, or a
// re-upload of a repaired store): "g", its start time in hex nanoseconds
// and 4 random bytes, so no two uploads share a name.
func NewGeneration(now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("g%x-%s", now.UnixNano(), hex.EncodeToString(b[:]))
}
