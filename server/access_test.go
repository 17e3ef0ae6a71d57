package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeStatus(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProcGroups: the supplementary groups come from the "Groups:" line,
// and only when the file's effective uid and gid are the socket peer's (a
// recycled pid must not lend its groups).
func TestProcGroups(t *testing.T) {
	status := "Name:\tcat\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 4242 \n"
	gs, err := procGroups(writeStatus(t, status), 1000, 1000)
	if err != nil || !slices.Equal(gs, []uint32{1000, 4, 24, 4242}) {
		t.Fatalf("groups %v, %v; want [1000 4 24 4242]", gs, err)
	}
	if _, err := procGroups(writeStatus(t, status), 1001, 1000); err == nil || !strings.Contains(err.Error(), "effective Uid") {
		t.Fatalf("another uid's status file: %v, want an error naming the uid mismatch", err)
	}
	if _, err := procGroups(writeStatus(t, "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n"), 1, 1); err == nil {
		t.Fatal("a status file without Groups: accepted")
	}
	// Our own process: /proc/self/status matches our credentials.
	self, err := procGroups("/proc/self/status", uint32(os.Geteuid()), uint32(os.Getegid()))
	if err != nil || self[0] != uint32(os.Getegid()) {
		t.Fatalf("/proc/self/status: %v, %v", self, err)
	}
}

// TestAccessCheck: owners always pass; other peers pass by uid or by any of
// their groups; admin needs what write needs.
func TestAccessCheck(t *testing.T) {
	a := Access{Owners: []uint32{0, 990}, WriteUIDs: []uint32{1001}, ReadGIDs: []uint32{50}, WriteGIDs: []uint32{60}}
	peer := func(uid, gid uint32, groups ...uint32) context.Context {
		return context.WithValue(context.Background(), peerKey{}, Peer{Unix: true, UID: uid, GID: gid, Groups: append([]uint32{gid}, groups...)})
	}
	cases := []struct {
		name              string
		ctx               context.Context
		read, write, admn bool
	}{
		{"root", peer(0, 0), true, true, true},
		{"daemon uid", peer(990, 990), true, true, true},
		{"write uid", peer(1001, 1001), true, true, true},
		{"stranger", peer(2000, 2000), false, false, false},
		{"supplementary read group", peer(2000, 2000, 7, 50), true, false, false},
		{"supplementary write group", peer(2000, 2000, 60), true, true, true},
		{"primary write group", peer(2000, 60), true, true, true},
		{"no credentials", context.Background(), false, false, false},
	}
	for _, c := range cases {
		for kind, want := range map[accessKind]bool{read: c.read, write: c.write, admin: c.admn} {
			if err := a.check(c.ctx, kind); (err == nil) != want {
				t.Errorf("%s, kind %d: err %v, want allowed=%v", c.name, kind, err, want)
			}
		}
	}
}
