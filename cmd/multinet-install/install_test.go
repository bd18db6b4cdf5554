package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestInstallPluginsAtomic(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(src, "multinet-shim"), "shim v2", 0o644)
	writeFile(t, filepath.Join(src, "multinet-netdev"), "netdev v2", 0o644)
	// An old shim is "running": a process holds it open. It must be replaced
	// by a new inode, never written into.
	writeFile(t, filepath.Join(dst, "multinet-shim"), "shim v1", 0o755)
	old, err := os.Open(filepath.Join(dst, "multinet-shim"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldIno := inode(t, filepath.Join(dst, "multinet-shim"))

	report, err := installPlugins(src, dst, []string{"multinet-shim", "multinet-netdev"})
	if err != nil {
		t.Fatalf("installPlugins: %v", err)
	}
	if len(report) != 2 || !strings.HasSuffix(report[0], "installed") || !strings.HasSuffix(report[1], "installed") {
		t.Errorf("report = %q, want both installed", report)
	}
	for name, want := range map[string]string{"multinet-shim": "shim v2", "multinet-netdev": "netdev v2"} {
		p := filepath.Join(dst, name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", name, b, err, want)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o755 {
			t.Errorf("%s mode = %v, want 0755", name, fi.Mode().Perm())
		}
	}
	if inode(t, filepath.Join(dst, "multinet-shim")) == oldIno {
		t.Error("the shim was rewritten in place; want a rename over it")
	}
	held := make([]byte, 16)
	n, _ := old.ReadAt(held, 0)
	if string(held[:n]) != "shim v1" {
		t.Errorf("the open old shim now reads %q, want it untouched", held[:n])
	}
	if tmps, _ := filepath.Glob(filepath.Join(dst, ".*tmp*")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}

	// Same content again: nothing written, same inode.
	ino := inode(t, filepath.Join(dst, "multinet-shim"))
	report, err = installPlugins(src, dst, []string{"multinet-shim"})
	if err != nil || len(report) != 1 || !strings.HasSuffix(report[0], "unchanged") {
		t.Errorf("second install: %q, %v; want unchanged", report, err)
	}
	if inode(t, filepath.Join(dst, "multinet-shim")) != ino {
		t.Error("an unchanged plugin was rewritten")
	}
}

func TestInstallPluginsErrors(t *testing.T) {
	src := t.TempDir()
	if _, err := installPlugins(src, filepath.Join(src, "absent"), []string{"x"}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("missing bin dir: err = %v", err)
	}
	dst := t.TempDir()
	if _, err := installPlugins(src, dst, []string{"multinet-shim"}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing source plugin: err = %v, want ErrNotExist", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("failed install left %d files", len(entries))
	}
}

func TestDefaultNetworkConfig(t *testing.T) {
	dir := t.TempDir()
	if p, err := defaultNetworkConfig(dir, "00-multinet.conflist"); err != nil || p != "" {
		t.Fatalf("empty dir: %q, %v", p, err)
	}
	writeFile(t, filepath.Join(dir, "00-multinet.conflist"), "{}", 0o644)
	writeFile(t, filepath.Join(dir, "README"), "x", 0o644)
	writeFile(t, filepath.Join(dir, ".10-tmp.conflist"), "{}", 0o644)
	if p, _ := defaultNetworkConfig(dir, "00-multinet.conflist"); p != "" {
		t.Errorf("only multinet's own, hidden and non-config files: got %q", p)
	}
	writeFile(t, filepath.Join(dir, "20-b.conf"), "{}", 0o644)
	writeFile(t, filepath.Join(dir, "10-flannel.conflist"), "{}", 0o644)
	if p, _ := defaultNetworkConfig(dir, "00-multinet.conflist"); p != filepath.Join(dir, "10-flannel.conflist") {
		t.Errorf("got %q, want the first config in lexical order", p)
	}
}

func TestWaitFor(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "default.conflist")
	go func() {
		time.Sleep(30 * time.Millisecond)
		writeFile(t, p, "", 0o644) // empty: not yet
		time.Sleep(30 * time.Millisecond)
		writeFile(t, p, `{"name":"d"}`, 0o644)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := waitFor(ctx, 5*time.Millisecond, nonEmptyFile(p), func(time.Duration) {})
	if err != nil || got != p {
		t.Fatalf("waitFor = %q, %v", got, err)
	}
	if b, _ := os.ReadFile(p); len(b) == 0 {
		t.Error("returned before the file had content")
	}

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := waitFor(ctx, 5*time.Millisecond, nonEmptyFile(filepath.Join(dir, "never")), func(time.Duration) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: err = %v, want DeadlineExceeded", err)
	}
}

func TestUninstall(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "etc/cni/net.d/00-multinet.conflist"), "{}", 0o644)
	writeFile(t, filepath.Join(root, "etc/cni/net.d/10-flannel.conflist"), "{}", 0o644)
	writeFile(t, filepath.Join(root, "opt/cni/bin/multinet-shim"), "x", 0o755)
	writeFile(t, filepath.Join(root, "opt/cni/bin/bridge"), "x", 0o755)
	writeFile(t, filepath.Join(root, "var/lib/multinet/records/a.json"), "{}", 0o600)

	removed, err := uninstall(root,
		[]string{"/etc/cni/net.d/00-multinet.conflist", "/opt/cni/bin/multinet-shim", "/opt/cni/bin/multinet-netdev"},
		[]string{"/var/lib/multinet", "/run/multinet"})
	if err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if len(removed) != 3 {
		t.Errorf("removed = %q, want the conflist, the shim and the state dir", removed)
	}
	for _, gone := range []string{"etc/cni/net.d/00-multinet.conflist", "opt/cni/bin/multinet-shim", "var/lib/multinet"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists", gone)
		}
	}
	for _, kept := range []string{"etc/cni/net.d/10-flannel.conflist", "opt/cni/bin/bridge"} {
		if _, err := os.Stat(filepath.Join(root, kept)); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}

	if _, err := uninstall(root, []string{"relative/file"}, []string{"/"}); err == nil {
		t.Error("relative file and / as a dir: want errors")
	}
	if _, err := os.Stat(filepath.Join(root, "etc")); err != nil {
		t.Error("uninstall of / removed the tree")
	}
}
