package otlp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ztsd/ztsd/trace"
)

// TestSDKExporterHTTP sends the test trace with the OpenTelemetry Go SDK's
// own OTLP/HTTP exporter, in each encoding and compression it offers, into
// the handler on a loopback HTTP server; every span must arrive with every
// field as the SDK recorded it.
func TestSDKExporterHTTP(t *testing.T) {
	for _, tc := range []struct {
		name        string
		encoding    otlptracehttp.Encoding
		compression otlptracehttp.Compression
	}{
		{"protobuf", otlptracehttp.EncodingProtobuf, otlptracehttp.NoCompression},
		{"protobuf+gzip", otlptracehttp.EncodingProtobuf, otlptracehttp.GzipCompression},
		{"json", otlptracehttp.EncodingJSON, otlptracehttp.NoCompression},
		{"json+gzip", otlptracehttp.EncodingJSON, otlptracehttp.GzipCompression},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &recordingAppender{}
			mux := http.NewServeMux()
			mux.Handle("POST /v1/traces", NewHTTPHandler(app, Options{}))
			srv := httptest.NewServer(mux)
			defer srv.Close()

			ctx := context.Background()
			exp, err := otlptracehttp.New(ctx,
				otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"),
				otlptracehttp.WithEncoding(tc.encoding),
				otlptracehttp.WithCompression(tc.compression),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
			if err != nil {
				t.Fatal(err)
			}
			// Synchronous export: each span goes in its own request, children
			// before their parents.
			tp, rec := newTestProvider(exp, true)
			emitTestSpans(ctx, tp)
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if got := app.appendCalls(); got != len(rec.Ended()) {
				t.Errorf("%d append calls for %d synchronously exported spans", got, len(rec.Ended()))
			}
			compareWithSDK(t, rec.Ended(), app.stored())
		})
	}
}

// TestSDKExporterGRPC does the same with the SDK's OTLP/gRPC exporter, over
// TCP on loopback and over a unix socket, batched and gzip-compressed.
func TestSDKExporterGRPC(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			app := &recordingAppender{}
			addr := startGRPC(t, network, app, Options{})
			ctx := context.Background()
			exp := newGRPCExporter(t, network, addr, true)
			tp, rec := newTestProvider(exp, false)
			emitTestSpans(ctx, tp)
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if got := app.appendCalls(); got != 1 {
				t.Errorf("%d append calls for one batch", got)
			}
			compareWithSDK(t, rec.Ended(), app.stored())
		})
	}
}

// startGRPC serves the TraceService on a loopback TCP port or a unix
// socket and returns the address.
func startGRPC(tb testing.TB, network string, app Appender, opt Options) string {
	tb.Helper()
	var lis net.Listener
	var err error
	if network == "unix" {
		lis, err = net.Listen("unix", filepath.Join(tb.TempDir(), "otlp.sock"))
	} else {
		lis, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer(GRPCServerOptions(opt)...)
	Register(srv, app, opt)
	go srv.Serve(lis)
	tb.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// newGRPCExporter connects the SDK's gRPC exporter to addr.
func newGRPCExporter(tb testing.TB, network, addr string, gzip bool) *otlptrace.Exporter {
	tb.Helper()
	target := addr
	if network == "unix" {
		target = "unix://" + addr
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	opts := []otlptracegrpc.Option{otlptracegrpc.WithGRPCConn(conn), otlptracegrpc.WithTimeout(30 * time.Second),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
	if gzip {
		opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
	}
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return exp
}

// storedTrace groups spans by trace for tests that look at one trace.
func storedTrace(spans []*trace.Span, id trace.TraceID) []*trace.Span {
	var out []*trace.Span
	for _, s := range spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}
