// Package objstoretest is an in-memory objstore.Bucket for unit tests, as
// net/http/httptest is for HTTP: one copy instead of one per package. It
// checks what a real S3 server checks (a PUT's size and SHA-256) and counts
// reads, so tests can assert round trips. Acceptance tests run against a
// real S3 server process (internal/s3test), never this.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/ztsd/ztsd/objstore"
)

// Bucket is an in-memory objstore.Bucket, safe for concurrent use.
type Bucket struct {
	mu      sync.Mutex
	objects map[string][]byte
	gets    int
	listErr error
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns an empty bucket.
func New() *Bucket { return &Bucket{objects: map[string][]byte{}} }

func (b *Bucket) describe(key string) objstore.Object {
	sum := md5.Sum(b.objects[key])
	return objstore.Object{Key: key, Size: int64(len(b.objects[key])), ETag: hex.EncodeToString(sum[:])}
}

// Put stores body under key after checking it holds size bytes and, when
// given, matches sum (a wrong checksum stores nothing, as on S3).
func (b *Bucket) Put(_ context.Context, key string, body io.ReadSeeker, size int64, sum []byte) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("put %s: %d bytes, size says %d", key, len(data), size)
	}
	if sum != nil {
		if got := sha256.Sum256(data); !bytes.Equal(got[:], sum) {
			return fmt.Errorf("put %s: SHA-256 mismatch", key)
		}
	}
	b.Set(key, data)
	return nil
}

func (b *Bucket) read(key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gets++
	data, ok := b.objects[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	return data, nil
}

// Get opens the object at key.
func (b *Bucket) Get(_ context.Context, key string) (io.ReadCloser, objstore.Object, error) {
	data, err := b.read(key)
	if err != nil {
		return nil, objstore.Object{}, err
	}
	b.mu.Lock()
	o := b.describe(key)
	b.mu.Unlock()
	return io.NopCloser(bytes.NewReader(data)), o, nil
}

// GetRange copies n bytes at off of the object at key.
func (b *Bucket) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	data, err := b.read(key)
	if err != nil {
		return nil, err
	}
	if off < 0 || n < 0 || off+n > int64(len(data)) {
		return nil, fmt.Errorf("%s: range %d+%d past the end at %d", key, off, n, len(data))
	}
	return append([]byte(nil), data[off:off+n]...), nil
}

// Head describes the object at key.
func (b *Bucket) Head(_ context.Context, key string) (objstore.Object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objects[key]; !ok {
		return objstore.Object{}, fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	return b.describe(key), nil
}

// List calls fn for each object under prefix in key order, or fails with
// the error SetListErr set.
func (b *Bucket) List(_ context.Context, prefix string, fn func(objstore.Object) error) error {
	b.mu.Lock()
	if err := b.listErr; err != nil {
		b.mu.Unlock()
		return err
	}
	var objs []objstore.Object
	for k := range b.objects {
		if strings.HasPrefix(k, prefix) {
			objs = append(objs, b.describe(k))
		}
	}
	b.mu.Unlock()
	slices.SortFunc(objs, func(x, y objstore.Object) int { return strings.Compare(x.Key, y.Key) })
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes key (a missing key is not an error).
func (b *Bucket) Delete(_ context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, key)
	return nil
}

// Set stores data under key directly (data is kept, not copied).
func (b *Bucket) Set(key string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[key] = data
}

// Data returns the bytes stored under key (the bucket's own slice: a test
// may flip a bit in it to damage the object in place).
func (b *Bucket) Data(key string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.objects[key]
	return data, ok
}

// Keys lists every key, sorted.
func (b *Bucket) Keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := make([]string, 0, len(b.objects))
	for k := range b.objects {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Len is the number of objects.
func (b *Bucket) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.objects)
}

// Gets counts the Get and GetRange calls so far.
func (b *Bucket) Gets() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gets
}

// SetListErr makes List fail with err (nil restores it).
func (b *Bucket) SetListErr(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listErr = err
}
