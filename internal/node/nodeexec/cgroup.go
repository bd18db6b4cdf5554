package nodeexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Cgroup is one node cgroup, Path, in every cgroup hierarchy the node
// mounts under /sys/fs/cgroup (cgroup v1: one per controller set; v2: the
// unified one; hybrid: both). Delegates placed in it run as the node's
// processes: a memory limit or CPU weight on the daemon's container does not
// apply to them.
type Cgroup struct {
	// Path is the cgroup path from the node's hierarchy roots ("/" is the
	// root cgroup).
	Path string
	// dirs are the cgroup's directories in the daemon's view.
	dirs []string
}

// NewCgroup finds path in every cgroup hierarchy mounted under
// root/sys/fs/cgroup (root as in Exec.Root), reading the daemon's
// /proc/self/mountinfo. Errors: no cgroup hierarchy is mounted there, a
// hierarchy is mounted with a cgroup namespace root that does not contain
// path (a container's private cgroup namespace: mount the node's root
// instead), or path does not exist in a hierarchy.
func NewCgroup(root, path string) (*Cgroup, error) {
	if root == "" {
		root = "/"
	}
	if path == "" || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("cgroup %q: want an absolute cgroup path", path)
	}
	path = filepath.Clean(path)
	base := filepath.Join(root, "sys/fs/cgroup")
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(base))
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: reading mountinfo: %w", path, err)
	}
	c := &Cgroup{Path: path}
	seen := map[string]bool{}
	for _, m := range mounts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		// The same hierarchy mounted twice counts once.
		key := m.FSType + " " + hierarchyKey(m.VFSOptions)
		if m.FSType == "cgroup" && seen[key] {
			continue
		}
		seen[key] = true
		rel, err := filepath.Rel(m.Root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("cgroup %s: the hierarchy at %s is mounted from %s (a private cgroup namespace?); mount the node's root", path, m.Mountpoint, m.Root)
		}
		dir := filepath.Join(m.Mountpoint, rel)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("cgroup %s in %s: %w", path, m.Mountpoint, err)
		}
		c.dirs = append(c.dirs, dir)
	}
	if len(c.dirs) == 0 {
		return nil, fmt.Errorf("cgroup %s: no cgroup hierarchy is mounted under %s", path, base)
	}
	return c, nil
}

// hierarchyKey names a v1 hierarchy by its controllers (the super options,
// e.g. "rw,cpu,cpuacct" or "rw,name=systemd").
func hierarchyKey(vfsOpts string) string {
	var ctrl []string
	for _, o := range strings.Split(vfsOpts, ",") {
		switch o {
		case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "xattr", "nsdelegate", "memory_recursiveprot":
		default:
			ctrl = append(ctrl, o)
		}
	}
	return strings.Join(ctrl, ",")
}

// Dirs returns the cgroup's directory in each hierarchy, in the daemon's
// view.
func (c *Cgroup) Dirs() []string { return append([]string(nil), c.dirs...) }

// Place moves process pid (in the daemon's PID namespace) into the cgroup
// in every hierarchy. Errors name the hierarchy that refused it; the
// hierarchies before it already hold the process.
func (c *Cgroup) Place(pid int) error {
	b := []byte(strconv.Itoa(pid))
	var errs []error
	for _, d := range c.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), b, 0); err != nil {
			errs = append(errs, fmt.Errorf("moving pid %d into cgroup %s: %w", pid, d, err))
		}
	}
	return errors.Join(errs...)
}
