package s3test

import (
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztsd/ztsd/config"
)

// FaultProxy sits between a client and the S3 server and, at random,
// answers 500 without forwarding, forwards and then answers 500 anyway
// (the request took effect; the client cannot know), delays the answer, or
// resets the connection before or after forwarding.
type FaultProxy struct {
	// URL is the proxy's endpoint.
	URL string
	// Failed, FailedAfter, Slow and Resets count the faults injected.
	Failed, FailedAfter, Slow, Resets atomic.Int64

	// Before and After, when set, are called with each request's method
	// and URL path, before it is forwarded and once the server answered
	// it (before the answer is relayed): tests kill the client there.
	Before, After func(method, path string)

	srv *Server
	on  atomic.Bool
	mu  sync.Mutex
	rng *rand.Rand
}

// NewFaultProxy starts a proxy to s (stopped at t's cleanup), injecting
// faults into about a quarter of the requests, chosen by seed.
func NewFaultProxy(t testing.TB, s *Server, seed uint64) *FaultProxy {
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p := &FaultProxy{srv: s, rng: rand.New(rand.NewPCG(seed, 3))}
	p.on.Store(true)
	forward := func(w http.ResponseWriter, r *http.Request) {
		if p.Before != nil {
			p.Before(r.Method, r.URL.Path)
		}
		if p.After == nil {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		p.After(r.Method, r.URL.Path)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.on.Load() {
			forward(w, r)
			return
		}
		p.mu.Lock()
		roll := p.rng.IntN(100)
		delay := time.Duration(p.rng.IntN(100)) * time.Millisecond
		p.mu.Unlock()
		switch {
		case roll < 6:
			p.Failed.Add(1)
			io.Copy(io.Discard, r.Body)
			http.Error(w, "<Error><Code>InternalError</Code><Message>injected</Message></Error>", http.StatusInternalServerError)
		case roll < 10:
			p.FailedAfter.Add(1)
			rp.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(w, "<Error><Code>InternalError</Code><Message>injected after</Message></Error>", http.StatusInternalServerError)
		case roll < 14:
			p.Resets.Add(1)
			if roll < 12 {
				rp.ServeHTTP(httptest.NewRecorder(), r)
			}
			reset(w)
		case roll < 24:
			p.Slow.Add(1)
			time.Sleep(delay)
			forward(w, r)
		default:
			forward(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	p.URL = hs.URL
	return p
}

// SetFaults turns the injection on or off.
func (p *FaultProxy) SetFaults(on bool) { p.on.Store(on) }

// Injected is how many faults were injected.
func (p *FaultProxy) Injected() int64 {
	return p.Failed.Load() + p.FailedAfter.Load() + p.Resets.Load() + p.Slow.Load()
}

// Config is the server's Config with the proxy as the endpoint.
func (p *FaultProxy) Config() config.ObjectStoreConfig {
	c := p.srv.Config()
	c.Endpoint = p.URL
	return c
}

// reset closes the client's connection with a TCP RST.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	c, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
