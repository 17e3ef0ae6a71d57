package storedir

import (
	"context"
	"fmt"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// jdbcSpan is a Zorka-like span: a servlet call whose DAO's JDBC call,
// three records down, carries the statement.
func jdbcSpan(i int) *trace.Span {
	stmt := fmt.Sprintf("select * from orders where id = %d", i)
	return &trace.Span{TraceID: trace.TraceID{byte(i >> 8), byte(i), 1}, SpanID: trace.SpanID(i + 1), Type: "http",
		StartNS: 1_700_000_000_000_000_000 + int64(i)*1000, DurationNS: 900, Calls: 3, Recs: 3, Source: trace.SourceZorka,
		Attrs: trace.Attrs{{Key: "component", Value: trace.String("http")}},
		Root: &trace.Record{Method: "Servlet.service", DurationNS: 900, Calls: 3,
			Attrs: trace.Attrs{{Key: "http.url", Value: trace.String("/orders")}},
			Children: []*trace.Record{{Method: "OrderDao.find", StartNS: 100, DurationNS: 700, Calls: 2,
				Children: []*trace.Record{{Method: "PreparedStatement.execute", StartNS: 200, DurationNS: 400, Calls: 1,
					Attrs: trace.Attrs{{Key: "db.rows", Value: trace.Int(int64(i % 7))}, {Key: "db.statement", Value: trace.String(stmt)}}}}}}}}
}

// TestRecordAttributesSearchable: attribute search finds the span whose
// record, at any depth, carries the attribute, in sealed blocks, in the
// open block and after a reopen (open block rebuilt from its rows).
func TestRecordAttributesSearchable(t *testing.T) {
	dir := t.TempDir()
	opt := testOptions()
	opt.MaxStoreSize = 1 << 30 // one store
	db := openTestDB(t, dir, opt)
	const n = 5000 // more than a block (1<<12 entries): sealed and open blocks
	spans := make([]*trace.Span, n)
	for i := range spans {
		spans[i] = jdbcSpan(i)
	}
	appendAll(t, db, spans, 100)
	check := func(label string) {
		t.Helper()
		for _, i := range []int{0, 1234, 4500, n - 1} {
			stmt := fmt.Sprintf("select * from orders where id = %d", i)
			res, err := db.Search(context.Background(), Query{Attrs: []trace.Attr{{Key: "db.statement", Value: trace.String(stmt)}}, Spans: true, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Spans) != 1 || res.Spans[0].SpanID != spans[i].SpanID {
				t.Errorf("%s: --attr db.statement=%q: %d results, want span %s", label, stmt, len(res.Spans), spans[i].SpanID)
			}
		}
		// A record attribute ANDs with span attributes; an int matches as text.
		res, err := db.Search(context.Background(), Query{Attrs: []trace.Attr{{Key: "component", Value: trace.String("http")},
			{Key: "db.rows", Value: trace.String("3")}}, Spans: true, Limit: MaxSearchLimit})
		if err != nil {
			t.Fatal(err)
		}
		if want := (n + 3) / 7; len(res.Spans) != want {
			t.Errorf("%s: component=http db.rows=3: %d results, want %d", label, len(res.Spans), want)
		}
	}
	check("open")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestDB(t, dir, opt)
	defer db.Close()
	check("reopened")
}
