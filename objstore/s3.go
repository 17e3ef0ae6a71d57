package objstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"

	"github.com/ztsd/ztsd/config"
)

// S3 is a Bucket on an S3-compatible server, through the AWS SDK v2.
type S3 struct {
	client   *s3.Client
	bucket   string
	pageSize int32
}

// s3Options are NewS3's optional settings.
type s3Options struct {
	creds       aws.CredentialsProvider
	maxAttempts int
	maxBackoff  time.Duration
	pageSize    int32
}

// Option changes how NewS3 builds the client.
type Option func(*s3Options)

// WithStaticCredentials uses the given access key instead of the SDK's
// standard credentials chain (tests, and tools handed keys explicitly).
func WithStaticCredentials(accessKey, secretKey string) Option {
	return func(o *s3Options) {
		o.creds = credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")
	}
}

// WithMaxAttempts sets how many times the SDK tries one request (the
// SDK's standard retryer, with backoff, retries 5xx, throttling and
// connection errors); 1 turns its retries off.
func WithMaxAttempts(n int) Option { return func(o *s3Options) { o.maxAttempts = n } }

// WithMaxBackoff bounds the SDK's wait between two tries of a request
// (default 20s; tests use less).
func WithMaxBackoff(d time.Duration) Option { return func(o *s3Options) { o.maxBackoff = d } }

// WithListPageSize bounds the keys one ListObjectsV2 call returns (tests
// use a small one to exercise continuation); 0 is the server's default.
func WithListPageSize(n int) Option { return func(o *s3Options) { o.pageSize = int32(n) } }

// NewS3 opens the bucket cfg names. Credentials come from the SDK's
// standard chain (environment, shared credentials file and cfg.Profile,
// instance roles) unless an Option gives them; they are never logged.
// It does not contact the server.
// The Bucket is an *S3 (CreateBucket).
func NewS3(ctx context.Context, cfg config.ObjectStoreConfig, opts ...Option) (Bucket, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("object store: no bucket configured")
	}
	var o s3Options
	for _, opt := range opts {
		opt(&o)
	}
	httpClient, err := newHTTPClient(cfg)
	if err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	load := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(region),
		awsconfig.WithHTTPClient(httpClient),
	}
	if cfg.Profile != "" {
		load = append(load, awsconfig.WithSharedConfigProfile(cfg.Profile))
	}
	if o.creds != nil {
		load = append(load, awsconfig.WithCredentialsProvider(o.creds))
	}
	if o.maxAttempts > 0 || o.maxBackoff > 0 {
		load = append(load, awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				if o.maxAttempts > 0 {
					so.MaxAttempts = o.maxAttempts
				}
				if o.maxBackoff > 0 {
					so.MaxBackoff = o.maxBackoff
					so.Backoff = retry.NewExponentialJitterBackoff(o.maxBackoff)
				}
			})
		}))
	}
	var awsCfg aws.Config
	awsCfg, err = awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("object store: AWS configuration: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(so *s3.Options) {
		if cfg.Endpoint != "" {
			so.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		so.UsePathStyle = cfg.PathStyle
		// Checksums: Put sends the SHA-256 it is given; other requests
		// carry none, and responses are checked only where the caller
		// asks (a ranged GET has no whole-object checksum to check).
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.DisableLogOutputChecksumValidationSkipped = true
	})
	return &S3{client: client, bucket: cfg.Bucket, pageSize: o.pageSize}, nil
}

// newHTTPClient builds the SDK's HTTP client with cfg's TLS settings (the
// SDK adds AWS_CA_BUNDLE's certificates to the same pool).
func newHTTPClient(cfg config.ObjectStoreConfig) (*awshttp.BuildableClient, error) {
	var pool *x509.CertPool
	if cfg.TLSCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("object_store.tls_ca_file: %w", err)
		}
		pool, err = x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("object_store.tls_ca_file %s: no PEM certificate in it", cfg.TLSCAFile)
		}
	}
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = 32
		tr.ResponseHeaderTimeout = 2 * time.Minute
		if pool != nil || cfg.TLSInsecureSkipVerify {
			if tr.TLSClientConfig == nil {
				tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			tr.TLSClientConfig.InsecureSkipVerify = cfg.TLSInsecureSkipVerify
			if pool != nil {
				tr.TLSClientConfig.RootCAs = pool
			}
		}
	}), nil
}

// Bucket is the bucket's name.
func (b *S3) Bucket() string { return b.bucket }

// Put implements Bucket.
func (b *S3) Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sha256 []byte) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(key),
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	if sha256 != nil {
		if len(sha256) != 32 {
			return fmt.Errorf("s3 put %s: sha256 of %d bytes, want 32", key, len(sha256))
		}
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(sha256))
	}
	// With a SHA-256 the server checks the body against (the header is
	// signed), the signature need not cover the payload too: the body is
	// read once for the signature less.
	var popts []func(*s3.Options)
	if sha256 != nil {
		popts = append(popts, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
	}
	if _, err := b.client.PutObject(ctx, in, popts...); err != nil {
		return fmt.Errorf("s3 put %s: %w", key, mapErr(err))
	}
	return nil
}

// Get implements Bucket.
func (b *S3) Get(ctx context.Context, key string) (io.ReadCloser, Object, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, Object{}, fmt.Errorf("s3 get %s: %w", key, mapErr(err))
	}
	obj := Object{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}
	return out.Body, obj, nil
}

// GetRange implements Bucket.
func (b *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if off < 0 || n <= 0 {
		return nil, fmt.Errorf("s3 get %s: bad range %d+%d", key, off, n)
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(key),
		Range:  aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10)),
	})
	if err != nil {
		return nil, fmt.Errorf("s3 get %s [%d+%d]: %w", key, off, n, mapErr(err))
	}
	defer out.Body.Close()
	if cl := aws.ToInt64(out.ContentLength); cl != n {
		return nil, fmt.Errorf("s3 get %s [%d+%d]: the server sent %d bytes (range past the end of the object?)", key, off, n, cl)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(out.Body, buf); err != nil {
		return nil, fmt.Errorf("s3 get %s [%d+%d]: %w", key, off, n, err)
	}
	return buf, nil
}

// Head implements Bucket.
func (b *S3) Head(ctx context.Context, key string) (Object, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return Object{}, fmt.Errorf("s3 head %s: %w", key, mapErr(err))
	}
	return Object{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}, nil
}

// List implements Bucket: ListObjectsV2 pages, following continuation
// tokens.
func (b *S3) List(ctx context.Context, prefix string, fn func(Object) error) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(prefix)}
	if b.pageSize > 0 {
		in.MaxKeys = aws.Int32(b.pageSize)
	}
	p := s3.NewListObjectsV2Paginator(b.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("s3 list %s: %w", prefix, mapErr(err))
		}
		for _, o := range page.Contents {
			obj := Object{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), ModTime: aws.ToTime(o.LastModified)}
			if err := fn(obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements Bucket.
func (b *S3) Delete(ctx context.Context, key string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		if err = mapErr(err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return fmt.Errorf("s3 delete %s: %w", key, err)
	}
	return nil
}

// CreateBucket creates the bucket (tests and first-time setup); a bucket
// this account owns already is not an error.
func (b *S3) CreateBucket(ctx context.Context) error {
	_, err := b.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3 create bucket %s: %w", b.bucket, err)
	}
	return nil
}

// mapErr makes a missing key (404, NoSuchKey, NotFound) ErrNotFound,
// keeping the SDK's message.
func mapErr(err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound") {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() == http.StatusNotFound {
		// A 404 that is not about the key (NoSuchBucket) keeps its code.
		if errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket" {
			return err
		}
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return err
}

var _ Bucket = (*S3)(nil)
