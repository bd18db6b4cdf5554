//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMultinetdCPUWeight: the deployed multinetd container's CPU cgroup has
// the weight its CPU request gives it (cgroup v1 cpu.shares = milliCPU ×
// 1024 / 1000; v2 cpu.weight = 1 + (shares − 2) × 9999 / 262142, what the
// kubelet and runc write), at least that of the floor deploy/README.md
// "CPU for multinetd" sets (100m), and no CFS quota (no CPU limit: the CNI on
// the pod-start path must never be throttled). Delegates running outside
// this cgroup is TestDelegatesRunInTheNodeView's.
func TestMultinetdCPUWeight(t *testing.T) {
	requireDeployed(t)
	const floorMilli = 100
	p := runningPod(t, "multinetd")
	var milli int64 = -1
	for _, c := range p.Spec.Containers {
		if c.Name == "multinetd" {
			milli = c.Resources.Requests.Cpu().MilliValue()
			if !c.Resources.Limits.Cpu().IsZero() {
				t.Errorf("multinetd has a CPU limit %s: want none", c.Resources.Limits.Cpu())
			}
		}
	}
	if milli < floorMilli {
		t.Errorf("multinetd's CPU request %dm, want at least %dm", milli, floorMilli)
	}
	wantShares := max(milli*1024/1000, 2)
	dir, v2 := cpuCgroupDir(t, containerPID(t, p))
	if v2 {
		want := 1 + (wantShares-2)*9999/262142
		if got := readCgroupInt(t, filepath.Join(dir, "cpu.weight")); got != want {
			t.Errorf("%s/cpu.weight = %d, want %d (request %dm)", dir, got, want, milli)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err != nil || !strings.HasPrefix(string(b), "max ") {
			t.Errorf("%s/cpu.max = %q (%v), want no quota (max)", dir, b, err)
		}
		return
	}
	if got := readCgroupInt(t, filepath.Join(dir, "cpu.shares")); got != wantShares {
		t.Errorf("%s/cpu.shares = %d, want %d (request %dm)", dir, got, wantShares, milli)
	}
	if got := readCgroupInt(t, filepath.Join(dir, "cpu.cfs_quota_us")); got != -1 {
		t.Errorf("%s/cpu.cfs_quota_us = %d, want -1 (no CPU limit)", dir, got)
	}
}

// cpuCgroupDir returns the directory of host process pid's CPU cgroup under
// /sys/fs/cgroup and whether it is cgroup v2 (the unified hierarchy).
func cpuCgroupDir(t *testing.T, pid int) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "0::"); ok {
				return filepath.Join("/sys/fs/cgroup", p), true
			}
		}
		t.Fatalf("pid %d has no cgroup v2 path: %s", pid, b)
	}
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if ctrl != "cpu" {
				continue
			}
			for _, mnt := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
				dir := filepath.Join("/sys/fs/cgroup", mnt, parts[2])
				if _, err := os.Stat(filepath.Join(dir, "cpu.shares")); err == nil {
					return dir, false
				}
			}
		}
	}
	t.Fatalf("pid %d: no cpu cgroup directory with cpu.shares found (%s)", pid, b)
	return "", false
}

func readCgroupInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
