package nodeexec

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
)

// BenchmarkExecPlugin compares one plugin run (the probe, a static Go CNI
// plugin) through libcni's RawExec, as the daemon ran delegates in its
// own container, with the node-view executor: no chroot, chroot, chroot and a
// cgroup move. Run as root: go test -run '^$' -bench ExecPlugin ./internal/node/nodeexec
func BenchmarkExecPlugin(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("needs root (chroot, cgroups)")
	}
	root := b.TempDir()
	for _, d := range []string{"opt/cni/bin", "proc"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	bin, err := os.ReadFile(probeBin)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(root+"/opt/cni/bin/probe", bin, 0o755); err != nil {
		b.Fatal(err)
	}
	cg, err := NewCgroup("/", "/")
	if err != nil {
		b.Fatal(err)
	}
	env := []string{"PATH=/usr/bin"}
	ctx := context.Background()
	run := func(b *testing.B, exec invoke.Exec, path string) {
		d := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if _, err := exec.ExecPlugin(ctx, path, []byte(`{}`), env); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	}
	b.Run("libcni-RawExec", func(b *testing.B) { run(b, &invoke.DefaultExec{RawExec: &invoke.RawExec{}}, probeBin) })
	b.Run("nodeexec-host", func(b *testing.B) { run(b, &Exec{}, probeBin) })
	b.Run("nodeexec-chroot", func(b *testing.B) { run(b, &Exec{Root: root}, "/opt/cni/bin/probe") })
	b.Run("nodeexec-chroot-launcher", func(b *testing.B) { run(b, &Exec{Root: root, Launcher: testLauncher(b, cg)}, "/opt/cni/bin/probe") })
}

// BenchmarkCgroupPlace is the cost of one delegate's cgroup move (every
// hierarchy mounted here: 9 on the cgroup v1 machines of this project),
// moving a process back and forth between two cgroups.
func BenchmarkCgroupPlace(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("needs root (cgroups)")
	}
	root, err := NewCgroup("/", "/")
	if err != nil {
		b.Fatal(err)
	}
	other, err := NewCgroup("/", testCgroup(b))
	if err != nil {
		b.Fatal(err)
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	b.ReportMetric(float64(len(root.Dirs())), "hierarchies")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cg := root
		if i%2 == 0 {
			cg = other
		}
		if err := cg.Place(sleep.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
}
