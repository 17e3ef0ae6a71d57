package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/trace"
)

func Example() {
	c := client.New("./ztsd.sock")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	id, _ := trace.ParseTraceID("7f128efec83c68ec733c1116ad0c9105")
	sp := &trace.Span{TraceID: id, SpanID: 1, StartNS: time.Now().UnixNano(), DurationNS: 2e6,
		Root: &trace.Record{Method: "GET /index.jsp", DurationNS: 2e6, Calls: 1}}
	sp.Attrs.Set("service.name", trace.String("checkout"))
	if err := c.Put(ctx, sp); err != nil {
		fmt.Println("put:", err)
		return
	}
	spans, err := c.Get(ctx, id)
	if errors.Is(err, client.ErrNotFound) {
		fmt.Println("not stored")
		return
	}
	fmt.Println(len(spans), err)
}

func ExampleClient_Search() {
	c := client.New("./ztsd.sock")
	ctx := context.Background()
	it := c.Search(client.Query{
		Attrs:       []trace.Attr{{Key: "service.name", Value: trace.String("checkout")}},
		MinDuration: 5 * time.Millisecond,
		Limit:       100,
	})
	for it.Next(ctx) {
		sp := it.Span()
		fmt.Println(sp.TraceID, sp.SpanID, time.Duration(sp.DurationNS))
	}
	if err := it.Err(); err != nil {
		fmt.Println("search:", err)
	}
}
