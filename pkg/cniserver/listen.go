package cniserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Listen creates the unix socket socketPath for Serve:
//
//   - the socket's directory is created with mode 0700 if missing (an existing
//     directory's mode is left alone: it may be shared, e.g. /run);
//   - a stale socket left by a previous daemon is removed; a socket that still
//     accepts connections is not (error: another server is running), and a
//     path that is not a socket is never removed;
//   - the socket is made 0600: only root (the runtime) may talk to the daemon.
//
// The directory is created 0700 before the socket exists, so there is no
// window in which another user could connect.
func Listen(socketPath string) (net.Listener, error) {
	if socketPath == "" {
		return nil, errors.New("socket path: empty")
	}
	if !filepath.IsAbs(socketPath) {
		return nil, fmt.Errorf("socket path %q: must be absolute", socketPath)
	}
	dir := filepath.Dir(socketPath)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating socket directory %s: %w", dir, err)
		}
		// MkdirAll applies the umask; make the leaf exactly 0700.
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("setting mode of socket directory %s: %w", dir, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("socket directory %s: %w", dir, err)
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
