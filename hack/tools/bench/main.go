// Command multinet-bench measures multinet on the running local cluster
// (make cluster-up) and prints a markdown table:
//
//   - multinet-shim exec time for CNI VERSION vs the reference bridge plugin,
//     and the shim's binary size;
//   - ADD and DEL latency (p50/p90/p99, or the maximum where the sample is
//     too small for a percentile) of a pod on the default network plus
//     two bridge networks, driven as the container runtime drives it (libcni
//     executing multinet-shim from the runtime's conflist, with a fresh
//     netns, CNI_ARGS and a real Pod object in the API), against the same
//     three delegates run directly with libcni; the overhead at p50;
//   - wall time of 10 and 50 concurrent ADDs, multinet vs direct;
//   - API server requests per ADD by verb and resource, from the API
//     server's own metrics, counted per identity (the daemon's user) with
//     bench FlowSchemas, and cross-checked with apiserver_request_total;
//   - multinetd's RSS idle, with 100 pods attached, and after their DEL.
//
// With -report-dir it also writes a dated report (the environment, the
// command, a headline table, every table) with its pictures (latency CDFs,
// burst timelines; hack/tools/benchplot), and with -page rewrites a page's
// latest-run block from it (publish.go).
//
// Everything it creates (netns, pods, NADs, namespace, FlowSchemas, bridges,
// host-local allocations, libcni cache) is removed at the end, also on
// SIGINT/SIGTERM. Run it through hack/bench.sh (make bench), as root.
// docs/bench.md describes the method.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// options are the command's flags.
type options struct {
	iterations      int
	versionRuns     int
	warmup          int
	concurrency     []int
	concReps        int
	rssPods         int
	apiAdds         int
	hotPlugOps      int
	cpuAdds         int
	settle          time.Duration
	pause           time.Duration
	outDir          string
	out             string
	metricsAddr     string
	daemonUser      string
	priority        string
	kubeletUser     string
	kubeletPriority string
	subnets         []string
	bridges         []string
	netnsPrefix     string
	netnsPublishDir string
	namespace       string
	runtimeConf     string
	daemonPIDFile   string
	multusBinDir    string
	limitConc       int
	memLimitMiB     int
	policy          policyOptions
	// reportDir, page, commit, command: the dated report (writeReport).
	reportDir string
	page      string
	commit    string
	command   string
}

func parseFlags() (*options, error) {
	o := &options{}
	node := os.Getenv("NODE_NAME")
	var conc, subnets, bridges string
	flag.IntVar(&o.iterations, "n", 100, "ADD/DEL iterations per path (multinet and direct)")
	flag.IntVar(&o.versionRuns, "version-runs", 200, "exec runs of CNI VERSION per binary")
	flag.IntVar(&o.warmup, "warmup", 5, "uncounted ADD/DEL iterations per path before measuring")
	flag.StringVar(&conc, "concurrency", "10,50", "comma-separated numbers of concurrent ADDs")
	flag.IntVar(&o.concReps, "concurrency-reps", 3, "repetitions of each concurrent burst (the median is reported)")
	flag.IntVar(&o.rssPods, "rss-pods", 100, "pods attached at once for the RSS measure")
	flag.IntVar(&o.apiAdds, "api-adds", 20, "ADDs (each on a fresh pod) in the API request counting window")
	flag.IntVar(&o.cpuAdds, "cpu-adds", 30, "ADDs (then DELs) per path, one after the other in 3 rounds, whose CPU time is counted per process group (0 to skip)")
	flag.IntVar(&o.hotPlugOps, "hotplug-ops", 50, "hot-plug operations (a network added to, then removed from, a running pod) to time (0 to skip)")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "wait after the counted ADDs/DELs for asynchronous requests (Events) before reading the API server's counters")
	flag.DurationVar(&o.pause, "pause", 100*time.Millisecond, "untimed pause before each ADD and DEL of the latency iterations, so that the asynchronous work of the previous operation (Events, the kubelet's reaction to the pod update) does not overlap the next measurement")
	flag.StringVar(&o.outDir, "work-dir", "_output/bench", "bench work dir (IPAM data, libcni cache, results)")
	flag.StringVar(&o.out, "out", "", "also write the markdown report to this file (default <work-dir>/results.md)")
	flag.StringVar(&o.metricsAddr, "metrics-address", "127.0.0.1:9390", "multinetd's metrics address")
	flag.StringVar(&o.daemonUser, "daemon-user", "system:multinetd:"+node, "the API user multinetd authenticates as")
	flag.StringVar(&o.priority, "priority-level", "global-default", "APF priority level for the bench FlowSchemas (the one the daemon's requests get without them)")
	flag.StringVar(&o.kubeletUser, "kubelet-user", "system:node:"+node, "the kubelet's API user, also counted (\"\" to skip)")
	flag.StringVar(&o.kubeletPriority, "kubelet-priority-level", "system", "APF priority level the kubelet's pod and event requests get (FlowSchema system-nodes)")
	flag.StringVar(&subnets, "subnets", "172.31.248.0/22,172.31.252.0/22", "host-local subnets of the two bench bridge networks (/22: the policy phase's 300 pods and the other phases' sandboxes)")
	flag.StringVar(&bridges, "bridges", "mnbench-a,mnbench-b", "Linux bridges of the two bench networks")
	flag.StringVar(&o.netnsPrefix, "netns-prefix", "mnbench-", "prefix of the bench's netns names")
	flag.StringVar(&o.netnsPublishDir, "netns-publish-dir", "", "also bind-mount each netns here and hand CNI that path (the runtime's netns dir, for a deployed multinetd)")
	flag.StringVar(&o.namespace, "namespace", "", "bench namespace (default multinet-bench-<random>)")
	flag.StringVar(&o.runtimeConf, "runtime-conf", "", "the runtime's CNI config list, whose only plugin is multinet-shim (default $CNI_CONF_DIR/00-multinet.conflist)")
	flag.StringVar(&o.daemonPIDFile, "daemon-pid-file", "", "multinetd's PID file, for its RSS (default $PID_DIR/multinetd.pid)")
	flag.StringVar(&o.multusBinDir, "multus-bin-dir", os.Getenv("MULTUS_BIN_DIR"), "a directory with multus-daemon and multus-shim (Multus thick, hack/multus-build.sh): also measure Multus side by side (default $MULTUS_BIN_DIR; empty: skipped)")
	flag.IntVar(&o.limitConc, "limit-concurrency", 150, "the burst size (one of -concurrency) whose bursts run with multinetd's memory cgroup limited to -memory-limit (0: none)")
	flag.IntVar(&o.memLimitMiB, "memory-limit", 64, "multinetd's memory limit (MiB) for the -limit-concurrency bursts")
	flag.StringVar(&o.reportDir, "report-dir", "", "also write the dated report <date>-<commit>.md and its pictures (SVG) into this directory (hack/bench.sh: docs/bench; empty: none)")
	flag.StringVar(&o.page, "page", "", "a markdown page whose latest-run block (between "+latestBegin+" and "+latestEnd+") is rewritten with the report's headline and pictures (hack/bench.sh: docs/bench.md; empty: none)")
	flag.StringVar(&o.commit, "commit", "", "the source commit measured, for the report (hack/bench.sh: git rev-parse)")
	flag.StringVar(&o.command, "command", "", "the command that ran the bench, for the report (default: this process's arguments)")
	policyFlags(&o.policy)
	flag.Parse()
	if err := o.policy.check(); err != nil {
		return nil, err
	}
	if o.command == "" {
		o.command = strings.Join(os.Args, " ")
	}
	if o.page != "" && o.reportDir == "" {
		return nil, errors.New("-page needs -report-dir")
	}
	for _, s := range strings.Split(conc, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-concurrency: %q is not a positive number", s)
		}
		o.concurrency = append(o.concurrency, n)
	}
	o.subnets = strings.Split(subnets, ",")
	o.bridges = strings.Split(bridges, ",")
	if len(o.subnets) != 2 || len(o.bridges) != 2 {
		return nil, errors.New("-subnets and -bridges: want two each")
	}
	if o.limitConc < 0 || o.memLimitMiB < 0 {
		return nil, errors.New("-limit-concurrency, -memory-limit: want ≥ 0")
	}
	if o.iterations < 1 || o.versionRuns < 1 || o.rssPods < 0 || o.apiAdds < 0 || o.concReps < 1 || o.hotPlugOps < 0 || o.cpuAdds < 0 {
		return nil, errors.New("-n, -version-runs, -concurrency-reps: want ≥ 1; -rss-pods, -api-adds, -hotplug-ops, -cpu-adds: want ≥ 0")
	}
	if o.namespace == "" {
		o.namespace = "multinet-bench-" + newContainerID()[len(containerIDPrefix):len(containerIDPrefix)+5]
	}
	if o.runtimeConf == "" {
		o.runtimeConf = filepath.Join(os.Getenv("CNI_CONF_DIR"), "00-multinet.conflist")
	}
	if o.daemonPIDFile == "" {
		o.daemonPIDFile = filepath.Join(os.Getenv("PID_DIR"), "multinetd.pid")
	}
	if o.out == "" {
		o.out = filepath.Join(o.outDir, "results.md")
	}
	return o, nil
}

// env is what the bench reads from the cluster's env file.
type env struct {
	kubeconfig, node, cniBin, cniConf, ipamDir, defaultConf, pidDir, image, clusterDir string
}

func loadEnv() (*env, error) {
	e := &env{
		kubeconfig:  os.Getenv("KUBECONFIG"),
		node:        os.Getenv("NODE_NAME"),
		cniBin:      os.Getenv("CNI_BIN_DIR"),
		cniConf:     os.Getenv("CNI_CONF_DIR"),
		ipamDir:     os.Getenv("CNI_IPAM_DIR"),
		defaultConf: os.Getenv("DEFAULT_NETWORK_CONF"),
		pidDir:      os.Getenv("PID_DIR"),
		image:       os.Getenv("TEST_IMAGE"),
		clusterDir:  os.Getenv("MULTINET_CLUSTER_DIR"),
	}
	var missing []string
	for k, v := range map[string]string{"KUBECONFIG": e.kubeconfig, "NODE_NAME": e.node, "CNI_BIN_DIR": e.cniBin,
		"CNI_CONF_DIR": e.cniConf, "DEFAULT_NETWORK_CONF": e.defaultConf, "PID_DIR": e.pidDir, "TEST_IMAGE": e.image} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("environment: %s not set (source _output/cluster/env; hack/bench.sh does)", strings.Join(missing, ", "))
	}
	return e, nil
}

func main() {
	o, err := parseFlags()
	if err != nil {
		logf("%v", err)
		os.Exit(2)
	}
	e, err := loadEnv()
	if err != nil {
		logf("%v", err)
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		logf("must run as root (network namespaces, bridges)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := newBench(o, e)
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	res, runErr := b.run(ctx)
	cleanupErr := b.cleanup()
	if runErr != nil {
		logf("FAILED: %v", runErr)
	}
	if cleanupErr != nil {
		logf("cleanup: %v", cleanupErr)
	}
	if res != nil && runErr == nil {
		report := res.markdown()
		fmt.Print(report)
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			logf("write %s: %v", o.out, err)
		} else {
			logf("report written to %s", o.out)
		}
	}
	if res != nil && runErr == nil {
		for _, f := range res.failures() {
			logf("FAILED: %s", f)
			runErr = errors.New(f)
		}
	}
	// A failed run's figures are in -out, not published as the latest.
	if res != nil && runErr == nil {
		if err := publish(res); err != nil {
			logf("%v", err)
			runErr = err
		}
	}
	if runErr != nil || cleanupErr != nil {
		os.Exit(1)
	}
}
