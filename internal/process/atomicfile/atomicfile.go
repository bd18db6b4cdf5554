// Package atomicfile replaces a file's content so that a reader sees, at
// every moment, either the old file or the complete new one, never a part:
// the bytes go to a temporary file in the target's directory, which is
// fsynced, given its mode and renamed over the target; then the directory is
// fsynced. A process running or reading the old file keeps its inode.
//
// It is the one implementation of that sequence in multinet: the attachment
// records (internal/node/state), the device-info files (pkg/spec/devinfo), multinetd's CNI
// config file (internal/node/daemon) and the CNI plugin binaries multinet-install
// copies onto the node all use it.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Option changes how WriteFile and Write write.
type Option func(*config)

type config struct {
	tempPrefix string
	noSync     bool
}

// TempPrefix makes the temporary file's name start with prefix (followed by
// random characters) instead of DefaultTempPrefix(path). A caller that
// removes stale temporary files by name, or filters them out of a directory
// watch, uses it to know which names are temporary. prefix must not contain
// a path separator.
func TempPrefix(prefix string) Option {
	return func(c *config) { c.tempPrefix = prefix }
}

// NoSync skips the fsync of the file and of the directory: the rename is
// still atomic for readers while the machine runs, but a power loss may leave
// the old content, an empty file or no file. Only for content that a later
// durable write replaces.
func NoSync() Option {
	return func(c *config) { c.noSync = true }
}

// DefaultTempPrefix is the start of the temporary file's name when no
// TempPrefix is given: "." + base name of path + ".tmp-" (a hidden file
// next to the target).
func DefaultTempPrefix(path string) string {
	return "." + filepath.Base(path) + ".tmp-"
}

// WriteFile replaces the content of path by data with the permission bits
// perm (set with chmod, so the umask does not apply). The directory of path
// must exist. On error the temporary file is removed and path is left as it
// was, except when only the final fsync of the directory fails: then path
// has the new content, which may not survive a power loss. Errors name path.
func WriteFile(path string, data []byte, perm fs.FileMode, opts ...Option) error {
	return Write(path, bytes.NewReader(data), perm, opts...)
}

// Write is WriteFile with the content read from r until EOF; an error
// reading r fails the write and leaves path as it was.
func Write(path string, r io.Reader, perm fs.FileMode, opts ...Option) (err error) {
	c := config{tempPrefix: DefaultTempPrefix(path)}
	for _, o := range opts {
		o(&c)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, c.tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			_ = f.Close() // a second Close only returns an error
			_ = os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !c.noSync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("write %s: fsync: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	if c.noSync {
		return nil
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: new content in place, but not durable: %w", path, err)
	}
	return nil
}

// syncDir fsyncs the directory dir, making a rename in it durable.
func syncDir(dir string) error { return Sync(dir) }

// Sync fsyncs the file or directory at path: it makes durable later what a
// Write with NoSync left in the page cache (the file's content, and the
// rename when path is its directory). Errors: path cannot be opened (an
// fs.ErrNotExist error when it is gone), the fsync fails.
func Sync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}
