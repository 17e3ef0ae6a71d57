package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
)

// TestQueryAPIAccessSecondUID: the Jaeger and Tempo query APIs sit behind
// the same read check as /v1 on the socket: a uid outside the read lists
// gets 403 on /api/services and /api/search, one in a read group gets the
// answers (a real second uid, see requestsAs).
func TestQueryAPIAccessSecondUID(t *testing.T) {
	requireRoot(t)
	const readGroup = 4343
	d := daemontest.New(t, fmt.Sprintf("[access]\nwrite_uids = [1001]\nread_gids = [%d]", readGroup))
	d.Start()
	openSocketToAll(t, d)
	if r := rawRequest(t, d.Socket, "POST", "/v1/traces", "application/x-ndjson", bytes.NewReader(marshalLines(t, workload.Spans(7, 3)))); r.status != 200 {
		t.Fatalf("write as root: %d %s", r.status, r.body)
	}
	reqs := []string{"GET /api/services", "GET /api/search?limit=5", "GET /api/v3/services"}
	for _, c := range []struct {
		name   string
		groups []uint32
		want   int
	}{{"no read access", nil, 403}, {"read group", []uint32{readGroup}, 200}} {
		t.Run(c.name, func(t *testing.T) {
			got, bodies := requestsAs(t, d.Socket, nobody, nobody, c.groups, nil, reqs...)
			for i, req := range reqs {
				if got[i] != c.want {
					t.Errorf("%s as uid %d groups %v: %d, want %d: %s", req, nobody, c.groups, got[i], c.want, bodies[i])
				}
				if c.want == 403 && !strings.Contains(bodies[i], "may not read") {
					t.Errorf("%s: a 403 should say why: %s", req, bodies[i])
				}
			}
			if c.want == 200 && (!strings.Contains(bodies[0], `"data":[`) || strings.Contains(bodies[0], `"data":[]`) ||
				!strings.Contains(bodies[1], `"traceID"`)) {
				t.Errorf("read access answers no data: %s / %s", bodies[0], bodies[1])
			}
		})
	}
}
