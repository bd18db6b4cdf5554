// Package nodeexec runs CNI delegate plugins the way the container runtime
// runs them on the node: with the node's root file system as "/" and in a
// node cgroup, even when multinetd itself runs in a container.
//
// A delegate must see what it sees when the runtime executes it directly
// (docs/decisions/deploy.md "How delegates run"): the node's
// binaries (iptables, nft), C library, sockets and state directories
// (host-local's /var/lib/cni/networks, kind's /run/cni-ipam-state, flannel's
// /run/flannel/subnet.env). Exec does this with a chroot into Root, the
// node's root as mounted into the daemon's container (HostToContainer, so
// that network namespaces the runtime creates later are visible), and, with
// a Launcher, starts every plugin from a helper process that lives in a node
// cgroup, so that the plugin is born there: neither throttled by nor charged
// to the daemon container's CPU weight and memory limit.
//
// Every path a delegate is given (CNI_PATH, CNI_NETNS, the device-info file,
// a NAD's dataDir) is a path in the node's view: the runtime's, unchanged.
// Only FindInPath looks through Root, because it runs in the daemon, and it
// resolves symlinks inside Root as the node would (Resolve).
//
// Exec implements libcni's invoke.Exec (CNI spec "Section 3: Execution
// Protocol": the plugin gets its configuration on stdin, its parameters in
// the environment, and answers on stdout).
package nodeexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// NodePATH is the PATH a chrooted delegate gets: the directories where a
// node keeps iptables, nft, tc and the like. The daemon container's own
// PATH names directories of its image, not of the node.
const NodePATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// textBusyRetries is how often a plugin is started again when its binary is
// being replaced ("text file busy"), one second apart, as libcni's RawExec.
const textBusyRetries = 5

// Exec runs delegates in the node's view. The zero value runs them as a
// host process would (no chroot, no launcher), like libcni's RawExec.
// Safe for concurrent use.
type Exec struct {
	// Root is the node's root file system as the daemon sees it: "/" (or
	// empty) for a host process, "/host" in the shipped DaemonSet. Every
	// plugin runs chrooted into it with "/" as its working directory.
	Root string
	// Launcher starts every plugin in its node cgroup; nil starts plugins
	// from the daemon itself, in the daemon's cgroup.
	Launcher *Launcher
	// Stderr receives what plugins write to stderr (libcni's RawExec sends
	// it to the daemon's stderr); nil discards it.
	Stderr io.Writer
}

// chroot reports the directory to chroot into, "" for none.
func (e *Exec) chroot() string {
	if e.Root == "" || filepath.Clean(e.Root) == "/" {
		return ""
	}
	return filepath.Clean(e.Root)
}

// ExecPlugin runs the plugin at pluginPath (a node path) with stdinData on
// its stdin and environ as its whole environment, and returns its stdout.
// Errors: the process could not be started, or its Launcher could not be
// started or placed in its cgroup (then the plugin did not run); it exited
// non-zero or was killed (a *types.Error decoded from its stdout when it
// printed one, else one with the exit status and stderr); ctx ended (it and
// its process group are killed; the error wraps ctx.Err()).
//
// The call is bounded: a process the plugin forked that still holds its
// stdout or stderr does not keep it open (waitDelegate, pipeGrace).
func (e *Exec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	var lastErr error
	for i := 0; i <= textBusyRetries; i++ {
		out, err, busy := e.run(ctx, pluginPath, stdinData, environ)
		if !busy {
			return out, err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil, lastErr
}

// run starts the plugin once. busy reports "text file busy" (retry).
func (e *Exec) run(ctx context.Context, pluginPath string, stdinData []byte, environ []string) (out []byte, err error, busy bool) {
	if e.Launcher != nil {
		return e.runLaunched(ctx, pluginPath, stdinData, environ)
	}
	dio, err := newDelegateIO()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", pluginPath, err), false
	}
	cmd := inRoot(exec.Command(pluginPath), e.environ(environ), e.chroot())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = dio.Child[0], dio.Child[1], dio.Child[2]
	err = cmd.Start()
	dio.closeChild()
	if err != nil {
		dio.finish(0, nil)
		return nil, e.startErr(pluginPath, err.Error()), isBusy(err.Error())
	}
	dio.start(stdinData)
	err = waitDelegate(cmd, ctx.Done(), func(grace time.Duration) bool { return dio.released(grace, ctx.Done()) })
	stdout, stderr := dio.finish(pipeGrace, ctx.Done())
	e.copyStderr(stderr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("plugin %s: %w", pluginPath, ctx.Err()), false
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, fmt.Errorf("plugin %s: %w", pluginPath, err), false
		}
		return nil, pluginErr(ee.Error(), stdout, stderr), false
	}
	return stdout, nil, false
}

// runLaunched runs the plugin through the Launcher's helper.
func (e *Exec) runLaunched(ctx context.Context, pluginPath string, stdinData []byte, environ []string) (out []byte, err error, busy bool) {
	stdout, stderr, res, err := e.Launcher.run(ctx, e.chroot(), pluginPath, stdinData, e.environ(environ))
	e.copyStderr(stderr)
	switch {
	case err != nil:
		return nil, err, false
	case !res.Started:
		return nil, e.startErr(pluginPath, res.Error), isBusy(res.Error)
	case res.Error != "":
		return nil, fmt.Errorf("plugin %s: %s", pluginPath, res.Error), false
	case res.Signal != "":
		return nil, pluginErr("signal: "+res.Signal, stdout, stderr), false
	case res.Exit != 0:
		return nil, pluginErr(fmt.Sprintf("exit status %d", res.Exit), stdout, stderr), false
	}
	return stdout, nil, false
}

// inRoot sets cmd's environment, makes it the leader of a process group
// of its own (so that waitDelegate can kill what it forks) and, for a
// non-empty root, chroots it there with "/" as the working directory: how
// both the daemon and the Launcher's helper start a plugin.
func inRoot(cmd *exec.Cmd, env []string, root string) *exec.Cmd {
	cmd.Env = env
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if root != "" {
		cmd.SysProcAttr.Chroot = root
		cmd.Dir = "/"
	}
	return cmd
}

func (e *Exec) startErr(pluginPath, msg string) error {
	return fmt.Errorf("plugin %s: start in the node's view (root %q): %s", pluginPath, e.rootOrSlash(), msg)
}

func isBusy(msg string) bool { return strings.Contains(msg, "text file busy") }

func (e *Exec) copyStderr(b []byte) {
	if e.Stderr != nil && len(b) > 0 {
		_, _ = e.Stderr.Write(b)
	}
}

func (e *Exec) rootOrSlash() string {
	if r := e.chroot(); r != "" {
		return r
	}
	return "/"
}

// environ is the plugin's environment: the caller's, with PATH set to the
// node's directories when the plugin runs chrooted.
func (e *Exec) environ(env []string) []string {
	if e.chroot() == "" {
		return env
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+NodePATH)
}

// pluginErr turns a plugin that exited unsuccessfully (how: "exit status
// 1", "signal: killed") into its CNI error when it printed one on stdout (CNI
// spec "Error"), else an error with how it ended and its stderr.
func pluginErr(how string, stdout, stderr []byte) error {
	cniErr := &types.Error{}
	if len(stdout) > 0 && json.Unmarshal(stdout, cniErr) == nil && (cniErr.Code != 0 || cniErr.Msg != "") {
		return cniErr
	}
	msg := strings.TrimSpace(string(stderr))
	if msg == "" {
		msg = strings.TrimSpace(string(stdout))
	}
	return &types.Error{Code: types.ErrInternal, Msg: fmt.Sprintf("netplugin failed: %q", msg), Details: how}
}

// FindInPath returns the node path of plugin in the first of paths (node
// directories) that holds it, looking through Root with every symlink
// resolved inside it as the node resolves it (Resolve): a symlinked bin dir
// (k3s's data/current), absolute links (NixOS's /nix/store) and relative
// ones (links to a multi-call binary) are found. The path returned is the
// link's, dir/plugin, not its target: the delegate is run by it, chrooted,
// so that its argv[0] is the plugin's name, as when the runtime runs it.
// A directory whose dir/plugin is missing, dangling, not a regular file or
// not executable does not hold it. Errors: plugin is empty or a path, paths
// is empty, resolving dir/plugin in a directory fails (a ".." above the
// node's root, a loop: a *ResolveError naming the path and the link; the
// search stops there, so that no other directory's plugin of that name runs
// in its place), or no directory holds an executable file of that name (the
// message lists the directories searched).
func (e *Exec) FindInPath(plugin string, paths []string) (string, error) {
	if plugin == "" {
		return "", errors.New("no plugin name provided")
	}
	if strings.ContainsRune(plugin, os.PathSeparator) {
		return "", fmt.Errorf("invalid plugin name: %s", plugin)
	}
	if len(paths) == 0 {
		return "", errors.New("no paths provided")
	}
	for _, dir := range paths {
		nodePath := filepath.Join(dir, plugin)
		p, err := Resolve(e.rootOrSlash(), nodePath)
		if err != nil {
			if errors.Is(err, ErrLeavesRoot) || errors.Is(err, syscall.ELOOP) {
				return "", fmt.Errorf("plugin %q: %w", plugin, err)
			}
			continue // unreadable: as libcni's FindInPath, not here
		}
		fi, err := os.Lstat(p) // p has no symlink left: a link swapped in since is refused
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return nodePath, nil
		}
	}
	return "", fmt.Errorf("failed to find plugin %q in path %s (node root %s)", plugin, paths, e.rootOrSlash())
}

// Decode parses a plugin's VERSION answer.
func (e *Exec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	var d version.PluginDecoder
	return d.Decode(jsonBytes)
}
