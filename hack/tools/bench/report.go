package main

import (
	"fmt"
	"strings"
	"time"
)

type concResult struct {
	n                        int
	multinet, direct, multus dist
	multusFailed             int // Multus bursts with a failed ADD
	// means per ADD inside multinetd: waiting for a slot, handler run
	// time, delegates within the run.
	queued, ran, delegates time.Duration
	// patchStatus: the API server's mean time of PATCH pods/status over
	// the bursts (every client).
	patchStatus time.Duration
	// daemonRequests: multinetd's API requests from the start of its
	// bursts until their last ADD answered (all repetitions), and the
	// length of those windows.
	daemonRequests float64
	daemonWindow   time.Duration
	// timeline: per path, one burst's times from the start signal to each
	// successful ADD's answer (the first burst of the path with one).
	timeline map[string]dist
}

// record keeps answered (the times of one burst's ADDs, those with a nil
// error in errs) as path's timeline, unless it has one already.
func (c *concResult) record(path string, answered []time.Duration, errs []error) {
	if _, ok := c.timeline[path]; ok {
		return
	}
	var d dist
	for i, t := range answered {
		if errs[i] == nil {
			d = append(d, t)
		}
	}
	if len(d) == 0 {
		return
	}
	if c.timeline == nil {
		c.timeline = map[string]dist{}
	}
	c.timeline[path] = d
}

// splits decompose the multinet operations, per operation: outside
// multinetd's handler (shim exec, socket, the runtime's libcni, multinetd
// reading the request), waiting in multinetd for a slot, multinetd's own
// work (handler minus delegates), and the delegates.
type splits struct{ outside, queued, own, delegates dist }

func (s *splits) add(total time.Duration, sp split) {
	s.outside = append(s.outside, total-sp.handler-sp.queued)
	s.queued = append(s.queued, sp.queued)
	s.own = append(s.own, sp.handler-sp.delegates)
	s.delegates = append(s.delegates, sp.delegates)
}

// results are the measurements of one run.
type results struct {
	o *options

	started         time.Time
	cpus            int
	kernel, k8s     string
	node            string
	runtime         string // the node's container runtime and version (its status.nodeInfo)
	memTotal        int64  // the machine's memory (MemTotal), bytes
	pid             int
	versionShim     dist
	versionBridge   dist
	shimSize        int64
	bridgeSize      int64
	addMultinet     dist
	addDirect       dist
	delMultinet     dist
	delDirect       dist
	addSplit        splits
	delSplit        splits
	conc            []concResult
	apiAdds         int
	apiAddIdentity  map[string]map[apiKey]float64
	apiDelIdentity  map[string]map[apiKey]float64
	apiIdleIdentity map[string]map[apiKey]float64
	apiAddAll       map[apiKey]float64
	apiDelAll       map[apiKey]float64
	apiIdleAll      map[apiKey]float64
	apiAddWindow    time.Duration
	apiDelWindow    time.Duration
	apiIdleWindow   time.Duration
	patchStatusMean time.Duration
	rssIdle         memory
	rssLoaded       memory
	rssAfterDel     memory
	rssPeak         int64
	cgroupPeak      int64 // multinetd's memory cgroup peak (its container's, deployed)
	cgroupLimit     int64 // and its limit, 0 for none
	rssPods         int
	hotPlug         hotPlugResult
	policy          policyResult

	// Multus thick side by side (-multus-bin-dir); empty when not measured.
	multusPID       int
	versionMultus   dist
	multusShimSize  int64
	addMultus       dist
	delMultus       dist
	multusRSSIdle   memory
	multusRSSLoaded memory
	multusRSSPeak   int64
	multusLeftCache int // Multus cache files of bench containers left after their DEL

	// leaked: per path, default-network addresses its DEL left allocated
	// (checkReleased); any fails the run.
	leaked map[string]int
	// limits: the bursts run with multinetd's memory cgroup limited.
	limits []limitResult

	// multinet-shim against a stub daemon in the bench process.
	addStub, delStub dist
	// ADDs outside the handler, by part: through multinetd, through the stub.
	outMultinet, outStub       outsideParts
	outMultinetDel, outStubDel outsideParts
	// CPU time of the counted ADDs and DELs, by path.
	cpuAdd, cpuDel map[string]*cpuUse
	stubDial       dist
}

// multusCell is the Multus column: measured() when Multus ran in this run,
// else empty (the column is measured, never copied).
func (r *results) multusCell(measured func() string) string {
	if r.multusPID != 0 {
		return measured()
	}
	return ""
}

// ratio formats a/b as "1.23×", "n/a" when b is 0.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

func (r *results) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### multinet benchmark (`make bench`), %s\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Node %s, %d CPUs, kernel %s, Kubernetes %s. Pod: default network + 2 bridge networks (host-local). "+
		"%d ADD/DEL iterations per path, %d VERSION runs per binary.\n\n",
		r.node, r.cpus, r.kernel, r.k8s, len(r.addMultinet), len(r.versionShim))
	fmt.Fprintf(&b, "Runtime config %s; multinetd pid %d.\n\n", r.o.runtimeConf, r.pid)
	multusHdr := "Multus thick (not measured in this run)"
	if r.multusPID != 0 {
		multusHdr = "Multus thick (measured in this run)"
		fmt.Fprintf(&b, "Multus thick: multus-daemon pid %d from %s, a host process, driven through multus-shim; "+
			"after every DEL it had left %d result cache files of bench containers in its cniDir.\n\n", r.multusPID, r.o.multusBinDir, r.multusLeftCache)
	} else {
		b.WriteString("Multus thick was not measured (no `MULTUS_BIN_DIR`; `hack/multus-build.sh` builds it): its column is empty.\n\n")
	}

	b.WriteString("| measure | multinet | direct / reference | " + multusHdr + " | target |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }

	row("shim binary size", mib(r.shimSize)+" (multinet-shim)", mib(r.bridgeSize)+" (bridge)",
		r.multusCell(func() string { return mib(r.multusShimSize) + " (multus-shim)" }), "a few MB")
	row("VERSION exec (ms)", r.versionShim.triple(), r.versionBridge.triple()+" (bridge)",
		r.multusCell(r.versionMultus.triple), "≤ 3 ms")
	row("ADD latency (ms)", r.addMultinet.triple(), r.addDirect.triple(), r.multusCell(r.addMultus.triple), "")
	row("ADD overhead at p50 (ms), × direct", overhead(r.addMultinet, r.addDirect)+", "+ratio(r.addMultinet.median(), r.addDirect.median()), "",
		r.multusCell(func() string {
			return overhead(r.addMultus, r.addDirect) + ", " + ratio(r.addMultus.median(), r.addDirect.median())
		}), "≤ 3 ms (status write off the critical path), ≤ PATCH + 3 ms (on it)")
	row("DEL latency (ms)", r.delMultinet.triple(), r.delDirect.triple(), r.multusCell(r.delMultus.triple), "")
	row("DEL overhead at p50 (ms), × direct", overhead(r.delMultinet, r.delDirect)+", "+ratio(r.delMultinet.median(), r.delDirect.median()), "",
		r.multusCell(func() string {
			return overhead(r.delMultus, r.delDirect) + ", " + ratio(r.delMultus.median(), r.delDirect.median())
		}), "≤ 5 ms")
	for _, x := range []struct {
		cmd    string
		sp     splits
		direct dist
	}{{"ADD", r.addSplit, r.addDirect}, {"DEL", r.delSplit, r.delDirect}} {
		if len(x.sp.own) == 0 {
			continue
		}
		row(fmt.Sprintf("%s split (ms): outside multinetd's handler; queued in multinetd; multinetd's own work; delegates", x.cmd),
			fmt.Sprintf("%s / %s; %s / %s; %s / %s; %s / %s (n %d)",
				x.sp.outside.q(50), x.sp.outside.q(90),
				x.sp.queued.q(50), x.sp.queued.q(90),
				x.sp.own.q(50), x.sp.own.q(90),
				x.sp.delegates.q(50), x.sp.delegates.q(90), len(x.sp.own)),
			fmt.Sprintf("delegates direct: %s / %s", x.direct.q(50), x.direct.q(90)), "", "")
	}
	if len(r.addStub) > 0 {
		row("ADD / DEL through multinet-shim to a stub daemon (ms): libcni + shim exec + socket, no work",
			r.addStub.triple()+" / DEL "+r.delStub.triple(), "", "", "")
		if len(r.addSplit.outside) > 0 {
			row("ADD outside multinetd's handler above the stub floor, p50 (ms)",
				fmt.Sprintf("%+.1f (%s − %s)", float64(r.addSplit.outside.median()-r.addStub.median())/float64(time.Millisecond),
					ms(r.addSplit.outside.median()), ms(r.addStub.median())), "", "", "")
		}
	}
	for _, o := range outsideRows(r.outMultinet, r.outStub) {
		row("ADD outside the handler, p50 / mean (ms): "+o[0], o[1], "", "", "")
	}
	for _, o := range outsideRows(r.outMultinetDel, r.outStubDel) {
		row("DEL outside the handler, p50 / mean (ms): "+o[0], o[1], "", "", "")
	}
	if len(r.stubDial) > 0 {
		row("socket alone: one ADD exchange with the stub daemon from the bench process (ms)", r.stubDial.triple(), "", "", "")
	}
	for _, c := range r.conc {
		m, d := c.multinet.median(), c.direct.median()
		ref := r.multusCell(func() string {
			out := fmt.Sprintf("%s (%s direct)", secs(c.multus.median()), ratio(c.multus.median(), d))
			if c.multusFailed > 0 {
				out += fmt.Sprintf("; %d of %d bursts had a failed ADD", c.multusFailed, c.multusFailed+len(c.multus))
			}
			return out
		})
		row(fmt.Sprintf("%d concurrent ADDs, wall (median of %d)", c.n, len(c.multinet)),
			fmt.Sprintf("%s (%s direct)", secs(m), ratio(m, d)), secs(d), ref, "≤ 1.2× direct")
		if c.ran > 0 {
			row(fmt.Sprintf("… in multinetd at %d concurrent, mean per ADD (ms)", c.n),
				fmt.Sprintf("queued %s; ran %s, delegates %s; API server PATCH pods/status %s; multinetd API requests %.0f/s during the bursts",
					ms(c.queued), ms(c.ran), ms(c.delegates), ms(c.patchStatus), c.daemonRequests/max(c.daemonWindow.Seconds(), 0.001)), "", "", "")
		}
	}
	for _, l := range r.limits {
		row(fmt.Sprintf("%d concurrent ADDs with multinetd's container under a %.0f MiB memory limit (set on its cgroup for these bursts, restored after)", l.n, float64(l.limit)/(1<<20)),
			l.String(), "", "", fmt.Sprintf("all complete, no OOM kill, peak reported (%.0f MiB)", float64(l.limit)/(1<<20)))
	}
	{
		cell := func(name string) string {
			if r.leaked[name] > 0 {
				return fmt.Sprintf("**FAILED**: %d", r.leaked[name])
			}
			return "0"
		}
		mu := ""
		if r.multusPID != 0 {
			mu = cell("multus")
		}
		row("default-network addresses still allocated after DEL (host-local files of the path's containers; removed by the bench)",
			cell("multinet"), cell("direct"), mu, "0")
	}
	row("daemon RSS idle", r.rssIdle.String(), "", r.multusCell(r.multusRSSIdle.String), "")
	if r.rssPods > 0 {
		row(fmt.Sprintf("daemon RSS with %d pods attached", r.rssPods), r.rssLoaded.String(), "",
			r.multusCell(r.multusRSSLoaded.String), "≤ 30 MiB, anon ≤ 15 MiB")
		row(fmt.Sprintf("multinetd RSS after DEL of the %d", r.rssPods), r.rssAfterDel.String(), "", "", "")
	}
	if r.cgroupPeak > 0 {
		lim := "no limit"
		if r.cgroupLimit > 0 {
			lim = "limit " + mib(r.cgroupLimit)
		}
		maxConc := 0
		for _, c := range r.conc {
			maxConc = max(maxConc, c.n)
		}
		since := "since its start"
		if len(r.limits) > 0 {
			// limitMemory reset the peak.
			since = fmt.Sprintf("since the reset before the %d-concurrent bursts under the limit", r.limits[0].n)
		}
		row(fmt.Sprintf("multinetd memory cgroup peak (%s; bursts up to %d concurrent ADDs, then the later phases)", since, maxConc),
			mib(r.cgroupPeak)+" ("+lim+")", "", "", "150 concurrent within 64 MiB")
	}
	row("daemon peak RSS (VmHWM, since start)", mib(r.rssPeak), "", r.multusCell(func() string { return mib(r.multusRSSPeak) }), "")
	if n := len(r.hotPlug.toInterface); n > 0 {
		row(fmt.Sprintf("hot-plug, annotation PATCH → interface in the pod (ms, %d changes)", n), r.hotPlug.toInterface.triple(), "", "", "")
		row(fmt.Sprintf("hot-plug, annotation PATCH → network-status (ms, %d changes)", n), r.hotPlug.toStatus.triple(), "", "", "p99 ≤ 1 s")
	}
	r.policy.rows(row)

	if r.apiAdds > 0 {
		k := float64(r.apiAdds)
		scale := 1.0
		if r.apiIdleWindow > 0 {
			scale = float64(r.apiAddWindow) / float64(r.apiIdleWindow)
		}
		_, withKubelet := r.apiAddIdentity["kubelet"]
		kubeletCol := func(v string) []string {
			if withKubelet {
				return []string{v}
			}
			return nil
		}
		hdr := []string{fmt.Sprintf("API requests per ADD (%d ADDs, %.1f s window)", r.apiAdds, r.apiAddWindow.Seconds()),
			"multinetd (its user, FlowSchema counts)"}
		hdr = append(hdr, kubeletCol("kubelet (its user)")...)
		hdr = append(hdr, "all clients (apiserver_request_total − idle window)", "Multus thick", "target")
		b.WriteString("\n")
		row(hdr...)
		b.WriteString(strings.Repeat("| --- ", len(hdr)) + "|\n")
		type line struct {
			key       apiKey
			all       []apiKey
			ref, want string
		}
		lines := []line{
			{apiKey{"GET", "pods"}, []apiKey{{"GET", "pods"}}, "1", "0"},
			{apiKey{"PATCH", "pods/status"}, []apiKey{{"PATCH", "pods/status"}}, "0", "1"},
			{apiKey{"PUT", "pods/status"}, []apiKey{{"PUT", "pods/status"}}, "1", "0"},
			{apiKey{"PATCH", "pods"}, []apiKey{{"PATCH", "pods"}}, "0", "0"},
			{apiKey{"PUT", "pods"}, []apiKey{{"PUT", "pods"}}, "0", "0"},
			{apiKey{"POST", "events"}, []apiKey{{"POST", "events"}}, "3", "off the critical path"},
			{apiKey{"PATCH/PUT", "events"}, []apiKey{{"PATCH", "events"}, {"PUT", "events"}}, "", ""},
			{apiKey{"LIST/WATCH", "pods"}, []apiKey{{"LIST", "pods"}, {"WATCH", "pods"}}, "", "0 (informer)"},
			{apiKey{"GET", "network-attachment-definitions"}, nil, "", "0 (informer)"},
			{apiKey{"any other", "(anything)"}, nil, "", ""},
		}
		for _, l := range lines {
			allCell := "—"
			if l.all != nil {
				var v float64
				for _, a := range l.all {
					v += r.apiAddAll[a] - scale*r.apiIdleAll[a]
				}
				allCell = fmt.Sprintf("%.2f", v/k)
			}
			cells := []string{l.key.String(), fmt.Sprintf("%.2f", r.apiAddIdentity["multinetd"][l.key]/k)}
			kv := "—"
			if v, ok := r.apiAddIdentity["kubelet"][l.key]; ok {
				kv = fmt.Sprintf("%.2f", v/k)
			}
			cells = append(cells, kubeletCol(kv)...)
			row(append(cells, allCell, l.ref, l.want)...)
		}
		total := func(m map[apiKey]float64) (t float64) {
			for _, v := range m {
				t += v
			}
			return t
		}
		dscale := 1.0
		if r.apiIdleWindow > 0 {
			dscale = float64(r.apiDelWindow) / float64(r.apiIdleWindow)
		}
		var delAll float64
		for key, v := range r.apiDelAll {
			delAll += v - dscale*r.apiIdleAll[key]
		}
		perDel := func(m map[apiKey]float64) string {
			out := fmt.Sprintf("%.2f", total(m)/k)
			var parts []string
			for _, kind := range countedKinds {
				if v := m[kind.key]; v != 0 {
					parts = append(parts, fmt.Sprintf("%s: %.0f", kind.key, v))
				}
			}
			if len(parts) > 0 {
				out += " (in all " + strings.Join(parts, ", ") + ")"
			}
			return out
		}
		cells := []string{"per DEL: all kinds", perDel(r.apiDelIdentity["multinetd"])}
		cells = append(cells, kubeletCol(perDel(r.apiDelIdentity["kubelet"]))...)
		row(append(cells, fmt.Sprintf("%.2f (pods, events)", delAll/k), "", "0")...)
		cells = []string{fmt.Sprintf("idle window (%.1f s, no ADD): all kinds, total", r.apiIdleWindow.Seconds()),
			fmt.Sprintf("%.0f", total(r.apiIdleIdentity["multinetd"]))}
		cells = append(cells, kubeletCol(fmt.Sprintf("%.0f", total(r.apiIdleIdentity["kubelet"])))...)
		row(append(cells, "", "", "")...)
		if r.patchStatusMean > 0 {
			cells = []string{"API server time of a PATCH pods/status (mean, ms)", ""}
			cells = append(cells, kubeletCol("")...)
			row(append(cells, ms(r.patchStatusMean), "", "")...)
		}
	}

	for _, t := range []string{cpuTable("ADD", r.cpuAdd), cpuTable("DEL", r.cpuDel)} {
		if t != "" {
			b.WriteString("\n" + t)
		}
	}

	b.WriteString(`
Rows:
- shim binary size: the installed $CNI_BIN_DIR/multinet-shim vs the reference bridge plugin.
- VERSION exec: fork+exec+wait of the binary with CNI_COMMAND=VERSION from Go (os/exec), interleaved with bridge.
- ADD / DEL: one pod sandbox (fresh netns, fresh container ID, a real Pod in the API) as the runtime drives it: libcni
  executes multinet-shim from the runtime's 00-multinet.conflist (single plugin config with name/cniVersion injected,
  CNI_ARGS IgnoreUnknown, K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_INFRA_CONTAINER_ID, K8S_POD_UID; DEL with the
  cached prevResult). "direct" runs the same three delegate config lists (default network eth0, the two bridge
  NADs' configs net1, net2) one after the other with libcni from the bench process. Overhead = multinet − direct, p50.
- ADD / DEL split: each multinet operation decomposed with multinetd's own histograms (its /metrics read before
  and after each operation, outside the timed part): outside multinetd = end to end − handler time (shim exec,
  socket, the runtime's libcni, scheduling); multinetd's own work = handler − delegates (pod lookup, plan, the
  attachment records, the network-status PATCH); delegates = the three delegate lists as multinetd ran them,
  to compare with the direct path; queued = multinetd's wait for a slot (its own histogram).
- stub daemon: the multinet path's conflist with socketPath pointing at internal/node/cniserver serving a handler that answers
  at once, in the bench process: libcni + multinet-shim's exec + the socket, the floor of "outside multinetd's
  handler"; the row below is how much the real one costs above it (multinetd reading and answering the request,
  the scheduling of its container). "socket alone": api.Dial from the bench process, no exec.
` + outsideLegend + `
- N concurrent ADDs: N fresh sandboxes of N different pods, ADD started at once; wall time to the last answer.
  The row below: multinetd's mean wait for one of its maxInFlight slots, mean handler time and delegates' share,
  the API server's mean time of a PATCH pods/status over the bursts, and the rate of multinetd's API requests
  (its user's FlowSchema counts) from the start of its bursts to their last answer.
- API requests per ADD: bench FlowSchemas matching only one user (same priority level as without them) count its
  requests by kind (apiserver_flowcontrol_dispatched_requests_total) over the ADD window, divided by the ADDs;
  Events are asynchronous, so the window ends a settle time after the last ADD. The kubelet column is the kubelet's
  reaction to the bench's (admission-rejected) pods being updated. The all-clients column is apiserver_request_total
  over the same window minus an idle window of equal length (noisy: it includes everyone using the cluster).
- Multus thick (with MULTUS_BIN_DIR): multus-daemon as a host process (its daemon config: clusterNetwork = a
  directory holding only the same default network conflist, not the conflist's path: given a .conflist path,
  Multus v4.3.0 (as v4.2.3) keeps a lossy copy of it for DEL, LoadDelegateNetConfFromConfList in pkg/types/conf.go, and its
  DEL of the default network fails; the cluster's CNI bin dir, a ServiceAccount with the RBAC it needs), driven like
  multinet through libcni executing multus-shim; the three paths take turns in every iteration and burst. Unlike
  multinetd (a pod), it runs in the host's cgroup (full CPU weight).
- default-network addresses after DEL: after every DEL (and burst of DELs) the bench looks for host-local allocation
  files of the default network owned by the path's containers; any left fails the run (they are removed, so that a
  leaking path does not exhaust the subnet for the others).
- N concurrent ADDs under a memory limit (-limit-concurrency, -memory-limit): for that burst size, multinetd's
  container cgroup gets the limit (v1 memory.limit_in_bytes / v2 memory.max, written directly, the old value written
  back after the bursts), its peak is reset (v1 memory.max_usage_in_bytes, v2 memory.peak) and read after them with the
  OOM kills (v1 memory.oom_control, v2 memory.events oom_kill); a failed ADD, an OOM kill or multinetd gone fails the run.
- CPU time per ADD / DEL (-cpu-adds): for each path, in 3 rounds (the paths rotated), the counted ADDs one after
  the other on fresh sandboxes, then their DELs; the CPU time (user + system) of each process group is read before
  and after each window (the windows end a fifth of -settle after the last operation, for asynchronous work):
  getrusage(2) of the bench itself and of its waited-for children (the plugins libcni ran), /proc/<pid>/stat of
  multinetd (utime + stime), its live children (the delegate launcher; the delegates it ran in its cutime + cstime),
  multus-daemon, kube-apiserver and etcd, and the other cluster components (10 ms ticks, summed over the windows).
  The background rate of the last two, from the windows of the paths that make no API request (direct, stub), is
  taken out of their rows. Sandboxes are made before and removed after the windows.
- RSS: VmRSS of the multinetd process (/proc/<pid>/status; RssAnon and RssFile in MiB), before any bench pod,
  with the pods attached (no DEL yet), and after their DEL.
` + policyLegend)
	return b.String()
}

// failures lists what makes the run fail although it completed: a path's
// DEL leaving default-network addresses allocated, a memory-limited burst
// with a failed ADD, an OOM kill or multinetd gone.
func (r *results) failures() []string {
	var out []string
	for _, name := range []string{"multinet", "direct", "multus"} {
		if n := r.leaked[name]; n > 0 {
			out = append(out, fmt.Sprintf("%s: DEL left %d default-network addresses allocated", name, n))
		}
	}
	if r.policy.late > 0 {
		out = append(out, fmt.Sprintf("policy: %d label changes without their rules in place within %v", r.policy.late, policyWithin))
	}
	for _, l := range r.limits {
		if !l.ok() {
			out = append(out, fmt.Sprintf("%d concurrent ADDs under a %.0f MiB limit: %s", l.n, float64(l.limit)/(1<<20), l.String()))
		}
	}
	return out
}

func (m memory) String() string {
	return fmt.Sprintf("%s (anon %.1f, file %.1f)", mib(m.rss), float64(m.anon)/(1<<20), float64(m.file)/(1<<20))
}

func overhead(m, d dist) string {
	if len(m) == 0 || len(d) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f", float64(m.median()-d.median())/float64(time.Millisecond))
}
