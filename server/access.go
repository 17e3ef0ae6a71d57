package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Access holds the uid/gid allow-lists checked against a unix-socket
// peer's credentials (SO_PEERCRED uid, primary gid and the peer process's
// supplementary groups). Owners (root and the daemon's own uid) may always
// read and write, whatever the lists say. Otherwise a peer may read when
// its uid is in ReadUIDs or WriteUIDs or one of its groups in ReadGIDs or
// WriteGIDs; it may write when its uid is in WriteUIDs or one of its
// groups in WriteGIDs. Peers of the optional TCP listener carry no
// credentials and are allowed when AllowTCP is set (the listener is off by
// default and meant for loopback).
type Access struct {
	Owners              []uint32
	ReadUIDs, WriteUIDs []uint32
	ReadGIDs, WriteGIDs []uint32
	AllowTCP            bool
	// Disabled turns the check off (tests, or a socket whose file mode
	// already restricts access enough).
	Disabled bool
}

// DefaultAccess allows the daemon's own uid and root (the Owners) to read
// and write, and nobody else; callers add the configured lists.
func DefaultAccess() Access {
	uid := uint32(os.Getuid())
	owners := []uint32{0}
	if uid != 0 {
		owners = append(owners, uid)
	}
	return Access{Owners: owners, AllowTCP: true}
}

type peerKey struct{}

// Peer is the identity of the process on the other end of a connection.
type Peer struct {
	Unix     bool
	UID, GID uint32
	PID      int32
	// Groups are the peer's primary gid and supplementary groups, read
	// when the connection was accepted (see peerGroups).
	Groups []uint32
}

// ConnContext is installed as http.Server.ConnContext: it records the
// peer's credentials for the access check.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return context.WithValue(ctx, peerKey{}, Peer{})
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil || cred == nil {
		return ctx
	}
	p := Peer{Unix: true, UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}
	p.Groups = peerGroups(p)
	return context.WithValue(ctx, peerKey{}, p)
}

// peerGroups returns the peer's primary gid plus its supplementary groups.
// They come from the "Groups:" line of /proc/<pid>/status, read right after
// accept, and are used only when that file's effective uid and gid are
// still the SO_PEERCRED ones (so a recycled pid cannot lend its groups);
// otherwise (the pid is not visible in our pid namespace, or /proc is not
// mounted) from the group database for the peer's uid.
func peerGroups(p Peer) []uint32 {
	if p.PID > 0 {
		if gs, err := procGroups(fmt.Sprintf("/proc/%d/status", p.PID), p.UID, p.GID); err == nil {
			return gs
		}
	}
	gs := []uint32{p.GID}
	u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10))
	if err != nil {
		return gs
	}
	ids, err := u.GroupIds()
	if err != nil {
		return gs
	}
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil && !slices.Contains(gs, uint32(g)) {
			gs = append(gs, uint32(g))
		}
	}
	return gs
}

// procGroups parses a /proc/<pid>/status file: the effective uid and gid
// (second field of "Uid:" and "Gid:") must be uid and gid; it returns gid
// followed by the "Groups:" list.
func procGroups(path string, uid, gid uint32) ([]uint32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	gs := []uint32{gid}
	var sawUID, sawGID, sawGroups bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid", "Gid":
			want := uid
			if key == "Gid" {
				want = gid
			}
			if len(f) < 2 || f[1] != strconv.FormatUint(uint64(want), 10) {
				return nil, fmt.Errorf("%s: effective %s is not the socket peer's %d", path, key, want)
			}
			sawUID = sawUID || key == "Uid"
			sawGID = sawGID || key == "Gid"
		case "Groups":
			sawGroups = true
			for _, s := range f {
				g, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("%s: group %q: %w", path, s, err)
				}
				if !slices.Contains(gs, uint32(g)) {
					gs = append(gs, uint32(g))
				}
			}
		}
	}
	if !sawUID || !sawGID || !sawGroups {
		return nil, fmt.Errorf("%s: no Uid, Gid or Groups line", path)
	}
	return gs, nil
}

// PeerFrom returns the peer recorded by ConnContext.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

func (a *Access) check(ctx context.Context, kind accessKind) error {
	if a.Disabled || kind == none {
		return nil
	}
	p, ok := PeerFrom(ctx)
	if !ok {
		return fmt.Errorf("access denied: the peer's credentials are unknown")
	}
	if !p.Unix {
		if a.AllowTCP {
			return nil
		}
		return fmt.Errorf("access denied: the TCP listener is not allowed by the access configuration")
	}
	if slices.Contains(a.Owners, p.UID) {
		return nil
	}
	groups := p.Groups
	if len(groups) == 0 {
		groups = []uint32{p.GID}
	}
	inAny := func(set []uint32) bool {
		return slices.ContainsFunc(groups, func(g uint32) bool { return slices.Contains(set, g) })
	}
	can := slices.Contains(a.WriteUIDs, p.UID) || inAny(a.WriteGIDs)
	if kind == read {
		can = can || slices.Contains(a.ReadUIDs, p.UID) || inAny(a.ReadGIDs)
	}
	if can {
		return nil
	}
	what := map[accessKind]string{read: "read", write: "write", admin: "use the admin endpoints (write access needed)"}[kind]
	return fmt.Errorf("access denied: uid %d gid %d groups %v may not %s (see [access] in the config)", p.UID, p.GID, groups, what)
}
