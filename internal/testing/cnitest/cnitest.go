// Package cnitest helps tests that run CNI plugins for real: network
// namespaces they own, dummy links in them, and a directory of plugin
// binaries (the reference host-local, static, bridge and tuning plugins at the
// version go.mod requires, plus packages of this module), built once per test
// process.
// The tests that use it need root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
package cnitest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ReferencePlugins are the plugins of github.com/containernetworking/plugins
// that BinDir builds.
var ReferencePlugins = []string{"plugins/ipam/host-local", "plugins/ipam/static", "plugins/main/bridge", "plugins/main/macvlan", "plugins/meta/tuning"}

var bins struct {
	once sync.Once
	pkgs []string // packages of this module to build too
	dir  string
	err  error
}

// Main runs the tests of a package whose tests call BinDir, building pkgs
// (import paths of this module's commands) into the same directory, and
// removes the directory afterwards. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(cnitest.Main(m, "github.com/…/cmd/x")) }
func Main(m *testing.M, pkgs ...string) int {
	bins.pkgs = pkgs
	code := m.Run()
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	return code
}

// BinDir returns the directory holding the built plugins (a CNI_PATH),
// building them on first use: the reference plugins with `go install
// …@<version in go.mod>` (the module cache, or the module proxy the first
// time), this module's packages with `go build`.
func BinDir(t testing.TB) string {
	t.Helper()
	bins.once.Do(func() { bins.dir, bins.err = build(bins.pkgs) })
	if bins.err != nil {
		t.Fatalf("building CNI plugins: %v", bins.err)
	}
	return bins.dir
}

func build(pkgs []string) (string, error) {
	dir, err := os.MkdirTemp("", "multinet-cnitest-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/containernetworking/plugins").Output()
	if err != nil {
		return dir, fmt.Errorf("go list -m github.com/containernetworking/plugins: %w", err)
	}
	version := strings.TrimSpace(string(out))
	args := []string{"install", "-trimpath"}
	for _, p := range ReferencePlugins {
		args = append(args, "github.com/containernetworking/plugins/"+p+"@"+version)
	}
	install := exec.Command("go", args...)
	install.Dir = dir // outside this module: `go install pkg@version` uses the plugins' own go.mod
	install.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false")
	if out, err := install.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	if len(pkgs) > 0 {
		args := append([]string{"build", "-o", dir + "/"}, pkgs...)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			return dir, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return dir, nil
}

// BuildStatic builds the Go package pkg (an import path, or "." for the
// calling test's package directory) with CGO_ENABLED=0 and extra go build
// flags into a new temporary directory, for tests that exec the binary
// (also chrooted, where no C library exists). It returns the binary's path
// (named name) and a function that removes the directory. Errors: the
// build's, with its output.
func BuildStatic(pkg, name string, flags ...string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "multinet-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	remove := func() { _ = os.RemoveAll(dir) }
	bin := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	build := exec.Command("go", args...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, remove, nil
}

// RequireRoot fails t unless it runs as root: a test that needs root and
// cannot run must not pass as skipped (make test runs as root).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root: creates network namespaces and links; run the tests as root")
	}
}

// NewNS creates a network namespace (bind-mounted under /var/run/netns) that
// is removed when t ends.
func NewNS(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		_ = testutils.UnmountNS(n)
	})
	return n
}

// Handle returns a netlink handle working in n, closed when t ends.
func Handle(t testing.TB, n ns.NetNS) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(netns.NsHandle(n.Fd()))
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", n.Path(), err)
	}
	t.Cleanup(h.Close)
	return h
}

// UniqueName returns an interface name prefix+<8 hex> (at most 15 bytes for a
// prefix of up to 7).
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Dummy creates a dummy link name in n (an ifb link where the kernel has no
// dummy driver), administratively up when up, and returns it as the kernel
// sees it. It goes away with n.
func Dummy(t testing.TB, n ns.NetNS, name string, up bool) netlink.Link {
	t.Helper()
	h := Handle(t, n)
	err := h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = h.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name}})
	}
	if err != nil {
		t.Fatalf("add dummy %s in %s: %v", name, n.Path(), err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if up {
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		if l, err = h.LinkByName(name); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// WriteFile writes data to name under dir and returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// DeleteLinkAtCleanup deletes the link name of the test's own network
// namespace (e.g. a bridge a CNI plugin created on the host) when t ends; a
// link that is gone by then is no error.
func DeleteLinkAtCleanup(t testing.TB, name string) {
	t.Helper()
	t.Cleanup(func() {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return
		}
		if err := netlink.LinkDel(l); err != nil {
			t.Errorf("delete link %s: %v", name, err)
		}
	})
}

// ScriptPlugin writes an executable /bin/sh CNI plugin name with body into
// dir and returns its path.
func ScriptPlugin(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := WriteFile(t, dir, name, []byte("#!/bin/sh\n"+body))
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// NFTables returns an nftables connection into network namespace n and a
// function that closes the namespace's file (call it when done, as in a
// polling loop; it is idempotent and also runs when t ends).
func NFTables(t testing.TB, n ns.NetNS) (*nftables.Conn, func()) {
	t.Helper()
	f, err := os.Open(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeFile := func() { once.Do(func() { _ = f.Close() }) }
	t.Cleanup(closeFile)
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatalf("nftables in netns %s: %v", n.Path(), err)
	}
	return c, closeFile
}
