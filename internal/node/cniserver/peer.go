package cniserver

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"golang.org/x/sys/unix"
)

// DefaultPeerUIDs are the user ids whose connections a Server serves when
// Options.PeerUIDs is empty: root on the node, i.e. the container runtime
// (multinet-shim) and the delegates multinetd runs (multinet-ipam).
var DefaultPeerUIDs = []uint32{0}

// PeerObserver is an optional interface of an Options.Observer: OnPeerRefused
// is called once per connection refused because of its peer (uid is the
// peer's user id, or the max uint32 when it could not be read). It must be
// cheap and safe for concurrent use.
type PeerObserver interface {
	OnPeerRefused(uid uint32)
}

// PeerRefusedError is a connection refused because of the process at its
// other end (SO_PEERCRED): not one of the allowed user ids, or no
// credentials to read (not a unix socket).
type PeerRefusedError struct {
	// UID and PID are the peer's credentials (when Known).
	UID, PID uint32
	Known    bool
	// Allowed are the user ids the server serves.
	Allowed []uint32
	// Err is why the credentials could not be read (when !Known).
	Err error
}

func (e *PeerRefusedError) Error() string {
	if !e.Known {
		return fmt.Sprintf("peer credentials unreadable (SO_PEERCRED): %v; only uid %v is served", e.Err, e.Allowed)
	}
	return fmt.Sprintf("peer uid %d (pid %d) is not allowed: only uid %v is served (SO_PEERCRED)", e.UID, e.PID, e.Allowed)
}

func (e *PeerRefusedError) Unwrap() error { return e.Err }

// checkPeer reads the credentials of conn's peer, as the kernel recorded
// them at connect(2) (SO_PEERCRED), and returns a *PeerRefusedError
// unless its uid is one of allowed.
func checkPeer(conn net.Conn, allowed []uint32) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return &PeerRefusedError{Allowed: allowed, Err: fmt.Errorf("%T is not a unix socket", conn)}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return &PeerRefusedError{Allowed: allowed, Err: err}
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return &PeerRefusedError{Allowed: allowed, Err: err}
	}
	if credErr != nil {
		return &PeerRefusedError{Allowed: allowed, Err: credErr}
	}
	if !slices.Contains(allowed, cred.Uid) {
		return &PeerRefusedError{UID: cred.Uid, PID: uint32(cred.Pid), Known: true, Allowed: allowed}
	}
	return nil
}

// peerUID is the uid an Observer is told of for a refusal.
func peerUID(err error) uint32 {
	var pe *PeerRefusedError
	if errors.As(err, &pe) && pe.Known {
		return pe.UID
	}
	return ^uint32(0)
}
