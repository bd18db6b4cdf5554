package cniserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Listen creates the unix socket socketPath for Serve:
//
//   - the socket's directory is the server's own: created if missing and
//     made mode 0700 in every case (the kubelet creates a hostPath
//     directory 0755; an existing directory is chmodded), so that only root
//     reaches the socket whatever its own mode. A shared system directory
//     (SharedDirs: /, /run, /tmp, ...) is refused rather than chmodded, and
//     so is a directory whose mode cannot be set;
//   - a stale socket left by a previous daemon is removed; a socket that still
//     accepts connections is not (error: another server is running), and a
//     path that is not a socket is never removed;
//   - the socket is made 0600: only root (the runtime) may talk to the daemon.
//
// The directory is made 0700 before the socket exists, so there is no
// window in which another user could connect. Serve checks each peer's
// credentials as well (Options.PeerUIDs).
func Listen(socketPath string) (net.Listener, error) {
	if socketPath == "" {
		return nil, errors.New("socket path: empty")
	}
	if !filepath.IsAbs(socketPath) {
		return nil, fmt.Errorf("socket path %q: must be absolute", socketPath)
	}
	dir := filepath.Dir(socketPath)
	if err := ownDir(dir); err != nil {
		return nil, fmt.Errorf("socket path %s: %w", socketPath, err)
	}
	if err := removeStale(socketPath); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", socketPath, err)
	}
	// Close must not unlink the path of a socket a successor already
	// replaced; we remove stale sockets at start instead.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(socketPath, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("setting mode of socket %s: %w", socketPath, err)
	}
	return l, nil
}

// SharedDirs are directories Listen never takes as a socket's own: they
// hold other programs' files and must keep their modes.
var SharedDirs = []string{"/", "/run", "/var/run", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/var", "/var/lib", "/etc", "/home", "/root"}

// ownDir creates dir if missing and makes it exactly 0700 (MkdirAll
// applies the umask; an existing directory keeps its mode otherwise).
// Errors: dir is one of SharedDirs, is not a directory, or its mode
// cannot be set.
func ownDir(dir string) error {
	if slices.Contains(SharedDirs, filepath.Clean(dir)) {
		return fmt.Errorf("socket directory %s is shared with other programs: give the socket a directory of its own (e.g. /run/multinet), which is made 0700", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating socket directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s: not a directory (mode %s)", dir, fi.Mode())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("making socket directory %s mode 0700 (only root may reach the socket): %w", dir, err)
		}
	}
	return nil
}

// removeStale removes socketPath if it is a socket nobody listens on.
func removeStale(socketPath string) error {
	fi, err := os.Lstat(socketPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket %s: %w", socketPath, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("socket %s: exists and is not a socket (mode %s); refusing to remove it", socketPath, fi.Mode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	if c, err := d.DialContext(ctx, "unix", socketPath); err == nil {
		_ = c.Close()
		return fmt.Errorf("socket %s: another server is listening on it", socketPath)
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", socketPath, err)
	}
	return nil
}
