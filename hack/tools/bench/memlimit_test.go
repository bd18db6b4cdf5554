package main

import (
	"fmt"
	"github.com/multinet/multinet/internal/testing/testskip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseOOMKill(t *testing.T) {
	v1 := "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	v2 := "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"
	for in, want := range map[string]int64{v1: 3, v2: 2} {
		if got, err := parseOOMKill(in); err != nil || got != want {
			t.Errorf("parseOOMKill(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	if _, err := parseOOMKill("oom_kill_disable 0\n"); err == nil {
		t.Error("no oom_kill line: no error")
	}
}

func TestMemcgFrom(t *testing.T) {
	root := t.TempDir()
	cg, err := memcgFrom("4:memory:/kubepods/burstable/podX/abc\n0::/\n", root)
	if err != nil || !cg.v1 || cg.dir != filepath.Join(root, "memory/kubepods/burstable/podX/abc") {
		t.Errorf("v1: %+v, %v", cg, err)
	}
	if err := os.MkdirAll(filepath.Join(root, "kubepods/pod/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "kubepods/pod/c/memory.max"), []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cg, err = memcgFrom("0::/kubepods/pod/c\n", root)
	if err != nil || cg.v1 || cg.dir != filepath.Join(root, "kubepods/pod/c") {
		t.Errorf("v2: %+v, %v", cg, err)
	}
	if _, err := memcgFrom("1:cpu:/\n", root); err == nil {
		t.Error("no memory cgroup: no error")
	}
}

// TestMemcgLimit sets and restores the limit of a real memory cgroup made
// for the test (as root), resets and reads its peak and OOM kill count.
func TestMemcgLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (creates a memory cgroup)")
	}
	self, err := memcgOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(strings.TrimRight(self.dir, "/")), fmt.Sprintf("mnbench-test-%d", os.Getpid()))
	if self.v1 {
		dir = filepath.Join("/sys/fs/cgroup/memory", fmt.Sprintf("mnbench-test-%d", os.Getpid()))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		testskip.Skip(t, "cannot create a memory cgroup next to this process's (%v)", err)
	}
	defer func() { _ = os.Remove(dir) }()
	cg := &memcg{dir: dir, v1: self.v1}
	before, err := cg.limit()
	if err != nil {
		t.Fatal(err)
	}
	if err := cg.setLimit(64 << 20); err != nil {
		t.Fatal(err)
	}
	if got, err := cg.limit(); err != nil || got != 64<<20 {
		t.Errorf("limit after setLimit(64 MiB) = %d, %v", got, err)
	}
	if _, err := cg.resetPeak(); err != nil {
		t.Fatal(err)
	}
	if p, err := cg.peak(); err != nil || p < 0 || p > 64<<20 {
		t.Errorf("peak = %d, %v", p, err)
	}
	if n, err := cg.oomKills(); err != nil || n != 0 {
		t.Errorf("oomKills = %d, %v", n, err)
	}
	if err := cg.restore(); err != nil {
		t.Fatal(err)
	}
	if got, err := cg.limit(); err != nil || got != before {
		t.Errorf("limit after restore = %d, %v, want %d", got, err, before)
	}
}

// TestLimitResult: the memory-limited burst's cell, and what fails the run.
func TestLimitResult(t *testing.T) {
	good := limitResult{n: 150, limit: 64 << 20, bursts: 2, adds: 300, peak: 40 << 20, sinceReset: true}
	bad := good
	bad.failed, bad.oomKills = 7, 1
	if !good.ok() || bad.ok() {
		t.Fatalf("ok(): good %v, bad %v", good.ok(), bad.ok())
	}
	if s := good.String(); s != "300 of 300 ADDs completed (2 bursts of 150), 0 failed; memory peak 40.0 MiB; oom_kill 0" {
		t.Errorf("good = %q", s)
	}
	if s := bad.String(); !strings.HasPrefix(s, "**FAILED**: 293 of 300 ADDs completed") || !strings.Contains(s, "oom_kill 1") {
		t.Errorf("bad = %q", s)
	}
	r := &results{o: &options{}, limits: []limitResult{good}}
	if f := r.failures(); len(f) != 0 {
		t.Errorf("failures() = %v", f)
	}
	if out := r.markdown(); !strings.Contains(out, "150 concurrent ADDs with multinetd's container under a 64 MiB memory limit") ||
		!strings.Contains(out, "memory peak 40.0 MiB") {
		t.Errorf("table lacks the limited burst:\n%s", out)
	}
	r.limits = append(r.limits, bad)
	if f := r.failures(); len(f) != 1 {
		t.Errorf("failures() = %v, want the failed burst", f)
	}
	empty := limitResult{n: 150, limit: 64 << 20}
	if empty.ok() {
		t.Error("a limit with no ADD run is ok")
	}
}
