package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/internal/s3test"
	"github.com/ztsd/ztsd/objstore"
)

// TestS3AgainstVersitygw runs every Bucket method against a real S3
// server process.
func TestS3AgainstVersitygw(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	// A page size of 3 makes List follow continuation tokens.
	b := srv.Bucket(t, objstore.WithListPageSize(3))

	body := make([]byte, 300_000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(body)
	key := objstore.FileKey("pfx", "node-a", 7, "g1", "traces.zts")
	if key != "pfx/node-a/000007/g1/traces.zts" {
		t.Fatalf("key %q", key)
	}
	if err := b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), sum[:]); err != nil {
		t.Fatal(err)
	}

	// Get returns the bytes.
	rc, obj, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, body) || obj.Size != int64(len(body)) {
		t.Fatalf("get: %d bytes (obj size %d), err %v; want the %d put", len(got), obj.Size, err, len(body))
	}

	// GetRange reads exactly the range; past the end is an error.
	part, err := b.GetRange(ctx, key, 123_456, 1000)
	if err != nil || !bytes.Equal(part, body[123_456:124_456]) {
		t.Fatalf("range: %d bytes, err %v", len(part), err)
	}
	if _, err := b.GetRange(ctx, key, int64(len(body))-10, 20); err == nil {
		t.Fatal("a range running past the end was read without error")
	}
	if _, err := b.GetRange(ctx, key, int64(len(body))+10, 20); err == nil {
		t.Fatal("a range starting past the end was read without error")
	}

	// Head gives the size.
	h, err := b.Head(ctx, key)
	if err != nil || h.Size != int64(len(body)) {
		t.Fatalf("head: %+v, %v", h, err)
	}

	// A body that does not match its SHA-256 is refused and not stored.
	bad := objstore.FileKey("pfx", "node-a", 7, "g1", "config.props")
	wrong := sha256.Sum256([]byte("something else"))
	err = b.Put(ctx, bad, bytes.NewReader(body[:100]), 100, wrong[:])
	if err == nil {
		t.Fatal("put with a wrong sha256 succeeded")
	}
	if !strings.Contains(err.Error(), bad) {
		t.Fatalf("error does not name the key: %v", err)
	}
	if _, err := b.Head(ctx, bad); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("after a refused put, head: %v, want ErrNotFound", err)
	}
	// Without a checksum the put is accepted.
	if err := b.Put(ctx, bad, bytes.NewReader(body[:100]), 100, nil); err != nil {
		t.Fatal(err)
	}

	// Missing keys: ErrNotFound, wrapped with the key.
	missing := "pfx/node-a/000007/nothing"
	if _, _, err := b.Get(ctx, missing); !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := b.Head(ctx, missing); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("head missing: %v", err)
	}
	if _, err := b.GetRange(ctx, missing, 0, 10); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("range missing: %v", err)
	}

	// List pages through continuation tokens, in key order, by prefix.
	var want []string
	for i := range 10 {
		k := fmt.Sprintf("pfx/node-b/%06x/manifest.json", i)
		want = append(want, k)
		if err := b.Put(ctx, k, strings.NewReader("{}"), 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	if err := b.List(ctx, "pfx/node-b/", func(o objstore.Object) error {
		if o.Size != 2 {
			t.Errorf("%s: size %d", o.Key, o.Size)
		}
		listed = append(listed, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %v\nwant %v", listed, want)
	}
	// fn's error stops the walk and is returned.
	stop := errors.New("stop")
	n := 0
	if err := b.List(ctx, "pfx/", func(objstore.Object) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("stop: err %v after %d calls", err, n)
	}

	// Delete removes; deleting again is fine.
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Head(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("head after delete: %v", err)
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}

	// A cancelled context stops a request.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Head(cctx, want[0]); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled head: %v", err)
	}
}

// TestS3Credentials: wrong credentials are refused by the server, and the
// SDK's standard chain (the environment) is used when no option gives them.
func TestS3Credentials(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	bad, err := objstore.NewS3(ctx, srv.Config(), objstore.WithStaticCredentials(srv.AccessKey, "wrong-secret"), objstore.WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Put(ctx, "k", strings.NewReader("x"), 1, nil); err == nil {
		t.Fatal("a put with the wrong secret succeeded")
	} else if strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("the error shows the secret: %v", err)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	env, err := objstore.NewS3(ctx, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Put(ctx, "k", strings.NewReader("x"), 1, nil); err != nil {
		t.Fatalf("credentials from the environment: %v", err)
	}

	// A profile of the shared credentials file.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	credFile := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(credFile, []byte("[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[ztsd]\naws_access_key_id = "+
		srv.AccessKey+"\naws_secret_access_key = "+srv.SecretKey+"\n"), 0o600)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credFile)
	cfg := srv.Config()
	cfg.Profile = "ztsd"
	prof, err := objstore.NewS3(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prof.Head(ctx, "k"); err != nil {
		t.Fatalf("credentials from profile ztsd: %v", err)
	}
	def, err := objstore.NewS3(ctx, srv.Config(), objstore.WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := def.Head(ctx, "k"); err == nil {
		t.Fatal("the default profile's wrong keys were accepted")
	}
}

// TestS3TLS: against versitygw serving HTTPS with a self-signed
// certificate, tls_ca_file makes the client trust it, without it the
// handshake fails, and tls_insecure_skip_verify accepts it.
func TestS3TLS(t *testing.T) {
	srv := s3test.StartTLS(t)
	ctx := context.Background()
	try := func(cfg config.ObjectStoreConfig) error {
		b, err := objstore.NewS3(ctx, cfg, append(srv.Options(), objstore.WithMaxAttempts(1))...)
		if err != nil {
			t.Fatal(err)
		}
		return b.Put(ctx, "tls", strings.NewReader("x"), 1, nil)
	}
	cfg := srv.Config()
	if !strings.HasPrefix(cfg.Endpoint, "https://") || cfg.TLSCAFile == "" {
		t.Fatalf("config %+v", cfg)
	}
	if err := try(cfg); err != nil {
		t.Fatalf("with tls_ca_file: %v", err)
	}
	cfg.TLSCAFile = ""
	if err := try(cfg); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v, want a certificate error", err)
	}
	cfg.TLSInsecureSkipVerify = true
	if err := try(cfg); err != nil {
		t.Fatalf("with tls_insecure_skip_verify: %v", err)
	}
}

// TestS3TLSSettings: a CA file that holds no certificate is refused when
// the client is built, naming the setting.
func TestS3TLSSettings(t *testing.T) {
	cfg := config.Default().ObjectStore
	cfg.Bucket = "b"
	cfg.TLSCAFile = filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(cfg.TLSCAFile, []byte("not a certificate"), 0o600)
	if _, err := objstore.NewS3(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "tls_ca_file") {
		t.Fatalf("bad CA file: %v", err)
	}
	cfg.TLSCAFile = filepath.Join(t.TempDir(), "missing.pem")
	if _, err := objstore.NewS3(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "tls_ca_file") {
		t.Fatalf("missing CA file: %v", err)
	}
}
