package otlp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed requests (otlptracegrpc WithCompressor("gzip"))
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// grpcService is OTLP/gRPC's TraceService.
type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	app      Appender
	opt      Options
	inFlight limiter
}

// NewGRPCService returns the OTLP/gRPC TraceService. Export answers as the
// OTLP/gRPC specification says: success with partial_success when spans
// were rejected, INVALID_ARGUMENT for an undecodable request,
// RESOURCE_EXHAUSTED for more spans than opt.MaxSpansPerRequest (no
// RetryInfo: retrying does not help) or, with RetryInfo, when more than
// opt.MaxInFlight requests are in flight or opt.Status says 429, and
// UNAVAILABLE with RetryInfo when opt.Status says 503 (disk full, shutting
// down). The message size bound is a server option: see GRPCServerOptions.
//
// Register serves it without unmarshalling requests into the generated
// message types; registered with collectortrace.RegisterTraceServiceServer
// instead, on any server, Export re-encodes each request it is given and
// decodes that the same way.
func NewGRPCService(app Appender, opt Options) collectortrace.TraceServiceServer {
	opt = opt.withDefaults()
	return &grpcService{app: app, opt: opt, inFlight: newLimiter(opt.MaxInFlight)}
}

// Register registers the OTLP TraceService on s, a *grpc.Server created
// with GRPCServerOptions: its codec hands Export the request's encoding,
// which decodeWire reads straight into spans.
func Register(s grpc.ServiceRegistrar, app Appender, opt Options) {
	s.RegisterService(&traceServiceDesc, NewGRPCService(app, opt))
}

// GRPCServerOptions are the grpc.NewServer options that apply opt to the
// transport: the received message size (after decompression, which gRPC
// bounds by the same limit) is bounded by opt.MaxBodySize, and the server's
// codec keeps the encoding of Export requests for Register's service (see
// exportCodec).
func GRPCServerOptions(opt Options) []grpc.ServerOption {
	opt = opt.withDefaults()
	size := opt.MaxBodySize
	if size > math.MaxInt32 {
		size = math.MaxInt32
	}
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(int(size)), grpc.ForceServerCodecV2(exportCodec{encoding.GetCodecV2(grpcproto.Name)})}
}

// rawExportRequest is an Export request as received: its protobuf
// encoding, in a buffer of gRPC's pool that Export frees.
type rawExportRequest struct{ body mem.Buffer }

// exportCodec is the server codec GRPCServerOptions installs: it hands an
// Export request of Register's service over as its encoding
// (*rawExportRequest) and is the proto codec for every other message (the
// responses, other services' requests). A malformed request is Export's to
// refuse (INVALID_ARGUMENT), not the codec's (gRPC would answer INTERNAL).
type exportCodec struct{ encoding.CodecV2 }

func (c exportCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawExportRequest); ok {
		r.body = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// rawTraceServer is what Register's service description calls.
type rawTraceServer interface {
	exportRaw(context.Context, *rawExportRequest) (*collectortrace.ExportTraceServiceResponse, error)
}

// traceServiceDesc is collectortrace.TraceService_ServiceDesc with an
// Export handler that takes the request's encoding.
var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: collectortrace.TraceService_ServiceDesc.ServiceName,
	HandlerType: (*rawTraceServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: exportHandler}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    collectortrace.TraceService_ServiceDesc.Metadata,
}

func exportHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(rawExportRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(rawTraceServer).exportRaw(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: collectortrace.TraceService_Export_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(rawTraceServer).exportRaw(ctx, req.(*rawExportRequest))
	})
}

// GRPCConnLimits bound what one OTLP/gRPC connection may hold (see
// GRPCConnOptions). Zero durations mean no bound.
type GRPCConnLimits struct {
	// ReadTimeout bounds the connection's handshake (a client that sends
	// no HTTP/2 preface is dropped after it) and the receiving of each
	// request message, from its headers to its last byte: a slower request
	// is cancelled (the client gets CANCELLED) and its stream freed. It is
	// also how long a ping may go unanswered before the connection is
	// closed.
	ReadTimeout time.Duration
	// IdleTimeout closes a connection without an RPC in progress for this
	// long (GOAWAY, then close), and is how long a busy connection may be
	// silent before the server pings it.
	IdleTimeout time.Duration
}

// MaxStreamsPerConn bounds the concurrent RPCs of one OTLP/gRPC
// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: a client waits for a
// free stream). With MaxInFlight it bounds what one connection holds.
const MaxStreamsPerConn = 100

// MinPingInterval is the keepalive enforcement policy: a client pinging
// more often than this is sent GOAWAY "too_many_pings" and closed. Pings
// without an RPC in progress are allowed (an idle connection is closed by
// IdleTimeout, pings or not).
const MinPingInterval = 10 * time.Second

// GRPCConnOptions are the grpc.NewServer options that bound connections:
// the handshake timeout, the per-RPC receive timeout, idle connection
// close, dead peer detection, the keepalive ping policy and
// MaxStreamsPerConn. How many connections are open at once is the
// listener's business (the daemon wraps it in its connection cap).
func GRPCConnOptions(l GRPCConnLimits) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinPingInterval, PermitWithoutStream: true}),
	}
	kp := keepalive.ServerParameters{MaxConnectionIdle: l.IdleTimeout, Time: l.IdleTimeout, Timeout: l.ReadTimeout}
	if l.ReadTimeout > 0 {
		opts = append(opts, grpc.ConnectionTimeout(l.ReadTimeout), grpc.InTapHandle(receiveTimeout(l.ReadTimeout)))
	}
	return append(opts, grpc.KeepaliveParams(kp))
}

// receiveTimerKey holds the timer that cancels an RPC whose message has
// not arrived within the read timeout; Export stops it.
type receiveTimerKey struct{}

// receiveTimeout starts, for each RPC as its headers arrive, a timer that
// cancels the RPC's context after d: gRPC receives the request message
// under that context, so a client sending it slower than d is cut off.
// Export stops the timer once the message is in, so appending has no
// deadline of ours.
func receiveTimeout(d time.Duration) tap.ServerInHandle {
	return func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		ctx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(d, cancel)
		context.AfterFunc(ctx, func() { timer.Stop() })
		return context.WithValue(ctx, receiveTimerKey{}, timer), nil
	}
}

// messageReceived stops ctx's receive timer; it reports false when the
// timer had already cancelled the RPC.
func messageReceived(ctx context.Context) bool {
	if t, ok := ctx.Value(receiveTimerKey{}).(*time.Timer); ok && !t.Stop() {
		return ctx.Err() == nil
	}
	return true
}

// Export serves a request already unmarshalled (the service registered
// with collectortrace.RegisterTraceServiceServer): it is encoded again and
// decoded as exportRaw decodes a received one.
func (s *grpcService) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("%v: %v", ErrMalformed, err))
	}
	return s.export(ctx, body)
}

func (s *grpcService) exportRaw(ctx context.Context, req *rawExportRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	defer req.body.Free()
	return s.export(ctx, req.body.ReadOnlyData())
}

// export decodes and appends the encoded request body.
func (s *grpcService) export(ctx context.Context, body []byte) (*collectortrace.ExportTraceServiceResponse, error) {
	if !messageReceived(ctx) {
		return nil, status.Error(codes.Canceled, "the request was not received within read_timeout")
	}
	if !s.inFlight.tryAcquire() {
		return nil, statusWithRetry(codes.ResourceExhausted,
			fmt.Sprintf("ztsd is overloaded: %d OTLP requests in flight", cap(s.inFlight)), retryAfterOverloaded)
	}
	defer s.inFlight.release()
	mem := int64(len(body)) * BodyMemoryFactor
	if err := s.opt.Budget.TryReserve("OTLP request", mem); err != nil {
		return nil, statusWithRetry(codes.ResourceExhausted, err.Error(), retryAfterOverloaded)
	}
	defer s.opt.Budget.Release(mem)
	spans, rejected, msg, err := decodeWire(body, s.opt)
	if err != nil {
		if requestErrorStatus(err) == http.StatusRequestEntityTooLarge {
			return nil, status.Error(codes.ResourceExhausted, err.Error())
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if len(spans) > 0 {
		if err := s.app.Append(ctx, spans); err != nil {
			return nil, s.appendError(ctx, len(spans), err)
		}
	}
	return exportResponse(rejected, msg), nil
}

// appendError turns an Append error into a gRPC status.
func (s *grpcService) appendError(ctx context.Context, n int, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return status.FromContextError(ctxErr).Err()
	}
	st, code := appendErrorStatus(s.opt, err)
	if st >= 500 {
		s.opt.Logger.Error("OTLP append failed", "spans", n, "status", st, "err", err)
	}
	msg := strings.ToValidUTF8(code+": "+err.Error(), "\uFFFD")
	switch st {
	case http.StatusTooManyRequests:
		return statusWithRetry(codes.ResourceExhausted, msg, retryAfterOverloaded)
	case http.StatusServiceUnavailable:
		return statusWithRetry(codes.Unavailable, msg, retryAfterUnavailable)
	}
	return status.Error(grpcCodeOf(st), msg)
}

// BodyMemoryFactor is what a request is accounted as holding in the
// memory budget per byte of its encoding (the decoded message, the spans,
// their encoded chunks); the socket API uses the same factor.
const BodyMemoryFactor = 4

// statusWithRetry is a status carrying RetryInfo, which tells OTLP clients
// that the condition is transient and how long to wait.
func statusWithRetry(c codes.Code, msg string, after time.Duration) error {
	st := status.New(c, msg)
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)}); err == nil {
		st = withInfo
	}
	return st.Err()
}
