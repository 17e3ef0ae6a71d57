package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// grpcAddr is the address the daemon logged for its OTLP/gRPC listener.
func grpcAddr(t testing.TB, d *daemontest.Daemon) string {
	t.Helper()
	m := regexp.MustCompile(`listening for OTLP/gRPC.*addr=(\S+)`).FindStringSubmatch(d.Stderr())
	if m == nil {
		t.Fatalf("no OTLP/gRPC listener logged:\n%s", d.Stderr())
	}
	return m[1]
}

// exportOne sends one span of trace id over a new OTLP/gRPC connection.
func exportOne(addr string, id trace.TraceID) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := uint64(time.Now().UnixNano())
	_, err = collectortrace.NewTraceServiceClient(conn).Export(ctx, &collectortrace.ExportTraceServiceRequest{
		ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: id[:], SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Name: "grpc-limits",
			StartTimeUnixNano: now, EndTimeUnixNano: now + 1000}}}}}}})
	return err
}

// slowGRPCMessage speaks HTTP/2 to the OTLP/gRPC listener: it starts an
// Export whose 100-byte message never gets past its third byte, answers
// the daemon's pings, and returns when the daemon ended the RPC and when
// it closed the connection (measured from the message's first bytes), and
// the daemon's SETTINGS_MAX_CONCURRENT_STREAMS.
func slowGRPCMessage(t testing.TB, addr string) (rpcEnded, closed time.Duration, grpcStatus string, maxStreams uint32) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "ztsd"},
		{":path", "/opentelemetry.proto.collector.trace.v1.TraceService/Export"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	if err := errors.Join(fr.WriteSettings(),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}),
		fr.WriteData(1, false, []byte{0, 0, 0, 0, 100, 0x0a, 0x62, 0x0a})); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("slow gRPC message: connection not closed by the daemon: %v", err)
			}
			return rpcEnded, time.Since(t0), grpcStatus, maxStreams
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				f.ForeachSetting(func(s http2.Setting) error {
					if s.ID == http2.SettingMaxConcurrentStreams {
						maxStreams = s.Val
					}
					return nil
				})
				fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() && rpcEnded == 0 {
				rpcEnded = time.Since(t0)
				grpcStatus = f.PseudoValue("status") + " grpc-status " + headerValue(f, "grpc-status") + " " + headerValue(f, "grpc-message")
			}
		case *http2.RSTStreamFrame:
			if rpcEnded == 0 {
				rpcEnded = time.Since(t0)
				grpcStatus = "RST_STREAM " + f.ErrCode.String()
			}
		}
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.RegularFields() {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// TestGRPCConnectionLimits: the OTLP/gRPC listener holds the API's
// limits. Connections that never send the HTTP/2 preface are dropped
// after read_timeout; gRPC connections count against max_connections, and
// past it an export fails at once with UNAVAILABLE "too many connections"
// (counted in ztsd_connections_refused_total); an Export whose message
// arrives slower than read_timeout is ended, and the then idle connection
// closed after idle_timeout; a normal export works afterwards.
func TestGRPCConnectionLimits(t *testing.T) {
	t.Parallel()
	const maxConns = 20
	d := daemontest.New(t, fmt.Sprintf("otlp_grpc_listen = \"127.0.0.1:0\"\n[limits]\nread_timeout = \"1s\"\n"+
		"idle_timeout = \"1s\"\nmax_connections = %d", maxConns))
	d.Start()
	addr := grpcAddr(t, d)
	// The start-up health check's keep-alive connection would hold one of
	// the cap.
	d.Client.Close()
	time.Sleep(50 * time.Millisecond)

	// maxConns raw TCP connections that send nothing take every connection.
	t0 := time.Now()
	silent := make([]net.Conn, maxConns)
	for i := range silent {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent[i] = c
	}
	time.Sleep(100 * time.Millisecond) // let the daemon accept them all

	// Past the cap, an export fails at once, and says why.
	tRefused := time.Now()
	err := exportOne(addr, trace.TraceID{0xfe, 1})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "too many connections") {
		t.Fatalf("export past max_connections: %v", err)
	}
	t.Logf("export past max_connections refused in %v: %v", time.Since(tRefused).Round(time.Millisecond), err)

	// The daemon drops every silent connection after read_timeout (the
	// gRPC handshake timeout).
	for i, c := range silent {
		c.SetReadDeadline(t0.Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("silent connection %d: not closed by the daemon: %v", i, err)
		}
	}
	took := time.Since(t0)
	t.Logf("%d silent connections closed by the daemon %v after they opened (read_timeout 1s)", maxConns, took.Round(time.Millisecond))
	if took < 900*time.Millisecond {
		t.Errorf("silent connections closed after %v, before read_timeout", took)
	}

	// An Export whose message is stuck is ended after read_timeout, and
	// its connection, idle then, closed after idle_timeout.
	rpcEnded, closed, st, maxStreams := slowGRPCMessage(t, addr)
	t.Logf("slow message: RPC ended after %v (%s), connection closed after %v; max concurrent streams %d",
		rpcEnded.Round(time.Millisecond), st, closed.Round(time.Millisecond), maxStreams)
	if rpcEnded < 900*time.Millisecond || rpcEnded > 3*time.Second {
		t.Errorf("slow message: RPC ended after %v, want read_timeout 1s", rpcEnded)
	}
	if closed < rpcEnded+900*time.Millisecond || closed > rpcEnded+5*time.Second {
		t.Errorf("slow message: connection closed %v after the RPC ended, want idle_timeout 1s", closed-rpcEnded)
	}
	if maxStreams != 100 {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want 100", maxStreams)
	}

	// A normal export works and is stored.
	id := trace.TraceID{0xfe, 2}
	if err := exportOne(addr, id); err != nil {
		t.Fatalf("export after the slow clients: %v", err)
	}
	spans, err := d.Client.Get(context.Background(), id)
	if err != nil || len(spans) != 1 || spans[0].Root == nil || spans[0].Root.Method != "grpc-limits" {
		t.Fatalf("exported span: %v %v", spans, err)
	}
	if n := metric(t, d.Client, "ztsd_connections_refused_total"); n < 1 {
		t.Errorf("ztsd_connections_refused_total = %v after a refused gRPC connection", n)
	} else {
		t.Logf("ztsd_connections_refused_total = %v", n)
	}
}
