package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// Access holds the uid/gid allow-lists checked against a unix-socket
// peer's credentials (SO_PEERCRED). A peer may read when its uid is in
// ReadUIDs or WriteUIDs or its gid in ReadGIDs or WriteGIDs; it may write
// when its uid is in WriteUIDs or its gid in WriteGIDs. Peers of the
// optional TCP listener carry no credentials and are allowed when
// AllowTCP is set (the listener is off by default and meant for loopback).
type Access struct {
	ReadUIDs, WriteUIDs []uint32
	ReadGIDs, WriteGIDs []uint32
	AllowTCP            bool
	// Disabled turns the check off (tests, or a socket whose file mode
	// already restricts access enough).
	Disabled bool
}

// DefaultAccess allows the daemon's own uid and root to read and write.
func DefaultAccess() Access {
	uid := uint32(os.Getuid())
	return Access{ReadUIDs: []uint32{uid, 0}, WriteUIDs: []uint32{uid, 0}, AllowTCP: true}
}

type peerKey struct{}

// Peer is the identity of the process on the other end of a connection.
type Peer struct {
	Unix     bool
	UID, GID uint32
	PID      int32
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
	return context.WithValue(ctx, peerKey{}, Peer{Unix: true, UID: cred.Uid, GID: cred.Gid, PID: cred.Pid})
}

// PeerFrom returns the peer recorded by ConnContext.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

func (a *Access) check(ctx context.Context, write bool) error {
	if a.Disabled {
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
	can := slices.Contains(a.WriteUIDs, p.UID) || slices.Contains(a.WriteGIDs, p.GID)
	if !write {
		can = can || slices.Contains(a.ReadUIDs, p.UID) || slices.Contains(a.ReadGIDs, p.GID)
	}
	if can {
		return nil
	}
	what := "read"
	if write {
		what = "write"
	}
	return fmt.Errorf("access denied: uid %d gid %d may not %s (see [access] in the config)", p.UID, p.GID, what)
}
