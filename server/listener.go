package server

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimiter caps the connections open at once over every listener it
// wraps (the unix socket, the TCP listener and the OTLP/gRPC listener
// share one cap: see GRPCListener for how gRPC is refused). A connection
// accepted past the cap is answered "503 too many connections" (JSON, with
// Retry-After) and closed, so a client sees why instead of a hang; the
// daemon's file descriptors stay bounded. Max changes live (SIGHUP).
type ConnLimiter struct {
	max     atomic.Int64
	open    atomic.Int64
	refused atomic.Int64
	// refusing bounds the goroutines that answer refused connections;
	// beyond it a refused connection is closed without an answer.
	refusing chan struct{}
}

// NewConnLimiter returns a limiter allowing max open connections.
func NewConnLimiter(max int) *ConnLimiter {
	l := &ConnLimiter{refusing: make(chan struct{}, 64)}
	l.SetMax(max)
	return l
}

// SetMax changes the cap; connections already open stay open.
func (l *ConnLimiter) SetMax(max int) { l.max.Store(int64(max)) }

// Open returns the connections open now; Refused those refused so far.
func (l *ConnLimiter) Open() int64    { return l.open.Load() }
func (l *ConnLimiter) Refused() int64 { return l.refused.Load() }

// Listener wraps ln so that its connections count against the cap.
func (l *ConnLimiter) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, lim: l, refuse: l.refuseHTTP}
}

type limitedListener struct {
	net.Listener
	lim *ConnLimiter
	// refuse answers and closes a connection past the cap.
	refuse func(net.Conn)
}

// tooManyConnections is the whole answer to a connection past the cap.
var tooManyConnections = func() []byte {
	body := `{"error":"too many connections: the daemon's max_connections is reached; retry later","code":"too_many_connections"}` + "\n"
	return []byte(fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
}()

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l := ll.lim
		if l.open.Add(1) > l.max.Load() {
			l.open.Add(-1)
			l.refused.Add(1)
			ll.refuse(c)
			continue
		}
		return &limitedConn{Conn: c, lim: l}, nil
	}
}

// background runs answer (which answers c) and closes c, in a goroutine
// bounded by refusing: past that bound c is closed without an answer.
func (l *ConnLimiter) background(c net.Conn, answer func()) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		answer()
	}()
}

// refuseHTTP answers c with 503 and closes it, in the background: it reads
// (and discards) what the client sent for a moment first, so that closing
// does not reset the connection before the client read the answer.
func (l *ConnLimiter) refuseHTTP(c net.Conn) {
	l.background(c, func() {
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(tooManyConnections); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	})
}

type limitedConn struct {
	net.Conn
	lim  *ConnLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.lim.open.Add(-1) })
	return err
}

// UnwrapConn returns the connection a ConnLimiter listener wrapped (c
// itself otherwise), for code that needs the concrete type, such as
// ConnContext reading a unix peer's credentials.
func UnwrapConn(c net.Conn) net.Conn {
	if lc, ok := c.(*limitedConn); ok {
		return lc.Conn
	}
	return c
}
