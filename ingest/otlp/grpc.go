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
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed requests (otlptracegrpc WithCompressor("gzip"))
	"google.golang.org/grpc/status"
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
func NewGRPCService(app Appender, opt Options) collectortrace.TraceServiceServer {
	opt = opt.withDefaults()
	return &grpcService{app: app, opt: opt, inFlight: newLimiter(opt.MaxInFlight)}
}

// Register registers the OTLP TraceService on s (a *grpc.Server).
func Register(s grpc.ServiceRegistrar, app Appender, opt Options) {
	collectortrace.RegisterTraceServiceServer(s, NewGRPCService(app, opt))
}

// GRPCServerOptions are the grpc.NewServer options that apply opt to the
// transport: the received message size (after decompression, which gRPC
// bounds by the same limit) is bounded by opt.MaxBodySize.
func GRPCServerOptions(opt Options) []grpc.ServerOption {
	opt = opt.withDefaults()
	size := opt.MaxBodySize
	if size > math.MaxInt32 {
		size = math.MaxInt32
	}
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(int(size))}
}

func (s *grpcService) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	if !s.inFlight.tryAcquire() {
		return nil, statusWithRetry(codes.ResourceExhausted,
			fmt.Sprintf("ztsd is overloaded: %d OTLP requests in flight", cap(s.inFlight)), retryAfterOverloaded)
	}
	defer s.inFlight.release()
	mem := int64(proto.Size(req)) * BodyMemoryFactor
	if err := s.opt.Budget.TryReserve("OTLP request", mem); err != nil {
		return nil, statusWithRetry(codes.ResourceExhausted, err.Error(), retryAfterOverloaded)
	}
	defer s.opt.Budget.Release(mem)
	spans, rejected, msg, err := mapRequest(req, nil, s.opt)
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
