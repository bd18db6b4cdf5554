package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` mounts named network namespaces.
const netnsDir = "/var/run/netns"

// sandbox is one fake pod sandbox: a named network namespace, a container
// ID and the pod it belongs to (CNI_ARGS).
type sandbox struct {
	netns       string // name under netnsDir
	path        string // the netns path handed to CNI (CNI_NETNS)
	containerID string
	pod         podRef
}

func (s *sandbox) netnsPath() string { return s.path }

// podRef identifies a pod as the runtime does in CNI_ARGS.
type podRef struct {
	namespace, name, uid string
}

// runtimeConf is what a Kubernetes runtime (containerd through go-cni)
// passes to libcni for one sandbox: CNI_ARGS in containerd's order.
func (s *sandbox) runtimeConf(ifName string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: s.containerID,
		NetNS:       s.netnsPath(),
		IfName:      ifName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", s.pod.namespace},
			{"K8S_POD_NAME", s.pod.name},
			{"K8S_POD_INFRA_CONTAINER_ID", s.containerID},
			{"K8S_POD_UID", s.pod.uid},
		},
	}
}

// containerIDPrefix marks the bench's container IDs (host-local files,
// multinetd records) so that leftovers can be recognised.
const containerIDPrefix = "mnbench"

func newContainerID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return (containerIDPrefix + hex.EncodeToString(b))[:64]
}

// netnsPool creates and deletes the bench's named network namespaces.
type netnsPool struct {
	prefix string
	// publishDir, when set, is where each netns is also bind-mounted (as
	// the runtime does in its own netns dir), and that path is the one
	// handed to CNI: a deployed multinetd sees the runtime's netns dir,
	// not the host's /var/run/netns.
	publishDir string
	mu         sync.Mutex
	n          int
	live       map[string]bool
}

func newNetnsPool(prefix, publishDir string) *netnsPool {
	return &netnsPool{prefix: prefix, publishDir: publishDir, live: map[string]bool{}}
}

// add creates a fresh named netns (ip netns add, then the bind mount into
// publishDir) and returns its name and the path CNI gets.
func (p *netnsPool) add(ctx context.Context) (name, path string, err error) {
	p.mu.Lock()
	p.n++
	name = fmt.Sprintf("%s%d", p.prefix, p.n)
	p.live[name] = true
	p.mu.Unlock()
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", name).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("ip netns add %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	if p.publishDir == "" {
		return name, filepath.Join(netnsDir, name), nil
	}
	path = filepath.Join(p.publishDir, name)
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		return "", "", fmt.Errorf("netns %s: %w", name, err)
	}
	if err := unix.Mount(filepath.Join(netnsDir, name), path, "", unix.MS_BIND, ""); err != nil {
		return "", "", fmt.Errorf("bind-mount netns %s at %s: %w", name, path, err)
	}
	return name, path, nil
}

// del deletes a netns made by add (its bind mount in publishDir, then ip
// netns del).
func (p *netnsPool) del(name string) error {
	if p.publishDir != "" {
		path := filepath.Join(p.publishDir, name)
		_ = unix.Unmount(path, unix.MNT_DETACH)
		_ = os.Remove(path)
	}
	out, err := exec.Command("ip", "netns", "del", name).CombinedOutput()
	p.mu.Lock()
	delete(p.live, name)
	p.mu.Unlock()
	if err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("ip netns del %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// delAll deletes every netns still alive.
func (p *netnsPool) delAll() (errs []error) {
	p.mu.Lock()
	names := make([]string, 0, len(p.live))
	for n := range p.live {
		names = append(names, n)
	}
	p.mu.Unlock()
	for _, n := range names {
		if err := p.del(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// staleNetns lists netns names with prefix left by an earlier run.
func staleNetns(prefix string) []string {
	ents, _ := os.ReadDir(netnsDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// attachment is one network a path runs for a sandbox, as libcni runs it.
type attachment struct {
	list   *libcni.NetworkConfigList
	ifName string
}

// path is one way of attaching a pod: through multinet (the runtime's
// conflist, whose only plugin is multinet-shim) or direct (the default
// network and the two bridge networks run one after the other with libcni,
// as multinetd itself runs them).
type path struct {
	name string
	cni  *libcni.CNIConfig
	exec *timedExec // cni's plugin executor
	nets []attachment

	tracker *tracker
}

// add runs ADD of every network of the path for sb, in order.
func (p *path) add(ctx context.Context, sb *sandbox) (time.Duration, error) {
	p.tracker.set(sb, p)
	start := time.Now()
	for _, a := range p.nets {
		if _, err := p.cni.AddNetworkList(ctx, a.list, sb.runtimeConf(a.ifName)); err != nil {
			return time.Since(start), fmt.Errorf("%s ADD %s (%s) for %s: %w", p.name, a.list.Name, a.ifName, sb.containerID[:16], err)
		}
	}
	return time.Since(start), nil
}

// del runs DEL of every network of the path for sb, in reverse order.
func (p *path) del(ctx context.Context, sb *sandbox) (time.Duration, error) {
	start := time.Now()
	var first error
	for i := len(p.nets) - 1; i >= 0; i-- {
		a := p.nets[i]
		if err := p.cni.DelNetworkList(ctx, a.list, sb.runtimeConf(a.ifName)); err != nil && first == nil {
			first = fmt.Errorf("%s DEL %s (%s) for %s: %w", p.name, a.list.Name, a.ifName, sb.containerID[:16], err)
		}
	}
	d := time.Since(start)
	if first == nil {
		p.tracker.clear(sb)
	}
	return d, first
}

// tracker remembers the sandboxes with an ADD not yet undone, for cleanup.
type tracker struct {
	mu   sync.Mutex
	live map[*sandbox]*path
}

func (t *tracker) set(sb *sandbox, p *path) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == nil {
		t.live = map[*sandbox]*path{}
	}
	t.live[sb] = p
}

func (t *tracker) clear(sb *sandbox) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.live, sb)
}

// undoAll runs DEL for every sandbox still attached.
func (t *tracker) undoAll(ctx context.Context) (errs []error) {
	t.mu.Lock()
	live := make(map[*sandbox]*path, len(t.live))
	for k, v := range t.live {
		live[k] = v
	}
	t.mu.Unlock()
	for sb, p := range live {
		if _, err := p.del(ctx, sb); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// execTimes runs bin with CNI_COMMAND=VERSION n times and returns the
// wall time of each fork+exec+wait.
func execTimes(bin string, n int) (dist, error) {
	out := make(dist, 0, n)
	for i := 0; i < n; i++ {
		cmd := exec.Command(bin)
		cmd.Env = []string{"CNI_COMMAND=VERSION", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0"}`)
		start := time.Now()
		b, err := cmd.Output()
		d := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("%s VERSION: %v", bin, err)
		}
		if !strings.Contains(string(b), "supportedVersions") {
			return nil, fmt.Errorf("%s VERSION: unexpected output %q", bin, b)
		}
		out = append(out, d)
	}
	return out, nil
}

// removeBridge deletes a Linux bridge the bench's networks created.
func removeBridge(name string) error {
	if _, err := os.Stat("/sys/class/net/" + name); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link del %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hostLocalLeftovers lists host-local allocation files under dir whose
// owner is one of the bench's container IDs.
func hostLocalLeftovers(dir string) []string {
	return hostLocalOwned(dir, func(owner string) bool { return strings.HasPrefix(owner, containerIDPrefix) })
}
