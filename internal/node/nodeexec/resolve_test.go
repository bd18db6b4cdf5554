package nodeexec

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// tree makes the files and symlinks of layout under root: a value starting
// with "->" is a symlink holding the rest, "/" at the end of a key a
// directory, anything else an executable file with that content. Parents
// are made as needed.
func tree(t testing.TB, root string, layout map[string]string) {
	t.Helper()
	for p, v := range layout {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(v, "->"):
			err = os.Symlink(v[2:], full)
		default:
			err = os.WriteFile(full, []byte(v), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The node layouts: k3s (an absolute link in the bin dir's
// path, relative links to one multi-call binary), NixOS (absolute links into
// the store), and links that are errors.
func TestResolve(t *testing.T) {
	root := t.TempDir()
	tree(t, root, map[string]string{
		"var/lib/rancher/k3s/data/abc123/bin/cni":    "multi-call",
		"var/lib/rancher/k3s/data/abc123/bin/bridge": "->cni",
		"var/lib/rancher/k3s/data/current":           "->/var/lib/rancher/k3s/data/abc123",
		"nix/store/h-cni-plugins-1.6.2/bin/macvlan":  "store",
		"opt/cni/bin/macvlan":                        "->/nix/store/h-cni-plugins-1.6.2/bin/macvlan",
		"opt/cni/bin/up":                             "->../../../usr/lib/cni/up",
		"usr/lib/cni/up":                             "in root",
		"opt/cni/bin/abs-escape":                     "->/../../x",
		"opt/cni/bin/rel-escape":                     "->../../../../x",
		"opt/cni/bin/via-escape":                     "->abs-escape",
		"opt/cni/bin/to-above":                       "->/..",
		"x":                                          "clamped here",
		"opt/cni/bin/loop-a":                         "->loop-b",
		"opt/cni/bin/loop-b":                         "->loop-a",
		"opt/cni/bin/self":                           "->self",
		"opt/cni/bin/dangling":                       "->/nowhere/plugin",
		"opt/cni/bin/root-link":                      "->/",
		"etc/cni/net.d":                              "->/var/lib/rancher/k3s/agent/etc/cni/net.d",
		"var/lib/rancher/k3s/agent/etc/cni/net.d/":   "",
	})
	in := func(p string) string { return filepath.Join(root, p) }
	for _, tc := range []struct {
		path, want string
		wantErr    error
		wantLink   string
	}{
		{path: "/var/lib/rancher/k3s/data/current/bin/bridge", want: in("var/lib/rancher/k3s/data/abc123/bin/cni")},
		{path: "/opt/cni/bin/macvlan", want: in("nix/store/h-cni-plugins-1.6.2/bin/macvlan")},
		{path: "opt/cni/bin/macvlan", want: in("nix/store/h-cni-plugins-1.6.2/bin/macvlan")},
		{path: "/opt/cni/bin/up", want: in("usr/lib/cni/up")},
		{path: "/opt/cni/bin/dangling", want: in("nowhere/plugin")},
		{path: "/opt/cni/bin/root-link/x", want: in("x")},
		{path: "/opt/cni/bin/missing", want: in("opt/cni/bin/missing")},
		{path: "/etc/cni/net.d", want: in("var/lib/rancher/k3s/agent/etc/cni/net.d")},
		{path: "/opt/cni/bin/../../../x", want: in("x")},
		{path: "/opt/cni/bin/../../../../x", wantErr: ErrLeavesRoot},
		{path: "/opt/cni/bin/abs-escape", wantErr: ErrLeavesRoot, wantLink: "/opt/cni/bin/abs-escape -> /../../x"},
		{path: "/opt/cni/bin/rel-escape", wantErr: ErrLeavesRoot, wantLink: "/opt/cni/bin/rel-escape -> ../../../../x"},
		{path: "/opt/cni/bin/via-escape", wantErr: ErrLeavesRoot, wantLink: "/opt/cni/bin/abs-escape -> /../../x"},
		{path: "/opt/cni/bin/to-above", wantErr: ErrLeavesRoot, wantLink: "/opt/cni/bin/to-above -> /.."},
		{path: "/opt/cni/bin/loop-a", wantErr: syscall.ELOOP},
		{path: "/opt/cni/bin/self", wantErr: syscall.ELOOP},
		{path: "/opt/cni/bin/a\x00b", wantErr: errors.New("NUL byte in path")},
	} {
		got, err := Resolve(root, tc.path)
		if tc.wantErr == nil {
			if err != nil || got != tc.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
			}
			continue
		}
		var re *ResolveError
		if !errors.As(err, &re) || re.Path != tc.path || re.Root != root || !strings.Contains(err.Error(), tc.wantErr.Error()) {
			t.Errorf("Resolve(%q) = %q, %v; want a *ResolveError naming the path, the root and %q", tc.path, got, err, tc.wantErr)
			continue
		}
		if tc.wantErr == ErrLeavesRoot || tc.wantErr == syscall.ELOOP {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Resolve(%q): %v does not wrap %v", tc.path, err, tc.wantErr)
			}
		}
		if !strings.HasPrefix(err.Error(), "node path "+tc.path+" (node root "+root+")") {
			t.Errorf("Resolve(%q): %q does not start with the node path and root", tc.path, err)
		}
		if tc.wantLink != "" && !strings.Contains(err.Error(), "via symlink "+tc.wantLink) {
			t.Errorf("Resolve(%q): %q does not name the link %q", tc.path, err, tc.wantLink)
		}
	}
}

// A node root that is itself a symlink is entered; "" and "/" are the
// daemon's own root.
func TestResolveRoots(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"real/opt/cni/bin/p": "p", "link": "->real"})
	got, err := Resolve(filepath.Join(dir, "link"), "/opt/cni/bin/p")
	if want := filepath.Join(dir, "link/opt/cni/bin/p"); err != nil || got != want {
		t.Errorf("root a symlink: %q, %v; want %q", got, err, want)
	}
	for _, root := range []string{"", "/"} {
		got, err := Resolve(root, filepath.Join(dir, "link/opt/cni/bin/p"))
		if want := filepath.Join(dir, "real/opt/cni/bin/p"); err != nil || got != want {
			t.Errorf("root %q: %q, %v; want %q", root, got, err, want)
		}
	}
}

// Whatever a link holds, Resolve's answer is under the root, and where the
// kernel finds a file resolving in the root (openat2 RESOLVE_IN_ROOT, as in
// a chroot), Resolve gives the same file, or refuses a ".." that the kernel
// clamped.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"/usr/lib/cni", "../../usr", "../../../..", "/../../x", "..", "/", ".", "loop", "a/../..",
		"/opt/cni/bin/link", "../bin/link/..", "//usr///lib/./cni/", "/opt/cni/../cni/bin/../../usr/lib/cni/p",
	} {
		f.Add(s, "p")
	}
	f.Fuzz(func(t *testing.T, target, rest string) {
		if target == "" || strings.ContainsRune(target, 0) || strings.ContainsRune(rest, 0) || len(target) > 512 || len(rest) > 512 {
			return
		}
		root, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		tree(t, root, map[string]string{
			"usr/lib/cni/p":     "p",
			"opt/cni/bin/loop":  "->loop",
			"opt/cni/bin/link":  "->" + target,
			"opt/cni/bin/other": "->../../../usr/lib/cni",
		})
		nodePath := "/opt/cni/bin/link/" + rest
		got, err := Resolve(root, nodePath)
		if err != nil {
			var re *ResolveError
			if !errors.As(err, &re) || re.Path != nodePath {
				t.Fatalf("Resolve(%q): %v, want a *ResolveError naming it", nodePath, err)
			}
			return
		}
		if got != root && !strings.HasPrefix(got, root+"/") {
			t.Fatalf("Resolve(%q) = %q: outside the root %q", nodePath, got, root)
		}
		rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(rfd)
		fd, err := unix.Openat2(rfd, nodePath, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
		if err != nil {
			return // missing, a loop, not a directory: Resolve's answer need not exist
		}
		defer unix.Close(fd)
		kernel, err := os.Readlink(filepath.Join("/proc/self/fd", strconv.Itoa(fd)))
		if err != nil {
			t.Fatal(err)
		}
		if kernel != got {
			t.Fatalf("Resolve(%q) = %q, the kernel resolving in the root found %q", nodePath, got, kernel)
		}
	})
}

// nodeLayouts makes a node root holding the probe (a static binary) as
// k3s and NixOS lay out their CNI plugins: k3s's bin dir is reached through
// data/current, an absolute link, and each plugin there is a relative link
// to one multi-call binary, "cni"; NixOS's /opt/cni/bin holds absolute links
// into /nix/store. Links that climb above the node's "/" or loop are in
// /opt/cni/bin too, and a real "x" lies where a clamped ".." would land.
func nodeLayouts(t *testing.T) string {
	t.Helper()
	root, _ := nodeRoot(t)
	b, err := os.ReadFile(probeBin)
	if err != nil {
		t.Fatal(err)
	}
	tree(t, root, map[string]string{
		"var/lib/rancher/k3s/data/abc123/bin/cni":        string(b),
		"var/lib/rancher/k3s/data/abc123/bin/bridge":     "->cni",
		"var/lib/rancher/k3s/data/abc123/bin/host-local": "->./cni",
		"var/lib/rancher/k3s/data/current":               "->/var/lib/rancher/k3s/data/abc123",
		"nix/store/h-cni-plugins-1.6.2/bin/macvlan":      string(b),
		"opt/cni/bin/macvlan":                            "->/nix/store/h-cni-plugins-1.6.2/bin/macvlan",
		"opt/cni/bin/escape":                             "->/../../x",
		"opt/cni/bin/rel-escape":                         "->../../../../x",
		"x":                                              string(b),
		"opt/cni/bin/loop":                               "->loop2",
		"opt/cni/bin/loop2":                              "->loop",
	})
	return root
}

// Node layouts: plugins are found through symlinks resolved in the node's root
// and run by the link's path, so that a multi-call binary sees the plugin's
// name as argv[0]. Before, FindInPath stat'ed root+path in the daemon's view,
// where the absolute links (k3s's current, NixOS's store links) point
// outside the node root: "failed to find plugin".
func TestFindInPathThroughNodeSymlinks(t *testing.T) {
	requireRoot(t)
	root := nodeLayouts(t)
	k3s := "/var/lib/rancher/k3s/data/current/bin"
	for name, e := range executors(t, root) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				plugin string
				paths  []string
				want   string
			}{
				{"bridge", []string{"/usr/libexec/cni", k3s}, k3s + "/bridge"},
				{"host-local", []string{k3s}, k3s + "/host-local"},
				{"macvlan", []string{"/opt/cni/bin"}, "/opt/cni/bin/macvlan"},
			} {
				path, err := e.FindInPath(tc.plugin, tc.paths)
				if err != nil || path != tc.want {
					t.Errorf("FindInPath(%q, %q) = %q, %v; want the link's node path %q", tc.plugin, tc.paths, path, err, tc.want)
					continue
				}
				out, err := e.ExecPlugin(testCtx(t), path, nil, []string{"CNI_PATH=" + strings.Join(tc.paths, ":")})
				if err != nil {
					t.Errorf("ExecPlugin(%q): %v", path, err)
					continue
				}
				if r := decodeReport(t, out); r.Argv0 != tc.want {
					t.Errorf("%s ran with argv[0] %q, want the link's path %q", tc.plugin, r.Argv0, tc.want)
				}
			}
		})
	}
}

// A link that climbs above the node's "/" or loops is an error naming the
// path and the link, even when another directory holds the plugin: the
// search stops there.
func TestFindInPathRefusesEscapesAndLoops(t *testing.T) {
	root := nodeLayouts(t)
	e := &Exec{Root: root}
	tree(t, root, map[string]string{"usr/lib/cni/escape": "later", "usr/lib/cni/loop": "later"})
	for _, tc := range []struct {
		plugin string
		want   []string
		is     error
	}{
		{"escape", []string{`plugin "escape"`, "node path /opt/cni/bin/escape", "via symlink /opt/cni/bin/escape -> /../../x", "above the node's root"}, ErrLeavesRoot},
		{"rel-escape", []string{"node path /opt/cni/bin/rel-escape", "-> ../../../../x"}, ErrLeavesRoot},
		{"loop", []string{"node path /opt/cni/bin/loop", "too many levels of symbolic links"}, syscall.ELOOP},
	} {
		path, err := e.FindInPath(tc.plugin, []string{"/opt/cni/bin", "/usr/lib/cni"})
		if err == nil || !errors.Is(err, tc.is) {
			t.Errorf("FindInPath(%q) = %q, %v; want an error wrapping %v", tc.plugin, path, err, tc.is)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("FindInPath(%q): %q, want it to say %q", tc.plugin, err, w)
			}
		}
	}
}
