package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/pkg/spec/netconf"
)

// benchNet is one of the two bridge networks the bench creates as NADs.
type benchNet struct {
	name, bridge, subnet, config string
}

type bench struct {
	o   *options
	e   *env
	c   *cluster
	res *results

	nets    []benchNet
	ipamDir string
	// defaultIPAMDir: host-local's allocation dir of the default network
	// (checkReleased), "" when its conflist has no host-local IPAM.
	defaultIPAMDir string
	cacheDir       string
	lock           *os.File

	netns    *netnsPool
	tracker  *tracker
	multinet *path
	direct   *path
	// multus and multusPath: Multus thick side by side (-multus-bin-dir),
	// nil when not measured.
	multus     *multus
	multusPath *path
	// stub and stubPath: multinet-shim against a stub daemon in the bench
	// process (the floor outside multinetd's handler).
	stub     *stubDaemon
	stubPath *path

	pid        int
	ids        []identity
	pods       []podRef
	fsCreated  bool
	nsCreated  bool
	cleanedUp  bool
	cleanupMux sync.Mutex
}

func newBench(o *options, e *env) (*bench, error) {
	workDir, err := filepath.Abs(o.outDir)
	if err != nil {
		return nil, err
	}
	o.outDir = workDir
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(workDir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("another bench runs (lock %s): %w", lock.Name(), err)
	}
	c, err := newCluster(e.kubeconfig, e.node, o.namespace, e.image)
	if err != nil {
		return nil, err
	}
	// The bench networks' host-local dataDir: under the cluster's
	// CNI_IPAM_DIR when there is one, which a deployed multinetd mounts.
	ipamDir := filepath.Join(workDir, "ipam")
	if e.ipamDir != "" {
		ipamDir = filepath.Join(e.ipamDir, "bench")
	}
	b := &bench{
		o: o, e: e, c: c, lock: lock,
		ipamDir:  ipamDir,
		cacheDir: filepath.Join(workDir, "cni-cache"),
		netns:    newNetnsPool(o.netnsPrefix, o.netnsPublishDir),
		tracker:  &tracker{},
		res:      &results{o: o},
	}
	for i, name := range []string{"mnbench-a", "mnbench-b"} {
		n := benchNet{name: name, bridge: o.bridges[i], subnet: o.subnets[i]}
		cfg, _ := json.Marshal(map[string]any{
			"cniVersion": "1.0.0", "name": name, "type": "bridge", "bridge": n.bridge,
			"ipam": map[string]any{"type": "host-local", "dataDir": b.ipamDir,
				"ranges": [][]map[string]string{{{"subnet": n.subnet}}}},
		})
		n.config = string(cfg)
		b.nets = append(b.nets, n)
	}
	return b, nil
}

// prepare checks the cluster and builds the two paths.
func (b *bench) prepare(ctx context.Context) error {
	pid, err := daemonPID(b.o.daemonPIDFile)
	if err != nil {
		return err
	}
	b.pid = pid
	b.res.pid = pid
	for _, bin := range []string{"multinet-shim", "bridge", "host-local"} {
		if _, err := os.Stat(filepath.Join(b.e.cniBin, bin)); err != nil {
			return fmt.Errorf("CNI plugin %s: %w", bin, err)
		}
	}
	if left := staleNetns(b.o.netnsPrefix); len(left) > 0 {
		logf("removing %d netns of an earlier run", len(left))
		for _, n := range left {
			_ = b.netns.del(n)
		}
	}
	if err := b.c.removeStale(ctx); err != nil {
		return fmt.Errorf("remove an earlier run's objects: %w", err)
	}
	_ = os.RemoveAll(b.cacheDir)

	runtimeList, err := libcni.ConfListFromFile(b.o.runtimeConf)
	if err != nil {
		return fmt.Errorf("the runtime's CNI config: %w", err)
	}
	if len(runtimeList.Plugins) != 1 || runtimeList.Plugins[0].Network.Type != "multinet-shim" {
		return fmt.Errorf("%s: want one plugin of type multinet-shim", b.o.runtimeConf)
	}
	defaultList, err := libcni.ConfListFromFile(b.e.defaultConf)
	if err != nil {
		return fmt.Errorf("default network: %w", err)
	}
	// Both paths use libcni as the runtime does (containerd's go-cni):
	// exec from CNI_PATH, each plugin of a list given as a single config
	// with name and cniVersion injected, result cache for DEL's prevResult.
	b.defaultIPAMDir = hostLocalDir(defaultList)
	newCNI := func(dirs ...string) (*libcni.CNIConfig, *timedExec) {
		e := newTimedExec()
		return libcni.NewCNIConfigWithCacheDir(dirs, b.cacheDir, e), e
	}
	cni, exec := newCNI(b.e.cniBin)
	b.multinet = &path{name: "multinet", cni: cni, exec: exec, tracker: b.tracker,
		nets: []attachment{{list: runtimeList, ifName: "eth0"}}}
	direct := []attachment{{list: defaultList, ifName: "eth0"}}
	for i, n := range b.nets {
		// The list multinetd runs for the NAD: its single config as the
		// one plugin of a list.
		list, err := netconf.Resolve(b.o.namespace, n.name, n.config, nil)
		if err != nil {
			return fmt.Errorf("bench network %s: %w", n.name, err)
		}
		direct = append(direct, attachment{list: list, ifName: fmt.Sprintf("net%d", i+1)})
	}
	cni, exec = newCNI(b.e.cniBin)
	b.direct = &path{name: "direct", cni: cni, exec: exec, tracker: b.tracker, nets: direct}
	if b.stub, err = startStub(b.o.outDir); err != nil {
		return err
	}
	stubList, err := b.stub.list(runtimeList)
	if err != nil {
		return fmt.Errorf("stub daemon config: %w", err)
	}
	cni, exec = newCNI(b.e.cniBin)
	b.stubPath = &path{name: "stub", cni: cni, exec: exec, tracker: b.tracker, nets: []attachment{{list: stubList, ifName: "eth0"}}}
	if b.o.multusBinDir != "" {
		if b.multus, err = newMultus(b.o.multusBinDir, b.o.outDir); err != nil {
			return err
		}
		// The runtime finds multus-shim in the Multus build dir, the
		// delegates in the cluster's CNI bin dir.
		mcni, mexec := newCNI(b.o.multusBinDir, b.e.cniBin)
		list, err := b.multus.shimList(runtimeList.CNIVersion)
		if err != nil {
			return fmt.Errorf("Multus shim config: %w", err)
		}
		b.multusPath = &path{name: "multus", cni: mcni, exec: mexec, tracker: b.tracker, nets: []attachment{{list: list, ifName: "eth0"}}}
	}
	return nil
}

// paths returns the measured paths in a rotation by i, so that none
// systematically runs on a warmer (or colder) machine than another.
func (b *bench) paths(i int) []*path {
	ps := []*path{b.multinet, b.direct}
	if b.multusPath != nil {
		ps = append(ps, b.multusPath)
	}
	return rotate(ps, i)
}

// rotate returns ps rotated left by i.
func rotate(ps []*path, i int) []*path {
	i %= len(ps)
	return append(slices.Clone(ps[i:]), ps[:i]...)
}

// startMultus gives Multus its API access and starts its daemon (after
// the namespace exists), with the cluster's default network conflist.
func (b *bench) startMultus(ctx context.Context) error {
	logf("Multus thick side by side: multus-daemon from %s as a host process", b.o.multusBinDir)
	if err := b.multus.rbac(ctx, b.c); err != nil {
		return err
	}
	if err := b.multus.start(ctx, b.c, b.e, b.multusPath.nets[0].list.CNIVersion); err != nil {
		return err
	}
	b.res.multusPID = b.multus.pid()
	return nil
}

func (b *bench) run(ctx context.Context) (*results, error) {
	r := b.res
	r.started = time.Now()
	r.cpus = runtime.NumCPU()
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.kernel = strings.TrimSpace(string(k))
	}
	if v, err := b.c.kube.Discovery().ServerVersion(); err == nil {
		r.k8s = v.GitVersion
	}
	if n, err := b.c.kube.CoreV1().Nodes().Get(ctx, b.e.node, metav1.GetOptions{}); err == nil {
		r.runtime = n.Status.NodeInfo.ContainerRuntimeVersion
	}
	if m, err := os.ReadFile("/proc/meminfo"); err == nil {
		r.memTotal = memTotal(m)
	}
	r.node = b.e.node
	if err := b.prepare(ctx); err != nil {
		return nil, err
	}

	// 1. The shim's exec time (VERSION) vs bridge, and its size.
	logf("VERSION exec, %d runs each", b.o.versionRuns)
	if err := b.versionPhase(); err != nil {
		return nil, err
	}

	// 6a. multinetd's RSS before any bench pod exists.
	var err error
	if r.rssIdle, err = readMemory(b.pid); err != nil {
		return nil, err
	}

	// Setup: namespace, NADs, FlowSchemas, pods.
	b.ids = []identity{{label: "multinetd", user: b.o.daemonUser, priority: b.o.priority, catchAll: true}}
	if b.o.kubeletUser != "" {
		b.ids = append(b.ids, identity{label: "kubelet", user: b.o.kubeletUser, priority: b.o.kubeletPriority})
	}
	logf("setup: namespace %s, 2 NADs, FlowSchemas counting the requests of %s and %s", b.o.namespace, b.o.daemonUser, b.o.kubeletUser)
	b.nsCreated = true
	if err := b.c.setup(ctx, b.nets); err != nil {
		return nil, err
	}
	b.fsCreated = true
	if err := b.c.createFlowSchemas(ctx, b.ids); err != nil {
		return nil, err
	}
	if b.multus != nil {
		if err := b.startMultus(ctx); err != nil {
			return nil, err
		}
	} else {
		logf("Multus thick: not measured (no -multus-bin-dir / MULTUS_BIN_DIR; hack/multus-build.sh builds it)")
	}
	nPods := max(b.o.rssPods, b.o.apiAdds, 1)
	for _, c := range b.o.concurrency {
		nPods = max(nPods, c)
	}
	logf("creating %d pods bound to node %s (rejected by the kubelet at admission: no sandbox)", nPods, b.e.node)
	if b.pods, err = b.c.createPods(ctx, nPods, b.nets[0].name+","+b.nets[1].name); err != nil {
		return nil, err
	}
	// Let multinetd's informers see the pods' final state.
	time.Sleep(2 * time.Second)
	if b.multus != nil {
		if r.multusRSSIdle, err = readMemory(b.multus.pid()); err != nil {
			return nil, fmt.Errorf("multus-daemon: %w", err)
		}
	}

	// 5. API requests per ADD (fresh pods, so no Event aggregation).
	if b.o.apiAdds > 0 {
		logf("API requests: %d ADDs then %d DELs, then an idle window", b.o.apiAdds, b.o.apiAdds)
		if err := b.apiPhase(ctx); err != nil {
			return nil, err
		}
	}

	// 2, 3. Latency of ADD and DEL, multinet vs direct.
	logf("latency: %d warm-up + %d ADD/DEL iterations per path", b.o.warmup, b.o.iterations)
	if err := b.latencyPhase(ctx); err != nil {
		return nil, err
	}

	// 3b. CPU time per ADD and DEL, by process group.
	if b.o.cpuAdds > 0 {
		logf("CPU time: %d ADDs then DELs per path, in 3 rounds", b.o.cpuAdds)
		multus := 0
		if b.multus != nil {
			multus = b.multus.pid()
		}
		probe := newCPUProbe(b.pid, multus)
		logf("CPU time: multinetd %d, its children %v, kube-apiserver and etcd %v", b.pid, probe.launcher, probe.api)
		if err := b.cpuPhase(ctx, probe); err != nil {
			return nil, err
		}
	}

	// 4. Concurrent ADDs.
	for _, c := range b.o.concurrency {
		logf("concurrency %d: %d repetitions per path", c, b.o.concReps)
		if err := b.concurrencyPhase(ctx, c); err != nil {
			return nil, err
		}
	}

	// 6b. RSS with rssPods pods attached, and after their DEL.
	if b.o.rssPods > 0 {
		logf("RSS: %d pods attached at once", b.o.rssPods)
		if err := b.rssPhase(ctx); err != nil {
			return nil, err
		}
	}
	// 7. Hot-plug of a running pod.
	if b.o.hotPlugOps > 0 {
		logf("hot-plug: %d changes of a running pod's networks", b.o.hotPlugOps)
		if err := b.hotPlugPhase(ctx); err != nil {
			return nil, err
		}
	}
	// 8. Network policy: rules after label changes, ADD of selected pods.
	if b.o.policy.pods > 0 {
		if err := b.policyPhase(ctx); err != nil {
			return nil, err
		}
	}
	if r.rssPeak, err = procStatusKB(b.pid, "VmHWM"); err != nil {
		return nil, err
	}
	if r.cgroupPeak, r.cgroupLimit, err = cgroupMemory(b.pid); err != nil {
		logf("warning: multinetd's memory cgroup: %v", err)
	}
	if b.multus != nil {
		if r.multusRSSPeak, err = procStatusKB(b.multus.pid(), "VmHWM"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (b *bench) versionPhase() error {
	shim := filepath.Join(b.e.cniBin, "multinet-shim")
	bridge := filepath.Join(b.e.cniBin, "bridge")
	for _, bin := range []string{shim, bridge} {
		if _, err := execTimes(bin, 10); err != nil { // warm the page cache
			return err
		}
	}
	// Interleave the two binaries so that machine noise hits both alike.
	for i := 0; i < b.o.versionRuns; i++ {
		s, err := execTimes(shim, 1)
		if err != nil {
			return err
		}
		br, err := execTimes(bridge, 1)
		if err != nil {
			return err
		}
		b.res.versionShim = append(b.res.versionShim, s...)
		b.res.versionBridge = append(b.res.versionBridge, br...)
	}
	if fi, err := os.Stat(shim); err == nil {
		b.res.shimSize = fi.Size()
	}
	if b.stub != nil {
		var err error
		if b.res.stubDial, err = b.stub.dialTimes(b.o.versionRuns, "/var/run/netns/mnbench-stub"); err != nil {
			return fmt.Errorf("stub daemon: %w", err)
		}
	}
	if b.multusPath != nil {
		ms := filepath.Join(b.o.multusBinDir, "multus-shim")
		if _, err := execTimes(ms, 10); err != nil {
			return err
		}
		// multus-shim after the interleaved pair (same machine state, one binary).
		for i := 0; i < b.o.versionRuns; i++ {
			m, err := execTimes(ms, 1)
			if err != nil {
				return err
			}
			b.res.versionMultus = append(b.res.versionMultus, m...)
		}
		if fi, err := os.Stat(ms); err == nil {
			b.res.multusShimSize = fi.Size()
		}
	}
	if fi, err := os.Stat(bridge); err == nil {
		b.res.bridgeSize = fi.Size()
	}
	return nil
}

// newSandbox makes a fresh netns and container ID for pod.
func (b *bench) newSandbox(ctx context.Context, pod podRef) (*sandbox, error) {
	name, path, err := b.netns.add(ctx)
	if err != nil {
		return nil, err
	}
	return &sandbox{netns: name, path: path, containerID: newContainerID(), pod: pod}, nil
}

// split is one multinet operation as multinetd's own histograms saw it:
// the time from accept to the request read, its wait for a slot, its
// handler time and the delegates' time within it; and exec, the shim
// process's time as the bench's libcni ran it (timedExec).
type split struct{ read, queued, handler, delegates, exec time.Duration }

// splitOf returns the difference of two daemonSums for cmd, when exactly
// one operation happened in between.
func splitOf(a, b map[string]float64, cmd string) (split, bool) {
	if b[cmd+" op count"]-a[cmd+" op count"] != 1 {
		return split{}, false
	}
	sec := func(k string) time.Duration { return time.Duration((b[k] - a[k]) * float64(time.Second)) }
	return split{read: sec(cmd + " read sum"), queued: sec(cmd + " queued sum"), handler: sec(cmd + " op sum"), delegates: sec(cmd + " delegate sum")}, true
}

// once runs one ADD then one DEL of p on a fresh sandbox for pod. For the
// multinet path it also returns multinetd's view of each operation (from
// its /metrics, read outside the timed part).
func (b *bench) once(ctx context.Context, p *path, pod podRef) (add, del time.Duration, addSplit, delSplit *split, err error) {
	sb, err := b.newSandbox(ctx, pod)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	defer func() { _ = b.netns.del(sb.netns) }()
	var m0, m1, m2 map[string]float64
	scrape := p == b.multinet
	if scrape {
		m0 = b.daemonSums(ctx)
	}
	time.Sleep(b.o.pause)
	p.exec.take()
	if add, err = p.add(ctx, sb); err != nil {
		return 0, 0, nil, nil, err
	}
	exec := p.exec.take()
	if scrape {
		m1 = b.daemonSums(ctx)
	}
	if p == b.stubPath {
		if s, ok := b.stub.obs.take(api.CmdAdd); ok {
			s.exec = exec
			addSplit = &s
		}
	}
	time.Sleep(b.o.pause)
	p.exec.take()
	if del, err = p.del(ctx, sb); err != nil {
		return 0, 0, nil, nil, err
	}
	delExec := p.exec.take()
	if p == b.stubPath {
		if s, ok := b.stub.obs.take(api.CmdDel); ok {
			s.exec = delExec
			delSplit = &s
		}
	}
	b.checkReleased(p, sb)
	if scrape {
		m2 = b.daemonSums(ctx)
		if s, ok := splitOf(m0, m1, "ADD"); ok {
			s.exec = exec
			addSplit = &s
		}
		if s, ok := splitOf(m1, m2, "DEL"); ok {
			s.exec = delExec
			delSplit = &s
		}
	}
	return add, del, addSplit, delSplit, nil
}

func (b *bench) apiPhase(ctx context.Context) error {
	r := b.res
	k := b.o.apiAdds
	sbs := make([]*sandbox, k)
	for i := range sbs {
		sb, err := b.newSandbox(ctx, b.pods[i])
		if err != nil {
			return err
		}
		sbs[i] = sb
	}
	s0, err := b.c.apiSnapshot(ctx, b.ids)
	if err != nil {
		return err
	}
	for _, sb := range sbs {
		if _, err := b.multinet.add(ctx, sb); err != nil {
			return err
		}
	}
	time.Sleep(b.o.settle)
	s1, err := b.c.apiSnapshot(ctx, b.ids)
	if err != nil {
		return err
	}
	for _, sb := range sbs {
		if _, err := b.multinet.del(ctx, sb); err != nil {
			return err
		}
		_ = b.netns.del(sb.netns)
	}
	b.checkReleased(b.multinet, sbs...)
	time.Sleep(b.o.settle)
	s2, err := b.c.apiSnapshot(ctx, b.ids)
	if err != nil {
		return err
	}
	// Idle window as long as the ADD window: what the other clients
	// (kubelet, controllers, other users of the cluster) do meanwhile.
	time.Sleep(s1.at.Sub(s0.at))
	s3, err := b.c.apiSnapshot(ctx, b.ids)
	if err != nil {
		return err
	}
	r.apiAdds = k
	r.apiAddIdentity = subID(s0.identity, s1.identity)
	r.apiDelIdentity = subID(s1.identity, s2.identity)
	r.apiAddAll = sub(s0.all, s1.all)
	r.apiDelAll = sub(s1.all, s2.all)
	r.apiIdleAll = sub(s2.all, s3.all)
	r.apiIdleIdentity = subID(s2.identity, s3.identity)
	r.apiAddWindow = s1.at.Sub(s0.at)
	r.apiDelWindow = s2.at.Sub(s1.at)
	r.apiIdleWindow = s3.at.Sub(s2.at)
	if n := s1.patchStatusCount - s0.patchStatusCount; n > 0 {
		r.patchStatusMean = time.Duration((s1.patchStatusSum - s0.patchStatusSum) / n * float64(time.Second))
	}
	return nil
}

// daemonSums reads multinetd's histogram sums and counts (seconds, ops).
func (b *bench) daemonSums(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	samples, err := daemonMetrics(ctx, b.o.metricsAddr)
	if err != nil {
		logf("warning: multinetd metrics: %v", err)
		return out
	}
	for _, cmd := range []string{"ADD", "DEL"} {
		is := func(l map[string]string) bool { return l["command"] == cmd }
		out[cmd+" op sum"] = sumWhere(samples, "multinet_cni_operation_duration_seconds_sum", is)
		out[cmd+" op count"] = sumWhere(samples, "multinet_cni_operation_duration_seconds_count", is)
		out[cmd+" queued sum"] = sumWhere(samples, "multinet_cni_operation_queued_seconds_sum", is)
		out[cmd+" read sum"] = sumWhere(samples, "multinet_cni_request_read_seconds_sum", is)
		out[cmd+" delegate sum"] = sumWhere(samples, "multinet_delegate_duration_seconds_sum", is)
		out[cmd+" delegate count"] = sumWhere(samples, "multinet_delegate_duration_seconds_count", is)
	}
	return out
}

func (b *bench) latencyPhase(ctx context.Context) error {
	r := b.res
	pod := func(i int) podRef { return b.pods[i%len(b.pods)] }
	for i := 0; i < b.o.warmup; i++ {
		for _, p := range b.paths(0) {
			if _, _, _, _, err := b.once(ctx, p, pod(i)); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for i := 0; i < b.o.iterations; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The stub path takes its turn too (latency only).
		ps := b.paths(0)
		if b.stubPath != nil {
			ps = append(ps, b.stubPath)
		}
		for _, p := range rotate(ps, i) {
			add, del, as, ds, err := b.once(ctx, p, pod(i))
			if err != nil {
				return err
			}
			switch p {
			case b.stubPath:
				r.addStub = append(r.addStub, add)
				r.delStub = append(r.delStub, del)
				if as != nil {
					r.outStub.add(add, *as)
				}
				if ds != nil {
					r.outStubDel.add(del, *ds)
				}
			case b.multusPath:
				r.addMultus = append(r.addMultus, add)
				r.delMultus = append(r.delMultus, del)
			case b.multinet:
				r.addMultinet = append(r.addMultinet, add)
				r.delMultinet = append(r.delMultinet, del)
				if as != nil {
					r.addSplit.add(add, *as)
					r.outMultinet.add(add, *as)
				}
				if ds != nil {
					r.outMultinetDel.add(del, *ds)
				}
				if ds != nil {
					r.delSplit.add(del, *ds)
				}
			default:
				r.addDirect = append(r.addDirect, add)
				r.delDirect = append(r.delDirect, del)
			}
		}
	}
	return nil
}

// burst runs ADD of p for n fresh sandboxes at once and returns the wall
// time from the start signal to the last answer and how many ADDs failed;
// then DELs them (untimed). It records in cr.timeline[p.name], once per
// path, the time from the start signal to each successful ADD's answer.
func (b *bench) burst(ctx context.Context, p *path, n int, cr *concResult) (time.Duration, int, error) {
	sbs := make([]*sandbox, n)
	for i := range sbs {
		sb, err := b.newSandbox(ctx, b.pods[i])
		if err != nil {
			return 0, 0, err
		}
		sbs[i] = sb
	}
	defer func() {
		for _, sb := range sbs {
			_ = b.netns.del(sb.netns)
		}
	}()
	errs := make([]error, n)
	answered := make([]time.Duration, n)
	var ready, done sync.WaitGroup
	var t0 time.Time
	start := make(chan struct{})
	for i, sb := range sbs {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			_, errs[i] = p.add(ctx, sb)
			answered[i] = time.Since(t0)
		}()
	}
	ready.Wait()
	var api0 *apiCounts
	if p == b.multinet {
		var err error
		if api0, err = b.c.apiSnapshot(ctx, b.ids); err != nil {
			return 0, 0, err
		}
	}
	t0 = time.Now()
	close(start)
	done.Wait()
	wall := time.Since(t0)
	cr.record(p.name, answered, errs)
	if api0 != nil {
		api1, err := b.c.apiSnapshot(ctx, b.ids)
		if err != nil {
			return 0, 0, err
		}
		for _, v := range sub(api0.identity["multinetd"], api1.identity["multinetd"]) {
			cr.daemonRequests += v
		}
		cr.daemonWindow += api1.at.Sub(api0.at)
	}
	addErr := errors.Join(errs...)
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}

	for i, sb := range sbs {
		done.Add(1)
		go func() {
			defer done.Done()
			_, errs[i] = p.del(ctx, sb)
		}()
	}
	done.Wait()
	b.checkReleased(p, sbs...)
	if addErr != nil {
		return 0, failed, addErr
	}
	return wall, 0, errors.Join(errs...)
}

func (b *bench) concurrencyPhase(ctx context.Context, n int) error {
	var m, d, mu dist
	cr := concResult{n: n}
	before := b.daemonSums(ctx)
	api0, err := b.c.apiSnapshot(ctx, b.ids)
	if err != nil {
		return err
	}
	var lim *limitResult
	if n == b.o.limitConc && b.o.memLimitMiB > 0 {
		cg, l, err := b.limitMemory(n)
		if err != nil {
			return err
		}
		lim = l
		defer func() {
			if err := b.endLimit(cg, lim); err != nil {
				logf("warning: %v", err)
			}
			b.res.limits = append(b.res.limits, *lim)
		}()
	}
	for rep := 0; rep < b.o.concReps; rep++ {
		for _, p := range b.paths(rep) {
			time.Sleep(time.Second) // let the previous burst's Events and DELs settle
			wall, failed, err := b.burst(ctx, p, n, &cr)
			if lim != nil && p == b.multinet {
				lim.bursts++
				lim.adds += n
				lim.failed += failed
				if err != nil && ctx.Err() == nil {
					// Under the limit, a failed ADD is the result.
					logf("%d concurrent multinet ADDs under a %d MiB limit: %d failed: %v", n, b.o.memLimitMiB, failed, err)
					continue
				}
			}
			if err != nil && p == b.multusPath && ctx.Err() == nil {
				// Multus failing a burst is a result, not the end of the run.
				logf("%d concurrent Multus ADDs: %v", n, err)
				cr.multusFailed++
				continue
			}
			if err != nil {
				return fmt.Errorf("%d concurrent %s ADDs: %w", n, p.name, err)
			}
			switch p {
			case b.multinet:
				m = append(m, wall)
			case b.multusPath:
				mu = append(mu, wall)
			default:
				d = append(d, wall)
			}
		}
	}
	after := b.daemonSums(ctx)
	api1, err := b.c.apiSnapshot(ctx, b.ids)
	if err != nil {
		return err
	}
	cr.multinet, cr.direct, cr.multus = m, d, mu
	if c := api1.patchStatusCount - api0.patchStatusCount; c > 0 {
		cr.patchStatus = time.Duration((api1.patchStatusSum - api0.patchStatusSum) / c * float64(time.Second))
	}
	if ops := after["ADD op count"] - before["ADD op count"]; ops > 0 {
		cr.queued = time.Duration((after["ADD queued sum"] - before["ADD queued sum"]) / ops * float64(time.Second))
		cr.ran = time.Duration((after["ADD op sum"] - before["ADD op sum"]) / ops * float64(time.Second))
		cr.delegates = time.Duration((after["ADD delegate sum"] - before["ADD delegate sum"]) / ops * float64(time.Second))
	}
	b.res.conc = append(b.res.conc, cr)
	return nil
}

// limitMemory sets multinetd's memory cgroup (its container's, deployed)
// to -memory-limit for the bursts of n concurrent ADDs, resets its peak and
// notes its OOM kill count. endLimit reads the figures and restores the
// limit.
func (b *bench) limitMemory(n int) (*memcg, *limitResult, error) {
	cg, err := memcgOf(b.pid)
	if err != nil {
		return nil, nil, fmt.Errorf("multinetd's memory cgroup: %w", err)
	}
	l := &limitResult{n: n, limit: int64(b.o.memLimitMiB) << 20}
	oom0, err := cg.oomKills()
	if err != nil {
		return nil, nil, fmt.Errorf("multinetd's memory cgroup %s: %w", cg.dir, err)
	}
	if err := cg.setLimit(l.limit); err != nil {
		return nil, nil, fmt.Errorf("multinetd's memory cgroup: %w", err)
	}
	logf("%d concurrent: multinetd's memory cgroup %s limited to %d MiB (was %s)", n, cg.dir, b.o.memLimitMiB, cg.savedLimit)
	if l.sinceReset, err = cg.resetPeak(); err != nil {
		_ = cg.restore()
		return nil, nil, err
	}
	l.oomKills = -oom0
	return cg, l, nil
}

// endLimit completes l (peak, OOM kills, whether multinetd still runs)
// and restores the cgroup's limit.
func (b *bench) endLimit(cg *memcg, l *limitResult) error {
	var errs []error
	var err error
	if l.peak, err = cg.peak(); err != nil {
		errs = append(errs, err)
	}
	if k, err := cg.oomKills(); err != nil {
		errs = append(errs, err)
	} else {
		l.oomKills += k
	}
	l.exited = syscall.Kill(b.pid, 0) != nil
	if err := cg.restore(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		l.err = err.Error()
		return fmt.Errorf("multinetd's memory cgroup %s: %w", cg.dir, err)
	}
	return nil
}

func (b *bench) rssPhase(ctx context.Context) error {
	r := b.res
	n := b.o.rssPods
	sbs := make([]*sandbox, n)
	for i := range sbs {
		sb, err := b.newSandbox(ctx, b.pods[i])
		if err != nil {
			return err
		}
		sbs[i] = sb
	}
	// ADD all, ten at a time (as a kubelet starting a node's pods would).
	if err := parallel(n, 10, func(i int) error { _, err := b.multinet.add(ctx, sbs[i]); return err }); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	var err error
	if r.rssLoaded, err = readMemory(b.pid); err != nil {
		return err
	}
	if err := parallel(n, 10, func(i int) error { _, err := b.multinet.del(ctx, sbs[i]); return err }); err != nil {
		return err
	}
	b.checkReleased(b.multinet, sbs...)
	for _, sb := range sbs {
		_ = b.netns.del(sb.netns)
	}
	time.Sleep(3 * time.Second)
	r.rssPods = n
	if r.rssAfterDel, err = readMemory(b.pid); err != nil || b.multusPath == nil {
		return err
	}
	return b.multusRSS(ctx, sbs)
}

// multusRSS attaches the same pods through Multus (on fresh netns) and
// reads multus-daemon's memory with them attached.
func (b *bench) multusRSS(ctx context.Context, old []*sandbox) error {
	sbs := make([]*sandbox, len(old))
	for i := range sbs {
		sb, err := b.newSandbox(ctx, old[i].pod)
		if err != nil {
			return err
		}
		sbs[i] = sb
	}
	if err := parallel(len(sbs), 10, func(i int) error { _, err := b.multusPath.add(ctx, sbs[i]); return err }); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	var err error
	b.res.multusRSSLoaded, err = readMemory(b.multus.pid())
	if derr := parallel(len(sbs), 10, func(i int) error { _, err := b.multusPath.del(ctx, sbs[i]); return err }); derr != nil {
		return derr
	}
	b.checkReleased(b.multusPath, sbs...)
	for _, sb := range sbs {
		_ = b.netns.del(sb.netns)
	}
	return err
}

// parallel runs f(0..n-1) with at most width at once; the first error wins.
func parallel(n, width int, f func(int) error) error {
	sem := make(chan struct{}, width)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cleanup removes everything the bench made; it reports what it could not.
func (b *bench) cleanup() error {
	b.cleanupMux.Lock()
	defer b.cleanupMux.Unlock()
	if b.cleanedUp {
		return nil
	}
	b.cleanedUp = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logf("cleanup")
	var errs []error
	errs = append(errs, b.tracker.undoAll(ctx)...)
	errs = append(errs, b.netns.delAll()...)
	if b.stub != nil {
		b.stub.stop()
	}
	if b.multus != nil {
		if err := b.multus.stop(ctx, b.c); err != nil {
			errs = append(errs, fmt.Errorf("Multus: %w", err))
		}
		b.res.multusLeftCache = b.multus.leftCache
	}
	if b.nsCreated {
		if err := b.c.deleteNamespace(ctx); err != nil {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", b.o.namespace, err))
		}
	}
	if b.fsCreated {
		if err := b.c.deleteFlowSchemas(ctx); err != nil {
			errs = append(errs, fmt.Errorf("delete FlowSchemas: %w", err))
		}
	}
	for _, n := range b.nets {
		if err := removeBridge(n.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	// host-local allocations: the bench networks' dir goes entirely; in
	// the default network's dir, only files owned by a bench container
	// (there should be none: every DEL released its address).
	for _, dir := range []string{b.e.ipamDir, b.defaultIPAMDir} {
		if left := hostLocalLeftovers(dir); dir != "" && len(left) > 0 {
			errs = append(errs, fmt.Errorf("default network: %d host-local allocations of bench containers were left in %s (removed): %v", len(left), dir, left))
			for _, f := range left {
				_ = os.Remove(f)
			}
		}
	}
	if left := hostLocalLeftovers(b.ipamDir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("bench networks: %d host-local allocations were left (removed)", len(left)))
	}
	_ = os.RemoveAll(b.ipamDir)
	_ = os.RemoveAll(b.cacheDir)
	// multinetd's own records and libcni cache: report, never touch. The
	// networks multinetd remembers for CNI GC (records/networks/<name>.json)
	// are per network, not per container: they stay until a GC forgets them
	// (docs/multinetd.md), so they are not leftovers of bench containers.
	if b.e.clusterDir != "" {
		var left []string
		state := filepath.Join(b.e.clusterDir, "multinet", "state")
		remembered := filepath.Join(state, "records", "networks")
		_ = filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && p == remembered {
				return filepath.SkipDir
			}
			if err == nil && !d.IsDir() && strings.Contains(d.Name(), containerIDPrefix) {
				left = append(left, p)
			}
			return nil
		})
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("multinetd state still holds %d files of bench containers: %v", len(left), left))
		}
	}
	return errors.Join(errs...)
}
