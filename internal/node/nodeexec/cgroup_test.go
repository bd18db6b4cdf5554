package nodeexec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moby/sys/mountinfo"
)

var cgroupSeq atomic.Int64

// testCgroup creates cgroup path in every hierarchy mounted under
// /sys/fs/cgroup and removes it when t ends.
func testCgroup(t testing.TB) string {
	t.Helper()
	path := fmt.Sprintf("/multinet-nodeexec-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter("/sys/fs/cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, m := range mounts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		rel, err := filepath.Rel(m.Root, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		d := filepath.Join(m.Mountpoint, rel)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("mkdir %s: %v", d, err)
		}
		made = append(made, d)
		// A new v1 cpuset has no CPUs or memory nodes: inherit the parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), b, 0); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
		}
	}
	if len(made) == 0 {
		t.Fatal("no cgroup hierarchy under /sys/fs/cgroup")
	}
	t.Cleanup(func() {
		for _, d := range made {
			_ = os.Remove(d)
		}
	})
	return path
}

// cgroupLines returns /proc/<pid>/cgroup's paths by hierarchy line prefix.
func cgroupPaths(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		i := strings.LastIndex(l, ":")
		if i < 0 {
			continue
		}
		out[l[:i]] = l[i+1:]
	}
	return out
}

// testLauncher returns a Launcher whose helper is this test binary (its
// init serves LauncherArg), placed in cg, closed when t ends.
func testLauncher(t testing.TB, cg *Cgroup) *Launcher {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLauncher([]string{self}, cg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestExecPlacesPluginInTheNodeCgroup(t *testing.T) {
	requireRoot(t)
	path := testCgroup(t)
	cg, err := NewCgroup("/", path)
	if err != nil {
		t.Fatalf("NewCgroup: %v", err)
	}
	e := &Exec{Launcher: testLauncher(t, cg)}
	out, err := e.ExecPlugin(testCtx(t), probeBin, nil, nil)
	if err != nil {
		t.Fatalf("ExecPlugin: %v", err)
	}
	r := decodeReport(t, out)
	got := cgroupPaths(r.Cgroup)
	mine, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for h := range cgroupPaths(string(mine)) {
		p, ok := got[h]
		if !ok {
			continue
		}
		if strings.HasPrefix(h, "0::") && len(got) > 1 {
			continue // hybrid: the unused v2 hierarchy is not mounted here
		}
		if p != path {
			t.Errorf("hierarchy %q: the plugin ran in %q, want %q", h, p, path)
		}
		moved++
	}
	if moved != len(cg.Dirs()) {
		t.Errorf("placed in %d hierarchies, want %d (%v)", moved, len(cg.Dirs()), cg.Dirs())
	}
}

func TestLauncherRefusesACgroupItCannotUse(t *testing.T) {
	requireRoot(t)
	path := testCgroup(t)
	cg, err := NewCgroup("/", path)
	if err != nil {
		t.Fatalf("NewCgroup: %v", err)
	}
	// The cgroup goes away after the check: the helper cannot be placed.
	for _, d := range cg.Dirs() {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	l := testLauncher(t, cg)
	if err := l.Start(); err == nil || !strings.Contains(err.Error(), "moving pid") {
		t.Errorf("Start = %v, want the placement error", err)
	}
	done := filepath.Join(t.TempDir(), "ran")
	conf := []byte(`{"cniVersion":"1.0.0","name":"n","type":"probe","probeFile":"` + done + `"}`)
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c", "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=eth9", "CNI_PATH=/x"}
	if _, err = (&Exec{Launcher: l}).ExecPlugin(testCtx(t), probeBin, conf, env); err == nil {
		t.Fatal("ExecPlugin ran although its launcher cannot be placed")
	}
	if _, serr := os.Stat(done); !os.IsNotExist(serr) {
		t.Errorf("the plugin ran its command (stat %s: %v)", done, serr)
	}
}

func TestNewCgroupErrors(t *testing.T) {
	if _, err := NewCgroup("/", "relative"); err == nil {
		t.Error("a relative cgroup path was accepted")
	}
	if _, err := NewCgroup(t.TempDir(), "/"); err == nil || !strings.Contains(err.Error(), "no cgroup hierarchy") {
		t.Errorf("a root without cgroup mounts: %v", err)
	}
	requireRoot(t)
	if _, err := NewCgroup("/", "/multinet-does-not-exist-"+filepath.Base(t.TempDir())); err == nil {
		t.Error("a missing cgroup was accepted")
	}
}
