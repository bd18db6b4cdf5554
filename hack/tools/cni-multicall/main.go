// Command cni-multicall is the local cluster's stand-in for k3s's multi-call
// CNI binary (docs/local-cluster.md "Node layouts"). On a node with the k3s
// layout every reference plugin in the runtime's CNI bin dir is a relative
// symlink to it (bridge -> cni), as k3s ships them, and it runs the plugin
// its argv[0] names: the regular file of that name in .multicall/ of the
// directory it lives in (/proc/self/exe: the path the kernel ran, its
// symlinks resolved; the store is inside that directory so that a bind
// mount of the directory elsewhere still finds it), exec'd with the same
// argv, environment and stdio. So a
// caller that runs the link by its path (the runtime, multinetd's delegate
// launcher) gets the plugin; one that resolves the link and runs the target
// gets an error, as with k3s's binary.
//
// It is a test fixture of the local cluster only, built static
// (CGO_ENABLED=0) like the reference plugins.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// storeRel is where the plugins are, relative to the directory holding the
// resolved executable (data/<release>/bin/cni -> data/<release>/bin/.multicall).
const storeRel = ".multicall"

// selfName is the dispatcher's own name: run under it, it names no plugin.
const selfName = "cni"

func main() {
	if err := run(os.Args, os.Environ()); err != nil {
		fail(err)
	}
}

// run execs the plugin args[0] names; it returns only on an error.
func run(args, env []string) error {
	path, err := pluginPath(args)
	if err != nil {
		return err
	}
	if err := syscall.Exec(path, args, env); err != nil {
		return fmt.Errorf("cni-multicall: exec %s: %w", path, err)
	}
	return nil
}

// pluginPath returns the store file of the plugin args[0] names.
func pluginPath(args []string) (string, error) {
	if len(args) == 0 || args[0] == "" {
		return "", fmt.Errorf("cni-multicall: no argv[0]: run me through a link named after a plugin")
	}
	name := filepath.Base(args[0])
	if name == selfName || name == "." || name == "/" {
		return "", fmt.Errorf("cni-multicall: run as %q, which names no plugin: run me through a link named after a plugin (bridge -> %s)", args[0], selfName)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cni-multicall: my own path: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("cni-multicall: my own path: %w", err)
	}
	store := filepath.Join(filepath.Dir(exe), storeRel)
	path := filepath.Join(store, name)
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("cni-multicall: plugin %q (argv[0] %s): %w", name, args[0], err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("cni-multicall: plugin %q: %s is not an executable file", name, path)
	}
	return path, nil
}

// fail reports err as a CNI error result on stdout (what a runtime reads) and
// on stderr, and exits 1.
func fail(err error) {
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": err.Error()})
	fmt.Println(string(b))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
