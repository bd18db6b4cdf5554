package netconf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/multinet/multinet/internal/node/nodeexec"
)

// maxConfFileBytes bounds one CNI config file read from disk.
const maxConfFileBytes = 1 << 20

// ConfDirOptions configure a ConfDir.
type ConfDirOptions struct {
	// Dir is the CNI config directory, e.g. "/etc/cni/net.d". A missing
	// directory holds no configs (as in libcni).
	Dir string
	// SkipFile is the base name of multinet's own generated config, e.g.
	// "00-multinet.conflist"; that file is never used.
	SkipFile string
	// ShimType is multinet's shim plugin type; any config with a plugin of
	// this type is never used. Empty means ShimType.
	ShimType string
	// Root is the node's root file system in the daemon's view (multinetd's
	// nodeRoot: "/" for a host process, "/host" in its DaemonSet). When set,
	// Dir, the paths given to LoadFile and the sub-directories of
	// .conflist files are node paths, read with every symlink in them
	// resolved inside Root as the node resolves it (nodeexec.Resolve): a
	// symlinked conf dir, sub-directory or conf file whose link is absolute
	// is read from the node's root, not the daemon's. A link that climbs
	// above the node's "/" or loops is an error naming the path. Empty:
	// paths are the daemon's own, read as they are.
	Root string
}

// ConfDir finds CNI configs in one directory by network name (spec §3.4.1
// rules 2 and 3) and picks the default network's file (§6). It is safe for
// concurrent use.
//
// Each call re-reads the directory listing and stats each config file (a few
// µs), but parses a file only when its modification time or size changed
// since it was last parsed: configs are found by their content ("name"), so a
// cache keyed by file name alone would go stale, and an fsnotify watch would
// tie this pure package to a goroutine's lifetime. Files that fail to parse are
// skipped (and named in the not-found error) rather than failing every lookup.
type ConfDir struct {
	root     string
	dir      string
	skip     string
	shimType string

	mu    sync.Mutex
	files map[string]*cachedFile // by full path
}

type cachedFile struct {
	modTime time.Time
	size    int64
	list    *libcni.NetworkConfigList // nil when err != nil
	err     error                     // parse error; errors.Is(err, errShimType) for the shim's configs
	seen    bool                      // mark for pruning
}

type dirEntry struct {
	path string
	ext  string
	f    *cachedFile
}

// NewConfDir returns an index of the CNI configs in o.Dir.
func NewConfDir(o ConfDirOptions) *ConfDir {
	st := o.ShimType
	if st == "" {
		st = ShimType
	}
	return &ConfDir{root: o.Root, dir: o.Dir, skip: o.SkipFile, shimType: st, files: map[string]*cachedFile{}}
}

// daemonPath is where the daemon reads the path p of the node (Root).
func daemonPath(root, p string) (string, error) {
	if root == "" {
		return p, nil
	}
	return nodeexec.Resolve(root, p)
}

// Dir returns the directory this ConfDir reads.
func (d *ConfDir) Dir() string { return d.dir }

// Lookup returns the config list whose "name" is name (spec §3.4.1): the
// lexically first .conflist file with that name, else the lexically first
// .conf or .json file with that name converted to a one-plugin list. Files
// that fail to parse, SkipFile and configs running the shim are skipped. The
// error wraps ErrNotFound when no file matches.
func (d *ConfDir) Lookup(name string) (*libcni.NetworkConfigList, error) {
	entries, err := d.refresh()
	if err != nil {
		return nil, err
	}
	var skipped []string
	for _, wantList := range []bool{true, false} {
		for _, e := range entries {
			if (e.ext == ".conflist") != wantList {
				continue
			}
			if e.f.err != nil {
				if !errors.Is(e.f.err, errShimType) {
					skipped = append(skipped, e.f.err.Error())
				}
				continue
			}
			if e.f.list.Name != name {
				continue
			}
			list, err := d.complete(e)
			if errors.Is(err, errShimType) {
				continue
			}
			return list, err
		}
	}
	msg := fmt.Sprintf("no .conflist, .conf or .json file in %s has \"name\": %q", d.dir, name)
	if len(skipped) > 0 {
		msg += fmt.Sprintf(" (%d unusable files skipped: %s)", len(skipped), strings.Join(skipped, "; "))
	}
	return nil, fmt.Errorf("%s: %w", msg, ErrNotFound)
}

// First returns the lexically first usable config file of the directory and
// its path: the default network when no name or path is configured (spec §6),
// as the container runtime would pick it. The error wraps ErrNotFound when
// there is none.
func (d *ConfDir) First() (*libcni.NetworkConfigList, string, error) {
	entries, err := d.refresh()
	if err != nil {
		return nil, "", err
	}
	for _, e := range entries {
		if e.f.err != nil {
			continue
		}
		list, err := d.complete(e)
		if err != nil {
			continue
		}
		return list, e.path, nil
	}
	return nil, "", fmt.Errorf("no usable CNI config file in %s: %w", d.dir, ErrNotFound)
}

// LoadFile returns the config list in the file at path (.conflist, .conf or
// .json; it need not be inside the directory), cached by modification time
// and size like the directory's files.
func (d *ConfDir) LoadFile(path string) (*libcni.NetworkConfigList, error) {
	ext := filepath.Ext(path)
	if ext != ".conflist" && ext != ".conf" && ext != ".json" {
		return nil, &ConfigError{Source: path, Err: fmt.Errorf("extension %q is not .conflist, .conf or .json", ext)}
	}
	at, err := daemonPath(d.root, path)
	if err != nil {
		return nil, &ConfigError{Source: path, Err: err}
	}
	fi, err := os.Stat(at)
	if err != nil {
		return nil, fmt.Errorf("CNI config file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &ConfigError{Source: path, Err: errors.New("not a regular file")}
	}
	d.mu.Lock()
	f := d.load(path, at, ext, fi)
	d.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return d.complete(dirEntry{path: path, ext: ext, f: f})
}

// refresh lists the directory and re-parses the config files that changed.
// It returns the usable-extension entries in lexical order of file name. A
// symlinked file that cannot be resolved in Root (a ".." above the node's
// root, a loop) is an entry with that error, so that it is named.
func (d *ConfDir) refresh() ([]dirEntry, error) {
	dir, err := daemonPath(d.root, d.dir)
	if err != nil {
		return nil, fmt.Errorf("read CNI config directory: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read CNI config directory: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.files {
		f.seen = false
	}
	entries := make([]dirEntry, 0, len(des))
	for _, de := range des { // os.ReadDir sorts by file name
		name := de.Name()
		ext := filepath.Ext(name)
		if ext != ".conflist" && ext != ".conf" && ext != ".json" {
			continue
		}
		if name == d.skip || de.IsDir() {
			continue
		}
		path, at := filepath.Join(d.dir, name), filepath.Join(dir, name)
		var fi os.FileInfo
		if de.Type()&os.ModeSymlink != 0 {
			if at, err = daemonPath(d.root, path); err != nil {
				entries = append(entries, dirEntry{path: path, ext: ext, f: &cachedFile{err: &ConfigError{Source: path, Err: err}}})
				continue
			}
			fi, err = os.Stat(at)
		} else {
			fi, err = de.Info()
		}
		if err != nil || !fi.Mode().IsRegular() {
			continue // vanished, dangling symlink, or not a file
		}
		f := d.load(path, at, ext, fi)
		f.seen = true
		entries = append(entries, dirEntry{path: path, ext: ext, f: f})
	}
	for p, f := range d.files {
		if !f.seen && filepath.Dir(p) == filepath.Clean(d.dir) {
			delete(d.files, p)
		}
	}
	return entries, nil
}

// load returns the cached parse of path (a node path when Root is set, read
// at the daemon's path at), re-parsing when fi says it changed. d.mu must be
// held.
func (d *ConfDir) load(path, at, ext string, fi os.FileInfo) *cachedFile {
	if f, ok := d.files[path]; ok && f.modTime.Equal(fi.ModTime()) && f.size == fi.Size() {
		return f
	}
	f := &cachedFile{modTime: fi.ModTime(), size: fi.Size()}
	d.files[path] = f
	data, err := readBounded(at)
	if err != nil {
		f.err = &ConfigError{Source: path, Err: err}
		return f
	}
	f.list, _, f.err = parseConfig(data, "", parseOptions{source: path, shimType: d.shimType, forceList: ext == ".conflist"})
	return f
}

func readBounded(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxConfFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxConfFileBytes)
	}
	return data, nil
}

// complete adds the plugins a .conflist keeps in the sub-directory named
// after the network (CNI spec 1.1, as libcni.NetworkConfFromFile does) and
// returns a list whose Bytes inline every plugin. Other lists are returned as
// they are.
func (d *ConfDir) complete(e dirEntry) (*libcni.NetworkConfigList, error) {
	list := e.f.list
	if e.ext != ".conflist" || list.LoadOnlyInlinedPlugins {
		return list, nil
	}
	extra, err := pluginConfsFromFiles(d.root, filepath.Dir(e.path), list.Name)
	if err != nil {
		return nil, &ConfigError{Source: e.path, Field: "plugins", Err: err}
	}
	if len(extra) == 0 {
		if len(list.Plugins) == 0 {
			return nil, &ConfigError{Source: e.path, Field: "plugins", Err: fmt.Errorf("none inline and none in %s", filepath.Join(filepath.Dir(e.path), list.Name))}
		}
		return list, nil
	}
	for i, p := range extra {
		if err := validatePluginType(p.Network.Type, d.shimType); err != nil {
			return nil, &ConfigError{Source: e.path, Field: fmt.Sprintf("plugins[%d].type", len(list.Plugins)+i), Err: err}
		}
	}
	return rebuildList(list, slices.Concat(list.Plugins, extra), true)
}

// pluginConfsFromFiles is libcni.NetworkPluginConfsFromFiles (the plugins
// of the sub-directory confDir/name: its .conf files in lexical order; a
// missing directory holds none) reading the node paths confDir/name and its
// files through root (ConfDirOptions.Root); with no root, it is libcni's.
// Errors name the directory or the file (node paths).
func pluginConfsFromFiles(root, confDir, name string) ([]*libcni.PluginConfig, error) {
	if root == "" {
		return libcni.NetworkPluginConfsFromFiles(confDir, name)
	}
	sub := filepath.Join(confDir, name)
	dir, err := daemonPath(root, sub)
	if err != nil {
		return nil, fmt.Errorf("failed to read plugin config files in %s: %w", sub, err)
	}
	des, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to read plugin config files in %s: %w", sub, err)
	}
	var out []*libcni.PluginConfig
	for _, de := range des { // sorted by name, as libcni.ConfFiles
		if de.IsDir() || filepath.Ext(de.Name()) != ".conf" {
			continue
		}
		path, at := filepath.Join(sub, de.Name()), filepath.Join(dir, de.Name())
		if de.Type()&os.ModeSymlink != 0 {
			if at, err = daemonPath(root, path); err != nil {
				return nil, fmt.Errorf("error reading %s: %w", path, err)
			}
		}
		data, err := readBounded(at)
		if err != nil {
			return nil, fmt.Errorf("error reading %s: %w", path, err)
		}
		pc, err := libcni.NetworkPluginConfFromBytes(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, pc)
	}
	return out, nil
}
