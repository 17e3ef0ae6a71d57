package otlp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/membudget"
	"github.com/ztsd/ztsd/trace"
)

func grpcClient(t *testing.T, addr string) collectortrace.TraceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return collectortrace.NewTraceServiceClient(conn)
}

// retryDelay returns the RetryInfo delay of a status, or -1.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return -1
}

// TestGRPCResponses covers the gRPC status of each outcome and that no
// failing request stores anything.
func TestGRPCResponses(t *testing.T) {
	tooMany := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{
		Spans: []*tracepb.Span{{}, {}, {}, {}, {}, {}, {}}}}}}}
	big := sampleRequest()
	big.ResourceSpans[0].ScopeSpans[0].Spans[0].Name = strings.Repeat("n", 70<<10)
	for _, tc := range []struct {
		name      string
		req       *collectortrace.ExportTraceServiceRequest
		appendErr error
		gzip      bool
		code      codes.Code
		retry     time.Duration
		msg       string
		stored    int
		rejected  int64
	}{
		{name: "ok", req: sampleRequest(), code: codes.OK, stored: 4},
		{name: "ok gzip", req: sampleRequest(), gzip: true, code: codes.OK, stored: 4},
		{name: "partial success", req: rejectingRequest(), code: codes.OK, stored: 4, rejected: 2, msg: "2 of 6 spans rejected"},
		{name: "too many spans", req: tooMany, code: codes.ResourceExhausted, retry: -1, msg: "7 spans, limit 6"},
		{name: "message too large", req: big, code: codes.ResourceExhausted, retry: -1, msg: "larger than max"},
		{name: "gzip bomb", req: big, gzip: true, code: codes.ResourceExhausted, retry: -1, msg: "after decompression"},
		{name: "disk full", req: sampleRequest(), appendErr: fmt.Errorf("fsync: %w", syscall.ENOSPC), code: codes.Unavailable, retry: 10 * time.Second, msg: "disk_full"},
		{name: "overloaded store", req: sampleRequest(), appendErr: errOverloaded, code: codes.ResourceExhausted, retry: time.Second, msg: "commit queue full"},
		{name: "store rejects", req: sampleRequest(), appendErr: errInvalid, code: codes.InvalidArgument, retry: -1, msg: "bad_request: invalid span"},
		{name: "store fails", req: sampleRequest(), appendErr: errFailingAppend, code: codes.Internal, retry: -1, msg: "append failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &recordingAppender{err: tc.appendErr}
			opt := Options{MaxBodySize: 64 << 10, MaxSpansPerRequest: 6, Status: statusMapper}
			client := grpcClient(t, startGRPC(t, "tcp", app, opt))
			var callOpts []grpc.CallOption
			if tc.gzip {
				callOpts = append(callOpts, grpc.UseCompressor("gzip"))
			}
			resp, err := client.Export(context.Background(), tc.req, callOpts...)
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code %v (%s), want %v", st.Code(), st.Message(), tc.code)
			}
			if err != nil {
				if d := retryDelay(st); d != tc.retry {
					t.Errorf("retry delay %v, want %v", d, tc.retry)
				}
				if !strings.Contains(st.Message(), tc.msg) {
					t.Errorf("message %q does not contain %q", st.Message(), tc.msg)
				}
			} else {
				ps := resp.GetPartialSuccess()
				if ps.GetRejectedSpans() != tc.rejected || !strings.Contains(ps.GetErrorMessage(), tc.msg) {
					t.Errorf("partial success %v", ps)
				}
			}
			if got := len(app.stored()); got != tc.stored {
				t.Errorf("%d spans stored, want %d", got, tc.stored)
			}
		})
	}
}

// TestGRPCOverloaded answers RESOURCE_EXHAUSTED with RetryInfo while
// MaxInFlight requests are being appended.
func TestGRPCOverloaded(t *testing.T) {
	app := &recordingAppender{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	client := grpcClient(t, startGRPC(t, "tcp", app, Options{MaxInFlight: 1}))
	first := make(chan error, 1)
	go func() {
		_, err := client.Export(context.Background(), sampleRequest())
		first <- err
	}()
	<-app.entered
	_, err := client.Export(context.Background(), sampleRequest())
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || retryDelay(st) != time.Second {
		t.Errorf("second request: %v, retry %v", st, retryDelay(st))
	}
	close(app.block)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	app.entered = nil
	if _, err := client.Export(context.Background(), sampleRequest()); err != nil {
		t.Errorf("after the first finished: %v", err)
	}
}

// TestGRPCDeadline: a client deadline that expires while appending ends
// the call with DEADLINE_EXCEEDED and stores nothing.
func TestGRPCDeadline(t *testing.T) {
	app := &recordingAppender{block: make(chan struct{})}
	defer close(app.block)
	client := grpcClient(t, startGRPC(t, "tcp", app, Options{Status: statusMapper}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := client.Export(ctx, sampleRequest())
	if status.Code(err) != codes.DeadlineExceeded || len(app.stored()) != 0 {
		t.Fatalf("%v, %d stored", err, len(app.stored()))
	}
}

// TestGRPCEqualsHTTP: the same request gives the same spans over gRPC as
// over HTTP.
func TestGRPCEqualsHTTP(t *testing.T) {
	req := sampleRequest()
	body, _ := proto.Marshal(req)
	want, _, _, err := Decode(body, ContentTypeProtobuf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	app := &recordingAppender{}
	if _, err := grpcClient(t, startGRPC(t, "tcp", app, Options{})).Export(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := app.stored()
	if len(got) != len(want) {
		t.Fatalf("%d spans, want %d", len(got), len(want))
	}
	for i := range want {
		if !want[i].Equal(got[i]) {
			t.Errorf("span %d differs", i)
		}
	}
}

// TestGRPCReadTimeoutSparesAppend: GRPCConnLimits.ReadTimeout bounds
// receiving the message only: an Export whose append takes longer than it
// still succeeds (the cmd/ztsd test shows a stuck message being cut off).
func TestGRPCReadTimeoutSparesAppend(t *testing.T) {
	app := &recordingAppender{block: make(chan struct{})}
	time.AfterFunc(300*time.Millisecond, func() { close(app.block) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(GRPCServerOptions(Options{}),
		GRPCConnOptions(GRPCConnLimits{ReadTimeout: 100 * time.Millisecond, IdleTimeout: time.Second})...)...)
	Register(srv, app, Options{})
	go srv.Serve(lis)
	defer srv.Stop()
	t0 := time.Now()
	if _, err := grpcClient(t, lis.Addr().String()).Export(context.Background(), sampleRequest()); err != nil {
		t.Fatalf("append slower than read_timeout: %v", err)
	}
	if took := time.Since(t0); took < 300*time.Millisecond || len(app.stored()) == 0 {
		t.Fatalf("answered after %v with %d spans stored: the append was not waited for", took, len(app.stored()))
	}
}

// TestGRPCBudgetUsesMessageSize: Export reserves BodyMemoryFactor times
// the request's encoded size (uncompressed, gzip or not): a budget of
// exactly that admits the request, one byte less refuses it with
// RESOURCE_EXHAUSTED.
func TestGRPCBudgetUsesMessageSize(t *testing.T) {
	req := realisticRequest(3, 4)
	size := int64(proto.Size(req))
	for _, gz := range []bool{false, true} {
		app := &recordingAppender{}
		budget := membudget.New(size * BodyMemoryFactor)
		cl := grpcClient(t, startGRPC(t, "tcp", app, Options{Budget: budget}))
		var callOpts []grpc.CallOption
		if gz {
			callOpts = append(callOpts, grpc.UseCompressor("gzip"))
		}
		if _, err := cl.Export(context.Background(), req, callOpts...); err != nil {
			t.Fatalf("gzip=%v: budget of 4 × %d bytes: %v", gz, size, err)
		}
		if used, peak, _ := budget.Stats(); used != 0 || peak != size*BodyMemoryFactor {
			t.Errorf("gzip=%v: budget used %d, peak %d; want 0, 4 × encoded size %d", gz, used, peak, size)
		}
		cl = grpcClient(t, startGRPC(t, "tcp", app, Options{Budget: membudget.New(size*BodyMemoryFactor - 1)}))
		_, err := cl.Export(context.Background(), req, callOpts...)
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
			t.Errorf("gzip=%v: budget one byte short: %v, want RESOURCE_EXHAUSTED", gz, err)
		}
	}
}

// rawBytesCodec is a client codec that sends a *[]byte as the message
// encoding as it is (to send malformed requests) and reads replies as
// protobuf.
type rawBytesCodec struct{ encoding.CodecV2 }

func (c rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*[]byte); ok {
		return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// TestGRPCMalformedRequest: a request whose encoding is malformed is
// refused INVALID_ARGUMENT naming the offset and the field, and stores
// nothing; one with a wrong-wire-type field and unknown fields is served
// like the same request without them.
func TestGRPCMalformedRequest(t *testing.T) {
	app := &recordingAppender{}
	addr := startGRPC(t, "tcp", app, Options{})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	codec := grpc.ForceCodecV2(rawBytesCodec{encoding.GetCodecV2("proto")})
	good, _ := proto.Marshal(sampleRequest())
	bad := append(bytes.Clone(good), 0x0a, 0x03, 0x12, 0x03, 0xff) // resource_spans[n].scope_spans[0]: 3 bytes long, 1 there
	resp := new(collectortrace.ExportTraceServiceResponse)
	err = conn.Invoke(context.Background(), collectortrace.TraceService_Export_FullMethodName, &bad, resp, codec)
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), fmt.Sprintf("protobuf at offset %d: resource_spans[2].scope_spans[0]: value of wire type 2: unexpected EOF", len(good)+2)) {
		t.Fatalf("malformed request: %v", err)
	}
	if n := len(app.stored()); n != 0 {
		t.Fatalf("a malformed request stored %d spans", n)
	}
	extra := append(bytes.Clone(good), 0x08, 0x01, 0xf8, 0x07, 0x02) // resource_spans as a varint, field 127
	if err := conn.Invoke(context.Background(), collectortrace.TraceService_Export_FullMethodName, &extra, resp, codec); err != nil {
		t.Fatal(err)
	}
	want, _, _, _ := Decode(good, ContentTypeProtobuf, Options{})
	got := app.stored()
	if len(got) != len(want) {
		t.Fatalf("%d spans stored, want %d", len(got), len(want))
	}
	for i := range want {
		if d := trace.Diff(got[i], want[i]); d != "" {
			t.Fatalf("span %d: %s", i, d)
		}
	}
}

// TestGRPCGeneratedRegistration: NewGRPCService registered with the
// generated code on a server without GRPCServerOptions (its requests
// unmarshalled by gRPC) stores what Register's service stores.
func TestGRPCGeneratedRegistration(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	app := &recordingAppender{}
	collectortrace.RegisterTraceServiceServer(srv, NewGRPCService(app, Options{}))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	req := sampleRequest()
	resp, err := grpcClient(t, lis.Addr().String()).Export(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := proto.Marshal(req)
	want, rejected, msg, _ := Decode(body, ContentTypeProtobuf, Options{})
	if resp.GetPartialSuccess().GetRejectedSpans() != rejected || resp.GetPartialSuccess().GetErrorMessage() != msg {
		t.Fatalf("partial success %v, want %d %q", resp.GetPartialSuccess(), rejected, msg)
	}
	got := app.stored()
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%d spans stored, want %d", len(got), len(want))
	}
	for i := range want {
		if d := trace.Diff(got[i], want[i]); d != "" {
			t.Fatalf("span %d: %s", i, d)
		}
	}
}
