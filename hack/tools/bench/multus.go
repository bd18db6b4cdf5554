package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// multusName names the bench's Multus ServiceAccount (in the bench
// namespace), ClusterRole and ClusterRoleBinding.
const multusName = "multinet-bench-multus"

// saDir is where a pod's ServiceAccount token and CA are mounted, the only
// place rest.InClusterConfig (Multus thick's API client) reads them from.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// multus runs Multus thick (multus-daemon, driven through multus-shim) as a
// host process for the side-by-side measure: its own daemon config with the
// same default network conflist as its clusterNetwork, the same NADs, API
// access through a ServiceAccount with the RBAC Multus's DaemonSet needs.
type multus struct {
	binDir, workDir, socketDir, confDir, cniDir, saDir string
	cmd                                                *exec.Cmd
	exited                                             chan error
	madeDirs                                           []string // dirs under /run made for saDir, removed at the end
	rbacCreated                                        bool
	leftCache                                          int // cache files of bench containers left after DEL
}

func newMultus(binDir, workDir string) (*multus, error) {
	for _, b := range []string{"multus-daemon", "multus-shim"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, fmt.Errorf("-multus-bin-dir: %w (hack/multus-build.sh builds both)", err)
		}
	}
	d := filepath.Join(workDir, "multus")
	return &multus{binDir: binDir, workDir: d, socketDir: filepath.Join(d, "run"), confDir: filepath.Join(d, "net.d"),
		cniDir: filepath.Join(d, "cni"), saDir: filepath.Join(d, "serviceaccount")}, nil
}

// rbac creates the ServiceAccount, a ClusterRole with what multus-daemon
// uses (pods and their status, NADs, Events) and its binding, and writes a
// token and the cluster CA into m.saDir.
func (m *multus) rbac(ctx context.Context, c *cluster) error {
	kc := c.kube
	m.rbacCreated = true
	if _, err := kc.CoreV1().ServiceAccounts(c.ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: multusName, Labels: labels()}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ServiceAccount %s: %w", multusName, err)
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: multusName, Labels: labels()}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ClusterRole %s: %w", multusName, err)
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: multusName, Labels: labels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: multusName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: multusName, Namespace: c.ns}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", multusName, err)
	}
	exp := int64(2 * 3600)
	tr, err := kc.CoreV1().ServiceAccounts(c.ns).CreateToken(ctx, multusName,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of ServiceAccount %s: %w", multusName, err)
	}
	ca := c.rest.CAData
	if len(ca) == 0 && c.rest.CAFile != "" {
		if ca, err = os.ReadFile(c.rest.CAFile); err != nil {
			return fmt.Errorf("cluster CA: %w", err)
		}
	}
	if err := os.MkdirAll(m.saDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(m.saDir, "token"), []byte(tr.Status.Token), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(m.saDir, "ca.crt"), ca, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(m.saDir, "namespace"), []byte(c.ns), 0o644)
}

// shimList is the runtime's view of Multus: a conflist whose only plugin is
// multus-shim, talking to the bench's daemon socket.
func (m *multus) shimList(cniVersion string) (*libcni.NetworkConfigList, error) {
	b, _ := json.Marshal(map[string]any{
		"cniVersion": cniVersion, "name": "multus-cni-network",
		"plugins": []map[string]any{{"type": "multus-shim", "daemonSocketDir": m.socketDir, "logLevel": "error"}},
	})
	return libcni.ConfListFromBytes(b)
}

// start writes the daemon config and starts multus-daemon in a mount
// namespace of its own where m.saDir is mounted at saDir (its in-cluster
// client reads only there); slave propagation, so that the sandboxes' netns
// the bench mounts later on the host are mounts in its namespace too, with KUBERNETES_SERVICE_HOST/PORT of the cluster's API server
// and MULTUS_NODE_NAME (its pod informer watches this node's pods). It waits
// for the daemon's socket.
func (m *multus) start(ctx context.Context, c *cluster, e *env, cniVersion string) error {
	for _, d := range []string{m.socketDir, m.confDir, m.cniDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	u, err := url.Parse(c.rest.Host)
	if err != nil {
		return fmt.Errorf("API server URL %q: %w", c.rest.Host, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return fmt.Errorf("API server URL %q: %w", c.rest.Host, err)
	}
	// The daemon config (daemonConfig): clusterNetwork is autoDir, which
	// holds only the default network conflist multinetd delegates to.
	// multusConfigFile "auto", as Multus's thick DaemonSet runs it (with a
	// file instead, multus-daemon v4.2.3 and v4.3.0 exit right after starting): it
	// then writes its 00-multus.conf into cniConfigDir, generated from the
	// primary network in multusAutoconfigDir, both private dirs here.
	autoDir := filepath.Join(m.workDir, "autoconf")
	if err := os.MkdirAll(autoDir, 0o755); err != nil {
		return err
	}
	def, err := os.ReadFile(e.defaultConf)
	if err != nil {
		return fmt.Errorf("default network: %w", err)
	}
	if err := os.WriteFile(filepath.Join(autoDir, filepath.Base(e.defaultConf)), def, 0o644); err != nil {
		return err
	}
	cb, _ := json.MarshalIndent(m.daemonConfig(cniVersion, autoDir, e.cniBin), "", "  ")
	conf := filepath.Join(m.workDir, "daemon-config.json")
	if err := os.WriteFile(conf, cb, 0o644); err != nil {
		return err
	}
	if err := m.makeMountPoint(); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(m.workDir, "daemon.out"))
	if err != nil {
		return err
	}
	script := fmt.Sprintf("mount --bind %q %q && exec %q -config %q", m.saDir, saDir, filepath.Join(m.binDir, "multus-daemon"), conf)
	m.cmd = exec.Command("unshare", "--mount", "--propagation", "slave", "sh", "-c", script)
	m.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port, "MULTUS_NODE_NAME="+e.node)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("start multus-daemon: %w", err)
	}
	m.exited = make(chan error, 1)
	go func() { m.exited <- m.cmd.Wait(); _ = logFile.Close() }()
	sock := filepath.Join(m.socketDir, "multus.sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Ready: its socket answers and its config manager has written
		// its CNI config.
		if conn, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			_ = conn.Close()
			if _, err := os.Stat(filepath.Join(m.confDir, "00-multus.conf")); err == nil {
				break
			}
		}
		select {
		case err := <-m.exited:
			m.exited <- err
			return fmt.Errorf("multus-daemon exited (%v): see %s", err, filepath.Join(filepath.Dir(m.workDir), "multus-daemon.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("multus-daemon: not ready (socket %s, %s/00-multus.conf) after 30s: see %s", sock, m.confDir, logFile.Name())
		}
	}
	return nil
}

// daemonConfig is multus-daemon's config: the server's keys (socketDir,
// logging) and the Multus CNI config keys it lays over every request's
// config: its own confDir and cniDir (cache), the cluster's CNI binDir, and
// clusterNetwork, the default network.
//
// clusterNetwork is defaultDir, a directory holding only the default
// network's conflist, not that conflist's path. Given a path ending in
// .conflist, Multus v4.3.0 (as v4.2.3) loads it with
// LoadDelegateNetConfFromConfList (pkg/types/conf.go), which keeps for
// later commands the conflist re-marshalled from CNI's typed
// types.NetConfList: every plugin key outside the typed ones (bridge,
// isGateway, ipMasq, ipam.ranges, ...) is dropped. ADD runs the complete
// list (its CNINetworkConfigList), but DEL (conflistDel, from the delegates
// cached in cniDir) runs the lossy copy: host-local fails with "no IP
// ranges specified", Multus logs it and answers success, and every Multus
// ADD leaks a default-network address (upstream
// github.com/k8snetworkplumbingwg/multus-cni/issues/1449, fixed on master
// after v4.3.0, not in a release).
// Given a directory, Multus reads the conflist's bytes as they are
// (GetCNIConfigFromFile, LoadDelegateNetConf), so ADD and DEL run the same
// complete conflist: the same work as the runtime and multinetd do.
func (m *multus) daemonConfig(cniVersion, defaultDir, cniBin string) map[string]any {
	return map[string]any{
		"cniVersion": cniVersion, "socketDir": m.socketDir, "logLevel": "error", "logToStderr": true,
		"logFile": filepath.Join(m.workDir, "multus.log"), "clusterNetwork": defaultDir,
		"binDir": cniBin, "confDir": m.confDir, "cniDir": m.cniDir, "cniConfigDir": m.confDir,
		"multusConfigFile": "auto", "multusAutoconfigDir": defaultDir,
	}
}

// makeMountPoint creates saDir when the host has none (remembering what it
// made, for stop).
func (m *multus) makeMountPoint() error {
	var missing []string
	for d := saDir; d != "/" && d != "/var/run"; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(saDir, 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", saDir, err)
	}
	m.madeDirs = missing // deepest first
	return nil
}

// pid is the daemon's process ID (unshare and sh exec into it).
func (m *multus) pid() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// stop ends the daemon, removes the mount point dirs it made and the RBAC
// objects (the ServiceAccount goes with the namespace); it counts what
// Multus left in its cache dir (leftCache).
func (m *multus) stop(ctx context.Context, c *cluster) error {
	var errs []error
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
	}
	for _, d := range m.madeDirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	if m.rbacCreated {
		errs = append(errs, deleteMultusRBAC(ctx, c)...)
	}
	var left []string
	_ = filepath.WalkDir(m.cniDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), containerIDPrefix) {
			left = append(left, p)
		}
		return nil
	})
	// Multus's own leftovers are a finding of the run, not a bench failure.
	m.leftCache = len(left)
	if len(left) > 0 {
		logf("Multus left %d cache files of bench containers after their DEL (e.g. %s)", len(left), left[0])
	}
	// The daemon's output outlives its dir, for a run that failed.
	_ = os.Rename(filepath.Join(m.workDir, "daemon.out"), filepath.Join(filepath.Dir(m.workDir), "multus-daemon.log"))
	_ = os.RemoveAll(m.workDir)
	return errors.Join(errs...)
}

// deleteMultusRBAC deletes the bench's Multus ClusterRole and binding.
func deleteMultusRBAC(ctx context.Context, c *cluster) (errs []error) {
	if err := c.kube.RbacV1().ClusterRoleBindings().Delete(ctx, multusName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete ClusterRoleBinding %s: %w", multusName, err))
	}
	if err := c.kube.RbacV1().ClusterRoles().Delete(ctx, multusName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete ClusterRole %s: %w", multusName, err))
	}
	return errs
}
