package server

import (
	"bytes"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// GRPCListener wraps ln, an OTLP/gRPC listener, so that its connections
// count against the same cap as the API's. A connection past the cap is
// answered in HTTP/2, as a gRPC client understands it: its first RPC
// fails with UNAVAILABLE "too many connections ..." (which OTLP exporters
// retry), then GOAWAY carrying the same message, then close.
func (l *ConnLimiter) GRPCListener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, lim: l, refuse: l.refuseGRPC}
}

// tooManyConnectionsGRPC is the grpc-message of a refused RPC (printable
// ASCII without '%': it needs no percent-encoding).
const tooManyConnectionsGRPC = "too many connections: the daemon's max_connections is reached; retry later"

// refuseGRPC answers a connection past the cap in the background, within
// a second: the server preface, then, to the client's first HEADERS, a
// trailers-only response with grpc-status UNAVAILABLE, and GOAWAY. A
// client that does not speak HTTP/2 is closed without an answer.
func (l *ConnLimiter) refuseGRPC(c net.Conn) {
	l.background(c, func() {
		c.SetDeadline(time.Now().Add(time.Second))
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
			return
		}
		fr := http2.NewFramer(c, c)
		if fr.WriteSettings() != nil {
			return
		}
		var stream uint32
		for range 16 { // the client's SETTINGS, WINDOW_UPDATE, then its HEADERS
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
				fr.WriteSettingsAck()
			}
			if hf, ok := f.(*http2.HeadersFrame); ok {
				stream = hf.StreamID
				break
			}
		}
		if stream != 0 {
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			for _, h := range [][2]string{{":status", "200"}, {"content-type", "application/grpc"},
				{"grpc-status", "14"}, {"grpc-message", tooManyConnectionsGRPC}} {
				enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
			}
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block.Bytes(),
				EndStream: true, EndHeaders: true}) != nil {
				return
			}
		}
		fr.WriteGoAway(stream, http2.ErrCodeNo, []byte(tooManyConnectionsGRPC))
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	})
}
