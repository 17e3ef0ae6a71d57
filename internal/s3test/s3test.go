// Package s3test runs a real S3 server for tests: a versitygw process
// (posix backend, listening on 127.0.0.1, root credentials passed through
// its environment) on a temporary directory, with a fresh bucket.
//
// The versitygw binary is built outside ztsd's go.mod by `make tools`
// (into .tools/ at the module root); ZTSD_VERSITYGW names another one.
// Without it a test is skipped, except under CI=true, where it fails: the
// acceptance runs against the real server.
package s3test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/objstore"
)

// EnvBinary names the versitygw binary to run (default: .tools/versitygw
// at the module root).
const EnvBinary = "ZTSD_VERSITYGW"

// Server is one running versitygw.
type Server struct {
	t testing.TB
	// Endpoint is the S3 API's URL, "http://127.0.0.1:<port>".
	Endpoint string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// BucketName is the bucket Start created.
	BucketName string
	// Root is the posix backend's directory (a bucket is a directory in it).
	Root string
	// CAFile is, for a server started by StartTLS, the PEM file of its
	// self-signed certificate (Config's tls_ca_file).
	CAFile  string
	keyFile string

	bin  string
	addr string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *syncWriter
	done chan struct{}
}

// Binary returns the versitygw binary's path; it skips t (fails it under
// CI=true) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		bin = filepath.Join(moduleRoot(), ".tools", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no versitygw at %s (run `make tools`, or set %s): %v", bin, EnvBinary, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start runs a versitygw for t (stopped at t's cleanup) and creates a
// fresh bucket in it.
func Start(t testing.TB) *Server { return start(t, false) }

// StartTLS is Start with the S3 API served over HTTPS, with a self-signed
// certificate for 127.0.0.1 (CAFile).
func StartTLS(t testing.TB) *Server { return start(t, true) }

func start(t testing.TB, useTLS bool) *Server {
	t.Helper()
	bin := Binary(t)
	s := &Server{t: t, bin: bin, Root: t.TempDir(), AccessKey: "ztsdtest" + randHex(4), SecretKey: randHex(20),
		BucketName: "ztsd-" + randHex(6)}
	scheme := "http://"
	if useTLS {
		scheme = "https://"
		var err error
		if s.CAFile, s.keyFile, err = selfSigned(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s.addr, err = freeAddr(); err != nil {
			t.Fatal(err)
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	s.Endpoint = scheme + s.addr
	t.Cleanup(s.Stop)
	b := s.Bucket(t).(*objstore.S3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatalf("versitygw: %v\n%s", err, s.Output())
	}
	return s
}

// start runs the process and waits until it accepts connections.
func (s *Server) start() error {
	args := []string{"--port", s.addr, "--quiet"}
	if s.CAFile != "" {
		args = append(args, "--cert", s.CAFile, "--key", s.keyFile)
	}
	cmd := exec.Command(s.bin, append(args, "posix", s.Root)...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	out := &syncWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			return fmt.Errorf("exited at start: %s", out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("not listening on %s after 20s: %s", s.addr, out)
		}
	}
	s.mu.Lock()
	s.cmd, s.out, s.done = cmd, out, done
	s.mu.Unlock()
	return nil
}

// Stop kills the server (its data stays in Root; Restart serves it again).
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same address and directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the port may linger briefly
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("versitygw restart: %v", err)
}

// Output is what the server printed.
func (s *Server) Output() string {
	s.mu.Lock()
	out := s.out
	s.mu.Unlock()
	if out == nil {
		return ""
	}
	return out.String()
}

// Config is an [object_store] section for the server's bucket (no
// credentials: they go through Options or Env).
func (s *Server) Config() config.ObjectStoreConfig {
	c := config.Default().ObjectStore
	c.Endpoint = s.Endpoint
	c.Bucket = s.BucketName
	c.Region = "us-east-1"
	c.PathStyle = true
	c.TLSCAFile = s.CAFile
	return c
}

// Options are the objstore options that carry the credentials.
func (s *Server) Options() []objstore.Option {
	return []objstore.Option{objstore.WithStaticCredentials(s.AccessKey, s.SecretKey)}
}

// Env is the environment a daemon needs for the SDK's standard chain to
// find the credentials.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true"}
}

// Bucket opens the server's bucket (extra options after the credentials).
func (s *Server) Bucket(t testing.TB, opts ...objstore.Option) objstore.Bucket {
	t.Helper()
	b, err := objstore.NewS3(context.Background(), s.Config(), append(s.Options(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "ztsd test S3"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(errors.New("crypto/rand failed"))
	}
	return hex.EncodeToString(b)
}

// syncWriter collects the process's output; it keeps the last 64 KiB.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 64<<10 {
		rest := append([]byte(nil), w.b.Bytes()[w.b.Len()-32<<10:]...)
		w.b.Reset()
		w.b.Write(rest)
	}
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Audit reads every manifest under <prefix>/<node>/ and checks it: one per
// store, at its store's key, every file it names in the bucket with its
// size and SHA-256 (the bytes read back), and no object under the node's
// prefix that no manifest names (garbage of an interrupted upload). It
// fails t on any finding and returns the manifests by store id.
func Audit(t testing.TB, b objstore.Bucket, prefix, node string) map[uint32]*objstore.Manifest {
	t.Helper()
	ctx := context.Background()
	out := map[uint32]*objstore.Manifest{}
	var keys []string
	if err := b.List(ctx, objstore.NodePrefix(prefix, node), func(o objstore.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if path.Base(k) != objstore.ManifestName {
			continue
		}
		rc, _, err := b.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		m, err := objstore.ParseManifest(k, data)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[m.Store]; dup || k != objstore.ManifestKey(prefix, node, m.Store) || m.Node != node {
			t.Fatalf("manifest %s (store %d, node %q) is a duplicate or misplaced", k, m.Store, m.Node)
		}
		out[m.Store] = m
	}
	named := map[string]bool{}
	for id, m := range out {
		named[objstore.ManifestKey(prefix, node, id)] = true
		for _, f := range m.Files {
			key := objstore.FileKey(prefix, node, id, m.Generation, f.Path)
			named[key] = true
			rc, _, err := b.Get(ctx, key)
			if err != nil {
				t.Fatalf("store %d: %v", id, err)
			}
			h := sha256.New()
			n, err := io.Copy(h, rc)
			rc.Close()
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
				t.Fatalf("%s: %d bytes, sha256 %x; the manifest says %d bytes, %s", key, n, h.Sum(nil), f.Size, f.SHA256)
			}
		}
	}
	for _, k := range keys {
		if !named[k] {
			t.Errorf("object %s is named by no manifest", k)
		}
	}
	return out
}
