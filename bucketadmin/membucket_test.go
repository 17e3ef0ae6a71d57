package bucketadmin

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/ztsd/ztsd/objstore"
)

// memBucket is an in-memory objstore.Bucket (unit tests only; the
// acceptance tests run against a real S3 server).
type memBucket struct {
	mu      sync.Mutex
	objects map[string][]byte
	listErr error
}

func newMemBucket() *memBucket { return &memBucket{objects: map[string][]byte{}} }

func (b *memBucket) obj(key string) objstore.Object {
	sum := md5.Sum(b.objects[key])
	return objstore.Object{Key: key, Size: int64(len(b.objects[key])), ETag: hex.EncodeToString(sum[:])}
}

func (b *memBucket) Put(_ context.Context, key string, body io.ReadSeeker, size int64, _ []byte) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[key] = data
	return nil
}

func (b *memBucket) Get(_ context.Context, key string) (io.ReadCloser, objstore.Object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.objects[key]
	if !ok {
		return nil, objstore.Object{}, fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(data)), b.obj(key), nil
}

func (b *memBucket) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.objects[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	if off < 0 || n < 0 || off+n > int64(len(data)) {
		return nil, fmt.Errorf("%s: range %d+%d past %d", key, off, n, len(data))
	}
	return append([]byte(nil), data[off:off+n]...), nil
}

func (b *memBucket) Head(_ context.Context, key string) (objstore.Object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objects[key]; !ok {
		return objstore.Object{}, fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	return b.obj(key), nil
}

func (b *memBucket) List(_ context.Context, prefix string, fn func(objstore.Object) error) error {
	b.mu.Lock()
	if b.listErr != nil {
		b.mu.Unlock()
		return b.listErr
	}
	var objs []objstore.Object
	for k := range b.objects {
		if strings.HasPrefix(k, prefix) {
			objs = append(objs, b.obj(k))
		}
	}
	b.mu.Unlock()
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (b *memBucket) Delete(_ context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, key)
	return nil
}

func (b *memBucket) put(key string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[key] = data
}
