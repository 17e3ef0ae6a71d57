package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// WorkloadBaseNS is the start time of the first generated trace.
var WorkloadBaseNS = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Workload shapes generated traffic. Zero fields take the defaults noted.
type Workload struct {
	// Seed makes the traffic reproducible: equal seeds give equal spans.
	Seed uint64
	// MaxRecords bounds the method-call records of one span (default 200);
	// the size of a span is drawn from a Zipf law over 1..MaxRecords, so
	// most spans are small and a few are large (mean about 10).
	MaxRecords int
	// MaxSpansPerTrace bounds the spans of one trace (default 12).
	MaxSpansPerTrace int
	// ErrorRate is the fraction of spans that fail with an exception
	// (default 0.01).
	ErrorRate float64
	// Users is the number of distinct user ids (default 1,000,000): the
	// high-cardinality attribute.
	Users int
	// TraceGapNS is the mean gap between the start times of consecutive
	// traces (default 1 ms), so time-range searches select a slice.
	TraceGapNS int64
	// SpansOnly gives every span one record, its root (the operation), and
	// no nested method calls: the shape of an OTLP span (ingest/otlp maps
	// a span's name to its root record), for the space per span.
	SpansOnly bool
}

func (w Workload) withDefaults() Workload {
	if w.MaxRecords <= 0 {
		w.MaxRecords = 200
	}
	if w.MaxSpansPerTrace <= 0 {
		w.MaxSpansPerTrace = 12
	}
	if w.ErrorRate <= 0 {
		w.ErrorRate = 0.01
	}
	if w.Users <= 0 {
		w.Users = 1_000_000
	}
	if w.TraceGapNS <= 0 {
		w.TraceGapNS = int64(time.Millisecond)
	}
	return w
}

// SpanAttrs is the number of attributes every generated span carries (the
// DESIGN.md space budget is stated for spans of six attributes).
const SpanAttrs = 6

// Services and the other low-cardinality attribute values, exported so that
// searches can name values that are known to occur.
var (
	Services = []string{"frontend", "cart", "checkout", "payment", "inventory", "email",
		"shipping", "auth", "pricing", "audit", "search", "recommend"}
	routes = []string{"/api/orders", "/api/orders/{id}", "/api/cart", "/api/cart/items", "/api/pay",
		"/api/items", "/api/items/{id}", "/api/users/{id}", "/api/login", "/api/logout", "/health",
		"/api/ship", "/api/ship/{id}/track", "/api/search", "/api/recommend", "/api/prices",
		"/api/stock/{sku}", "/api/mail/send", "/api/audit", "/api/coupons"}
	httpMethods = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	statusOK    = []int64{200, 200, 200, 200, 200, 201, 204, 304, 400, 404}
	sqlTables   = []string{"orders", "order_items", "carts", "users", "items", "stock", "payments", "shipments", "coupons", "audit_log"}
	sqlShapes   = []string{
		"SELECT id, status, total FROM %s WHERE id = %d",
		"SELECT * FROM %s WHERE user_id = %d ORDER BY created DESC LIMIT 20",
		"UPDATE %s SET status = 'PAID', updated = now() WHERE id = %d",
		"INSERT INTO %s (id, user_id, created) VALUES (%d, ?, now())",
		"DELETE FROM %s WHERE id = %d",
	}
	exceptionClasses = []string{"java.sql.SQLTransientConnectionException", "java.net.SocketTimeoutException",
		"java.lang.IllegalStateException", "java.lang.NullPointerException", "com.acme.PaymentDeclinedException"}
)

// Generator produces the traffic of a Workload, trace by trace. It is
// deterministic: the n-th trace depends only on the seed and n. It is not
// safe for concurrent use.
type Generator struct {
	w       Workload
	r       *rand.Rand
	recs    *rand.Zipf
	methods []string
	traces  int64
}

// NewGenerator returns a generator for w.
func NewGenerator(w Workload) *Generator {
	w = w.withDefaults()
	r := rand.New(rand.NewPCG(w.Seed, w.Seed^0x5bd1e9955bd1e995))
	g := &Generator{w: w, r: r,
		// P(k) ∝ (2+k)^-1.75 over k = 0..MaxRecords-1: median 3 records,
		// mean about 10, a long tail up to MaxRecords.
		recs:    rand.NewZipf(r, 1.75, 2, uint64(w.MaxRecords-1)),
		methods: methodNames(w.Seed),
	}
	return g
}

// methodNames builds the method dictionary (a few hundred names, as one
// instrumented application has); it depends only on the seed.
func methodNames(seed uint64) []string {
	r := rand.New(rand.NewPCG(seed^0x1234, 77))
	pkgs := []string{"com.acme.shop", "com.acme.billing", "com.acme.inventory", "org.apache.catalina.core",
		"io.netty.channel", "com.zaxxer.hikari.pool", "org.hibernate.engine", "com.fasterxml.jackson.databind"}
	classes := []string{"OrderService", "CartController", "PaymentGateway", "StandardEngineValve",
		"HikariProxyStatement", "InventoryRepository", "UserDao", "PricingEngine", "EmailSender", "AuditLog",
		"SessionFactory", "ObjectMapper", "ChannelPipeline", "CouponRules", "ShipmentClient"}
	verbs := []string{"invoke", "handle", "executeQuery", "findById", "save", "compute", "send", "validate",
		"authorize", "serialize", "load", "flush", "lookup", "apply", "read"}
	sigs := []string{"()V", "(Ljava/lang/String;)V", "(J)Ljava/lang/Object;", "(Ljava/util/Map;)Z", "(I)I"}
	out := make([]string, 0, 400)
	seen := map[string]bool{}
	for len(out) < 400 {
		m := pkgs[r.IntN(len(pkgs))] + "." + classes[r.IntN(len(classes))] + "." + verbs[r.IntN(len(verbs))] + sigs[r.IntN(len(sigs))]
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// Traces returns how many traces the generator has produced.
func (g *Generator) Traces() int64 { return g.traces }

// Trace returns the next trace: one root span and 0..MaxSpansPerTrace-1
// nested child spans (each child's parent is an earlier span of the trace),
// every span with SpanAttrs attributes and its own record tree.
func (g *Generator) Trace() []*trace.Span {
	r := g.r
	var tid trace.TraceID
	for tid.IsZero() {
		hi, lo := r.Uint64(), r.Uint64()
		for i := range 8 {
			tid[i] = byte(hi >> (56 - 8*i))
			tid[8+i] = byte(lo >> (56 - 8*i))
		}
	}
	start := WorkloadBaseNS + g.traces*g.w.TraceGapNS + r.Int64N(g.w.TraceGapNS)
	g.traces++
	// Spans per trace: skewed towards few (1 + geometric, capped).
	n := 1
	for n < g.w.MaxSpansPerTrace && r.IntN(100) < 70 {
		n++
	}
	user := "u" + strconv.Itoa(1_000_000+r.IntN(g.w.Users))
	spans := make([]*trace.Span, n)
	for i := range spans {
		svc := Services[r.IntN(len(Services))]
		if i == 0 {
			svc = Services[0] // traffic enters through the frontend
		}
		sp := &trace.Span{TraceID: tid, SpanID: trace.SpanID(r.Uint64() | 1), Source: trace.SourceJSON}
		if i == 0 {
			sp.StartNS = start
		} else {
			parent := spans[r.IntN(i)]
			sp.ParentID = parent.SpanID
			sp.StartNS = parent.StartNS + r.Int64N(max(parent.DurationNS/2, 1))
		}
		isDB := i > 0 && r.IntN(3) == 0
		sp.Type = "http"
		if isDB {
			sp.Type = "db"
		}
		sp.Attrs = make(trace.Attrs, 0, SpanAttrs)
		sp.Attrs.Set("service.name", trace.String(svc))
		sp.Attrs.Set("http.route", trace.String(routes[r.IntN(len(routes))]))
		sp.Attrs.Set("user.id", trace.String(user))
		sp.Attrs.Set("host.name", trace.String(fmt.Sprintf("%s-%d", svc, r.IntN(8))))
		if isDB {
			sp.Attrs.Set("db.statement", trace.String(g.sql()))
		} else {
			sp.Attrs.Set("http.method", trace.String(httpMethods[r.IntN(len(httpMethods))]))
		}
		failed := r.Float64() < g.w.ErrorRate
		status := statusOK[r.IntN(len(statusOK))]
		if failed {
			status = 500
		}
		sp.Attrs.Set("http.status_code", trace.Int(status))
		nrec := 1 + int(g.recs.Uint64())
		if g.w.SpansOnly {
			nrec = 1
		}
		sp.Root = g.records(nrec, isDB)
		sp.DurationNS = sp.Root.DurationNS
		if failed {
			g.fail(sp)
		}
		sp.FillSummary()
		spans[i] = sp
	}
	return spans
}

func (g *Generator) sql() string {
	r := g.r
	return fmt.Sprintf(sqlShapes[r.IntN(len(sqlShapes))], sqlTables[r.IntN(len(sqlTables))], r.IntN(10_000_000))
}

// records builds a tree of n records: each new record is a child of a
// random record on the current call stack, so trees are both deep and
// wide; times nest (a child runs inside its parent, siblings in order).
func (g *Generator) records(n int, isDB bool) *trace.Record {
	r := g.r
	root := &trace.Record{Method: g.methods[r.IntN(len(g.methods))], Calls: 1}
	stack := []*trace.Record{root}
	for k := 1; k < n; k++ {
		// Return from 0..2 calls (never popping the root).
		for pop := r.IntN(3); pop > 0 && len(stack) > 1; pop-- {
			stack = stack[:len(stack)-1]
		}
		parent := stack[len(stack)-1]
		rec := &trace.Record{Method: g.methods[r.IntN(len(g.methods))], Calls: 1}
		if isDB && r.IntN(4) == 0 {
			rec.Attrs.Set("sql", trace.String(g.sql()))
		}
		parent.Children = append(parent.Children, rec)
		if len(stack) < 64 {
			stack = append(stack, rec)
		}
	}
	g.times(root, 0)
	return root
}

// times assigns start offsets and durations bottom-up: a record lasts its
// own time plus its children's, children run one after another.
func (g *Generator) times(rec *trace.Record, start int64) int64 {
	r := g.r
	self := 2_000 + r.Int64N(50_000) // 2–52 µs of own work
	if r.IntN(50) == 0 {
		self += r.Int64N(20_000_000) // an occasional slow call: up to 20 ms
	}
	rec.StartNS = start
	t := start + self/2
	for _, c := range rec.Children {
		t += g.times(c, t)
		rec.Calls += c.Calls
	}
	rec.DurationNS = t - start + self/2
	rec.Calls += int64(r.IntN(3)) // calls the tracer filtered out
	return rec.DurationNS
}

// fail marks sp as failed: an exception (with a cause and a stack) in a
// random record, status 500.
func (g *Generator) fail(sp *trace.Span) {
	r := g.r
	var recs []*trace.Record
	sp.Root.Walk(func(rec *trace.Record, _ int) bool { recs = append(recs, rec); return true })
	rec := recs[r.IntN(len(recs))]
	cls := exceptionClasses[r.IntN(len(exceptionClasses))]
	stack := make([]trace.StackFrame, 4+r.IntN(12))
	for i := range stack {
		stack[i] = trace.StackFrame{Class: "com.acme.shop.Frame" + strconv.Itoa(r.IntN(40)), Method: "call",
			File: "Frame.java", Line: int64(10 + r.IntN(500))}
	}
	rec.Exception = &trace.Exception{Class: cls,
		Message: fmt.Sprintf("request %d failed after %d ms", r.IntN(1_000_000), r.IntN(30_000)),
		Stack:   stack,
		Cause:   &trace.Exception{Class: "java.io.IOException", Message: "Connection reset by peer"}}
	sp.Error = true
}
