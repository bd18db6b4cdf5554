package nodeexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// ErrLeavesRoot is the cause of a ResolveError for a path or symlink whose
// ".." climbs above the node's "/": the node would stay at "/" (the kernel
// clamps "/.." to "/"), so such a link was written for another root, and is
// refused rather than clamped (docs/decisions/nodeexec.md "Symlinks resolved
// inside the node root").
var ErrLeavesRoot = errors.New(`".." above the node's root`)

// ResolveError is why Resolve could not resolve a node path.
type ResolveError struct {
	// Path is the node path asked for.
	Path string
	// Root is the node's root in the daemon's view.
	Root string
	// Link and Target are the last symlink followed (a node path) and what
	// it holds; empty when none was.
	Link, Target string
	// Err is ErrLeavesRoot, syscall.ELOOP (a loop, or more than 255 links),
	// or the file system's error reading a component.
	Err error
}

func (e *ResolveError) Error() string {
	msg := fmt.Sprintf("node path %s (node root %s)", e.Path, e.Root)
	if e.Link != "" {
		msg += fmt.Sprintf(" via symlink %s -> %s", e.Link, e.Target)
	}
	return msg + ": " + e.Err.Error()
}

func (e *ResolveError) Unwrap() error { return e.Err }

// aboveRoot stands for the node's "/" in the paths the resolver walks: a
// component no file name and no symlink can hold (it has a NUL byte), so
// only the resolver's own rewriting of absolute links leads into it, and a
// ".." out of it reaches a directory above the node's root that the walk
// cannot leave again without being seen (resolveVFS.daemonPath).
const aboveRoot = "\x00node-root"

// Resolve returns the daemon's path of nodePath, a path in the node's view
// (a relative one is taken from the node's "/", the working directory of
// every delegate): root (the node's root in the daemon's view; "" is "/")
// joined with nodePath after every symlink in it, the last component
// included, is resolved as the node resolves it: an absolute link from the
// node's "/", that is from root, a relative link from the link's directory.
// The path is walked by github.com/cyphar/filepath-securejoin (the resolver
// runc uses for paths in a container's root), which never leaves root.
//
// The result holds no symlink when Resolve returns (a symlink swapped in
// afterwards is not seen; callers that open it must not follow a final
// link, and callers that exec it run the node path chrooted, where the
// kernel resolves it the same way). It need not exist: a missing component
// or a dangling link's target makes it the path the missing file would
// have.
//
// Errors, a *ResolveError naming nodePath, root and the last link followed:
// a ".." that would climb above the node's "/", in nodePath or in a link
// (ErrLeavesRoot: the node clamps it, Resolve refuses it); a loop, or more
// than 255 links (syscall.ELOOP); a component that cannot be read (its
// error: not a directory or missing is no error, see above); nodePath or
// root holding a NUL byte.
func Resolve(root, nodePath string) (string, error) {
	root = filepath.Clean("/" + root)
	if strings.ContainsRune(nodePath, 0) || strings.ContainsRune(root, 0) {
		return "", &ResolveError{Path: nodePath, Root: root, Err: errors.New("NUL byte in path")}
	}
	v := &resolveVFS{root: root}
	got, err := securejoin.SecureJoinVFS("/", "/"+aboveRoot+"/"+nodePath, v)
	if err == nil {
		var ok bool
		if got, ok = v.daemonPath(got); !ok {
			err = errLeft
		}
	}
	if err != nil {
		re := &ResolveError{Path: nodePath, Root: root, Link: v.link, Target: v.target, Err: err}
		switch {
		case errors.Is(err, errLeft):
			re.Err = ErrLeavesRoot
		case errors.Is(err, syscall.ELOOP):
			re.Err = syscall.ELOOP // securejoin's message names the walker's internal path
		}
		return "", re
	}
	return got, nil
}

// errLeft is resolveVFS's error for a path above the node's root.
var errLeft = errors.New("left the node root")

// resolveVFS is the file system securejoin walks: "/<aboveRoot>/p" is the
// node's p (root/p in the daemon's view); any other path is above the
// node's root, reached only by a ".." out of it, and fails with errLeft.
// Absolute link targets are rewritten to start at "/<aboveRoot>". It
// remembers the last link read, for errors. One per Resolve.
type resolveVFS struct {
	root         string
	link, target string
}

// daemonPath maps a walker path to the daemon's path; ok is false for a
// path above the node's root.
func (v *resolveVFS) daemonPath(name string) (string, bool) {
	rest, ok := v.nodePath(name)
	if !ok {
		return "", false
	}
	return filepath.Join(v.root, rest), true
}

// nodePath maps a walker path to the node path it stands for.
func (v *resolveVFS) nodePath(name string) (string, bool) {
	rest, ok := strings.CutPrefix(filepath.Clean(name), "/"+aboveRoot)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	if rest == "" {
		rest = "/"
	}
	return rest, true
}

func (v *resolveVFS) Lstat(name string) (os.FileInfo, error) {
	p, ok := v.daemonPath(name)
	if !ok {
		return nil, errLeft
	}
	if p == v.root {
		return os.Stat(p) // the node's "/" is a directory to the node, even when root is a link
	}
	return os.Lstat(p)
}

func (v *resolveVFS) Readlink(name string) (string, error) {
	p, ok := v.daemonPath(name)
	if !ok {
		return "", errLeft
	}
	dest, err := os.Readlink(p)
	if err != nil {
		return "", err
	}
	v.link, _ = v.nodePath(name)
	v.target = dest
	if filepath.IsAbs(dest) {
		return "/" + aboveRoot + dest, nil
	}
	return dest, nil
}
