package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on
// Linux whatever the kernel's HZ (proc(5)).
const userHZ = 100

// procCPU is one process's CPU time (user + system) from /proc/<pid>/stat:
// its own, and that of its children it has waited for (cutime + cstime:
// a daemon's exec'd delegates, with their own waited-for children).
type procCPU struct{ self, children time.Duration }

// parseProcStat reads utime, stime, cutime and cstime (fields 14–17 of
// proc(5)) from the content of /proc/<pid>/stat.
func parseProcStat(b []byte) (procCPU, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procCPU{}, fmt.Errorf("no ')' in %q", s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procCPU{}, fmt.Errorf("%d fields after the command, want ≥ 15", len(f))
	}
	var t [4]int64
	for k := range t {
		v, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return procCPU{}, fmt.Errorf("field %d: %w", 14+k, err)
		}
		t[k] = v
	}
	tick := time.Second / userHZ
	return procCPU{self: time.Duration(t[0]+t[1]) * tick, children: time.Duration(t[2]+t[3]) * tick}, nil
}

func readProcCPU(pid int) (procCPU, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procCPU{}, err
	}
	return parseProcStat(b)
}

// pidsWhere returns the PIDs of the host's processes for which keep
// returns true, given their /proc/<pid>/stat.
func pidsWhere(keep func(stat string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && keep(string(b)) {
			out = append(out, pid)
		}
	}
	return out
}

// pidsOf returns the PIDs of the host's processes whose command (comm) is
// name.
func pidsOf(name string) []int {
	return pidsWhere(func(stat string) bool { return strings.Contains(stat, " ("+name+") ") })
}

// childrenOf returns the PIDs of ppid's live children (multinetd's: its
// delegate launcher, which starts the delegates and waits for them).
func childrenOf(ppid int) []int {
	want := strconv.Itoa(ppid)
	return pidsWhere(func(stat string) bool {
		i := strings.LastIndexByte(stat, ')')
		if i < 0 {
			return false
		}
		f := strings.Fields(stat[i+1:]) // f[0] state, f[1] ppid
		return len(f) > 1 && f[1] == want
	})
}

// cpuGroup is one set of processes whose CPU time an ADD can use.
type cpuGroup int

const (
	cpuBenchSelf      cpuGroup = iota // the bench: libcni (and the stub daemon)
	cpuBenchChildren                  // the plugins the bench's libcni ran: multinet-shim, multus-shim, the direct delegates
	cpuDaemon                         // multinetd's own process
	cpuDaemonChildren                 // multinetd's launcher and delegates
	cpuMultus                         // multus-daemon and its delegates
	cpuAPI                            // kube-apiserver and etcd
	cpuCluster                        // the other cluster components (kubelet, controllers, containerd, ...)
	cpuGroups
)

var cpuGroupNames = [cpuGroups]string{
	"the bench process (libcni; the stub daemon)",
	"plugins run by the bench's libcni (multinet-shim, multus-shim, the direct delegates)",
	"multinetd's own process",
	"multinetd's delegate launcher and the delegates it ran",
	"multus-daemon and its delegates",
	"kube-apiserver and etcd",
	"the other cluster components: kubelet, kube-controller-manager, kube-scheduler, kube-proxy, containerd, coredns, multinet's other daemons",
}

// clusterComms are the commands (comm, 15 characters at most) of the
// cpuCluster group.
var clusterComms = []string{"kubelet", "kube-controller", "kube-scheduler", "kube-proxy", "containerd", "coredns",
	"multinet-webhoo", "multinet-device", "multinet-dra-dr"}

// cpuSample is the CPU time used so far by each group, at a time.
type cpuSample struct {
	at time.Time
	g  [cpuGroups]time.Duration
}

// cpuProbe samples the groups' CPU time.
type cpuProbe struct {
	daemon, multus int   // 0: absent
	launcher       []int // the daemon's live children
	api            []int // kube-apiserver and etcd
	cluster        []int // clusterComms
}

func newCPUProbe(daemon, multus int) *cpuProbe {
	p := &cpuProbe{daemon: daemon, multus: multus, launcher: childrenOf(daemon),
		api: append(pidsOf("kube-apiserver"), pidsOf("etcd")...)}
	for _, c := range clusterComms {
		p.cluster = append(p.cluster, pidsOf(c)...)
	}
	return p
}

func (c *cpuProbe) sample() (cpuSample, error) {
	s := cpuSample{at: time.Now()}
	var self, children unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &self); err != nil {
		return s, err
	}
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &children); err != nil {
		return s, err
	}
	tv := func(r *unix.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	s.g[cpuBenchSelf], s.g[cpuBenchChildren] = tv(&self), tv(&children)
	d, err := readProcCPU(c.daemon)
	if err != nil {
		return s, fmt.Errorf("multinetd: %w", err)
	}
	s.g[cpuDaemon], s.g[cpuDaemonChildren] = d.self, d.children
	for _, pid := range c.launcher {
		l, err := readProcCPU(pid)
		if err != nil {
			return s, fmt.Errorf("multinetd's child %d: %w", pid, err)
		}
		s.g[cpuDaemonChildren] += l.self + l.children
	}
	if c.multus != 0 {
		m, err := readProcCPU(c.multus)
		if err != nil {
			return s, fmt.Errorf("multus-daemon: %w", err)
		}
		s.g[cpuMultus] = m.self + m.children
	}
	for _, set := range []struct {
		g    cpuGroup
		pids []int
	}{{cpuAPI, c.api}, {cpuCluster, c.cluster}} {
		for _, pid := range set.pids {
			a, err := readProcCPU(pid)
			if err != nil {
				return s, fmt.Errorf("pid %d: %w", pid, err)
			}
			s.g[set.g] += a.self + a.children
		}
	}
	return s, nil
}

// cpuUse is what one path's counted operations used: CPU time by group
// (summed over its windows), the windows' wall time and the operations.
type cpuUse struct {
	g    [cpuGroups]time.Duration
	wall time.Duration
	ops  int
}

func (u *cpuUse) add(a, b cpuSample, ops int) {
	for i := range u.g {
		u.g[i] += b.g[i] - a.g[i]
	}
	u.wall += b.at.Sub(a.at)
	u.ops += ops
}

// background is the cluster's own busy share (CPU seconds per second of
// wall time) of cpuAPI and cpuCluster, from the windows of the paths that
// make no API request; the other groups have none.
type background [cpuGroups]float64

// perOp is group g's CPU time per operation, its background taken out.
func (u *cpuUse) perOp(g cpuGroup, bg background) time.Duration {
	if u.ops == 0 {
		return 0
	}
	v := u.g[g] - time.Duration(bg[g]*float64(u.wall))
	return v / time.Duration(u.ops)
}

// total is the CPU time per operation of every group.
func (u *cpuUse) total(apiBackground background) time.Duration {
	var t time.Duration
	for g := range cpuGroups {
		t += u.perOp(g, apiBackground)
	}
	return t
}

// cpuPhase runs, for each path (multinet, direct, Multus, the stub), the
// counted ADDs one after the other on fresh sandboxes, then their DELs,
// sampling the groups' CPU time around each window; the sandboxes are
// made before and removed after the windows (ip netns is the bench's
// child too). rounds rotate the paths, as in the latency phase.
func (b *bench) cpuPhase(ctx context.Context, probe *cpuProbe) error {
	const rounds = 3
	per := (b.o.cpuAdds + rounds - 1) / rounds
	r := b.res
	r.cpuAdd, r.cpuDel = map[string]*cpuUse{}, map[string]*cpuUse{}
	ps := append(b.paths(0), b.stubPath)
	for round := range rounds {
		for _, p := range rotate(ps, round) {
			if err := b.cpuWindow(ctx, probe, p, per); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) cpuWindow(ctx context.Context, probe *cpuProbe, p *path, n int) error {
	r := b.res
	for _, m := range []map[string]*cpuUse{r.cpuAdd, r.cpuDel} {
		if m[p.name] == nil {
			m[p.name] = &cpuUse{}
		}
	}
	sbs := make([]*sandbox, n)
	for i := range sbs {
		sb, err := b.newSandbox(ctx, b.pods[i%len(b.pods)])
		if err != nil {
			return err
		}
		sbs[i] = sb
	}
	defer func() {
		for _, sb := range sbs {
			_ = b.netns.del(sb.netns)
		}
	}()
	// each runs op on every sandbox, one after the other, waits a fifth of
	// settle for the operations' asynchronous work (Events, the kubelet's
	// reaction; its background share is taken out later) and samples.
	each := func(op func(context.Context, *sandbox) (time.Duration, error)) (cpuSample, error) {
		for _, sb := range sbs {
			if _, err := op(ctx, sb); err != nil {
				return cpuSample{}, err
			}
		}
		time.Sleep(b.o.settle / 5)
		return probe.sample()
	}
	time.Sleep(b.o.settle / 5)
	s0, err := probe.sample()
	if err != nil {
		return err
	}
	s1, err := each(p.add)
	if err != nil {
		return err
	}
	s2, err := each(p.del)
	if err != nil {
		return err
	}
	b.checkReleased(p, sbs...)
	r.cpuAdd[p.name].add(s0, s1, n)
	r.cpuDel[p.name].add(s1, s2, n)
	return nil
}

// backgroundOf is the busy share of cpuAPI and cpuCluster in the windows
// of the paths that make no API request: the direct delegates and the stub
// daemon.
func backgroundOf(use map[string]*cpuUse) background {
	var bg background
	var wall time.Duration
	var busy [cpuGroups]time.Duration
	for _, name := range []string{"direct", "stub"} {
		if u := use[name]; u != nil {
			for _, g := range []cpuGroup{cpuAPI, cpuCluster} {
				busy[g] += u.g[g]
			}
			wall += u.wall
		}
	}
	if wall > 0 {
		for _, g := range []cpuGroup{cpuAPI, cpuCluster} {
			bg[g] = float64(busy[g]) / float64(wall)
		}
	}
	return bg
}

// cpuTable is the report's table of CPU time per operation of cmd (ADD or
// DEL): for each path measured, the total and each group's share, in ms;
// "" when the phase did not run.
func cpuTable(cmd string, use map[string]*cpuUse) string {
	if len(use) == 0 {
		return ""
	}
	bg := backgroundOf(use)
	var names []string
	for _, n := range []string{"multinet", "direct", "multus", "stub"} {
		if use[n] != nil && use[n].ops > 0 {
			names = append(names, n)
		}
	}
	var b strings.Builder
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	row(append([]string{"CPU time per " + cmd + " (ms)"}, names...)...)
	row(slices.Repeat([]string{"---"}, len(names)+1)...)
	line := func(label string, f func(u *cpuUse) time.Duration) {
		cells := []string{label}
		for _, n := range names {
			cells = append(cells, ms(f(use[n])))
		}
		row(cells...)
	}
	line("**all the groups below**", func(u *cpuUse) time.Duration { return u.total(bg) })
	for g := range cpuGroups {
		line(cpuGroupNames[g], func(u *cpuUse) time.Duration { return u.perOp(g, bg) })
	}
	cells := []string{"operations counted; their windows' wall time"}
	for _, n := range names {
		cells = append(cells, fmt.Sprintf("%d; %s", use[n].ops, secs(use[n].wall)))
	}
	row(cells...)
	if m, d := use["multinet"], use["direct"]; m != nil && d != nil && d.total(bg) > 0 {
		fmt.Fprintf(&b, "\nmultinet / direct, CPU time per %s: %s. ", cmd, ratio(m.total(bg), d.total(bg)))
	}
	fmt.Fprintf(&b, "The background of the API server and etcd, %.1f ms per second of wall time, and of the other cluster components, %.1f ms/s (the direct and stub windows), is taken out of their rows.\n",
		bg[cpuAPI]*1000, bg[cpuCluster]*1000)
	return b.String()
}
