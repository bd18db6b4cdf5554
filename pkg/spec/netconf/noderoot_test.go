package netconf

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/multinet/multinet/internal/node/nodeexec"
)

// symlinks makes each link (a path under root) hold its target.
func symlinks(t *testing.T, root string, links map[string]string) {
	t.Helper()
	for link, target := range links {
		p := filepath.Join(root, link)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

// linkedConfRoot makes a node root whose conf dir /etc/cni/net.d is an
// absolute link (k3s keeps it under /var/lib/rancher/k3s/agent), holding
// config files, a sub-directory chain and an auxiliary chain that are
// absolute links to elsewhere in the node's root, and links that climb
// above the node's "/" or loop. A config lies where a clamped
// ".." would land: it must not be found.
func linkedConfRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	real := filepath.Join(root, "var/lib/rancher/k3s/agent/etc/cni/net.d")
	writeFiles(t, real, map[string]string{"30-plain.conf": `{"cniVersion":"1.0.0","name":"plain","type":"plain"}`})
	writeFiles(t, filepath.Join(root, "var/lib/confs"), map[string]string{
		"flannel.conflist": `{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"}]}`,
		"chained.conflist": `{"cniVersion":"1.0.0","name":"chained"}`,
		"tuning.conf":      `{"type":"tuning"}`,
	})
	writeFiles(t, filepath.Join(root, "var/lib/chains/chained"), map[string]string{"20-bw.conf": `{"type":"bandwidth"}`})
	writeFiles(t, filepath.Join(root, "var/lib/chains/aux"), map[string]string{"20-sbr.conf": `{"type":"sbr"}`})
	writeFiles(t, filepath.Join(root, "etc"), map[string]string{"escaped.conflist": `{"cniVersion":"1.0.0","name":"escaped","plugins":[{"type":"x"}]}`})
	symlinks(t, root, map[string]string{
		"etc/cni/net.d": "/var/lib/rancher/k3s/agent/etc/cni/net.d",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/10-flannel.conflist": "/var/lib/confs/flannel.conflist",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/20-chained.conflist": "../../../../../../confs/chained.conflist",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/chained":             "/var/lib/chains/chained",
		"var/lib/chains/chained/10-tuning.conf":                       "/var/lib/confs/tuning.conf",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/aux":                 "/var/lib/chains/aux",
		"var/lib/chains/aux/10-tuning.conf":                           "../../confs/tuning.conf",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/05-escape.conflist":  "/../../etc/escaped.conflist",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/06-loop.conf":        "06-loop.conf",
	})
	return root
}

// A symlinked conf dir, symlinked config files and symlinked sub-directory
// chains are read through the node's root, as the node resolves them;
// escaping and looping links are named, never followed out of the root.
// Before, the conf dir was read in the daemon's view, where these absolute
// links lead outside the node's root.
func TestConfDirThroughNodeSymlinks(t *testing.T) {
	root := linkedConfRoot(t)
	cd := NewConfDir(ConfDirOptions{Dir: "/etc/cni/net.d", Root: root})

	list, path, err := cd.First()
	if err != nil || list.Name != "cbr0" || path != "/etc/cni/net.d/10-flannel.conflist" {
		t.Fatalf("First() = %v, %q, %v; want cbr0 from the node path /etc/cni/net.d/10-flannel.conflist", list, path, err)
	}
	list, err = cd.Lookup("chained")
	if err != nil {
		t.Fatalf("Lookup(chained): %v", err)
	}
	if got := pluginTypes(list); !slices.Equal(got, []string{"tuning", "bandwidth"}) {
		t.Errorf("chained: plugins %q, want the linked sub-directory's [tuning bandwidth]", got)
	}
	if list, err := cd.Lookup("plain"); err != nil || list.Plugins[0].Network.Type != "plain" {
		t.Errorf("Lookup(plain) = %v, %v", list, err)
	}
	if list, err := cd.LoadFile("/etc/cni/net.d/10-flannel.conflist"); err != nil || list.Name != "cbr0" {
		t.Errorf("LoadFile through the linked conf dir = %v, %v; want cbr0", list, err)
	}

	_, err = cd.Lookup("escaped")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup(escaped) = %v, want not found: the link climbs above the node's root", err)
	}
	for _, want := range []string{
		"node path /etc/cni/net.d/05-escape.conflist", "via symlink /var/lib/rancher/k3s/agent/etc/cni/net.d/05-escape.conflist -> /../../etc/escaped.conflist", nodeexec.ErrLeavesRoot.Error(),
		"node path /etc/cni/net.d/06-loop.conf", syscall.ELOOP.Error(),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup(escaped): %q, want it to name %q", err, want)
		}
	}
	if _, err := cd.LoadFile("/etc/cni/net.d/05-escape.conflist"); !errors.Is(err, nodeexec.ErrLeavesRoot) || !strings.Contains(err.Error(), "05-escape.conflist") {
		t.Errorf("LoadFile of an escaping link: %v, want an error naming it", err)
	}

	aux, err := LoadAuxiliaryChainIn(root, "/etc/cni/net.d", "aux", "1.0.0")
	if err != nil {
		t.Fatalf("LoadAuxiliaryChainIn: %v", err)
	}
	if got := pluginTypes(aux); !slices.Equal(got, []string{"tuning", "sbr"}) {
		t.Errorf("auxiliary chain plugins %q, want the linked directory's [tuning sbr]", got)
	}
}

// A sub-directory or auxiliary chain whose link (or whose file's link)
// climbs above the node's root is an error naming the path.
func TestChainsRefuseEscapes(t *testing.T) {
	root := linkedConfRoot(t)
	symlinks(t, root, map[string]string{
		"var/lib/rancher/k3s/agent/etc/cni/net.d/bad-dir":            "/../../var/lib/chains/aux",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/bad-file/10-x.conf": "../../../../../../../../../../../x.conf",
	})
	for _, tc := range []struct{ name, want string }{
		{"bad-dir", "/etc/cni/net.d/bad-dir"},
		{"bad-file", "/etc/cni/net.d/bad-file/10-x.conf"},
	} {
		_, err := LoadAuxiliaryChainIn(root, "/etc/cni/net.d", tc.name, "1.0.0")
		if !errors.Is(err, nodeexec.ErrLeavesRoot) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadAuxiliaryChainIn(%s) = %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
