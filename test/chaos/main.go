//go:build chaos

// Command chaos is the chaos suite (`make chaos`, `make
// chaos-short`): on the real local cluster (make cluster-up), rounds of
// scaling a Deployment whose pods select three networks 0→N→0, while
// multinetd is SIGKILLed at random moments, the kubelet is restarted, the API
// server is paused (SIGSTOP) for a few seconds, one attachment record of a
// running pod is overwritten with garbage, and pods selecting a hanging
// delegate keep failing their ADDs next to the churn. After the last round,
// with everything scaled to 0 and settled, it counts what is left by kind and
// exits 1 on any leak (2 when it could not run). hack/chaos.sh builds and runs
// it; docs/chaos.md describes it.
//
// The cluster is found like the e2e suite finds it (test/e2e/framework_test.go):
// the env file of cluster-up ($MULTINET_CLUSTER_ENV or -env).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/clusterenv"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/status"
)

// options are the command's flags.
type options struct {
	env                 string
	pods, rounds        int
	killsMin, killsMax  int
	hangPods            int
	devicePods          int
	pause               time.Duration
	upTimeout           time.Duration
	converge            time.Duration
	breakDelegate       bool
	downTimeout         time.Duration
	settleTimeout       time.Duration
	statusGrace         time.Duration
	seed                uint64
	keep                bool
	multinetdNamespace  string
	multinetdAppLabel   string
	execParallel        int
	noKubeletRestart    bool
	noAPIServerPause    bool
	noRecordCorruption  bool
	noMultinetdKills    bool
	noHangingDelegate   bool
	printedCommandLine  string
	multinetdWaitBudget time.Duration
}

func parseFlags() *options {
	o := &options{}
	var kills string
	flag.StringVar(&o.env, "env", os.Getenv("MULTINET_CLUSTER_ENV"), "cluster-up's env file (default $MULTINET_CLUSTER_ENV, else _output/cluster/env)")
	flag.IntVar(&o.pods, "pods", 60, "N: replicas of the three-network Deployment at the top of each round")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of 0→N→0")
	flag.StringVar(&kills, "kills", "3-5", "multinetd SIGKILLs per round: a number or a range MIN-MAX (random per round)")
	flag.IntVar(&o.hangPods, "hang-pods", 3, "pods selecting the hanging delegate (present during every round)")
	flag.IntVar(&o.devicePods, "device-pods", 2, "replicas of a second Deployment selecting the netdev device network, scaled with the first (0: none; needs hack/cluster-devices.sh's pool)")
	flag.DurationVar(&o.pause, "apiserver-pause", 5*time.Second, "how long the API server is stopped (SIGSTOP … SIGCONT), once a round")
	flag.DurationVar(&o.upTimeout, "up-timeout", 6*time.Minute, "scale-up: when the faults planned for progress not reached by then fire anyway")
	flag.DurationVar(&o.converge, "converge", 5*time.Minute, "the verdict's bound: a round fails unless every pod wanted is Running with complete network-status within this after the end of the scale-up's last fault")
	flag.BoolVar(&o.breakDelegate, "break-delegate", false, "demonstration: net-c's delegate is a plugin whose ADD always fails (exit 1); the run must FAIL")
	flag.DurationVar(&o.downTimeout, "down-timeout", 4*time.Minute, "bound of one scale-down (all pods gone)")
	flag.DurationVar(&o.settleTimeout, "settle-timeout", 5*time.Minute, "after the last round: how long to wait for everything to be released (multinetd reaps a record of a sandbox the runtime removed once it is reapMinAge, 3 min, old)")
	flag.DurationVar(&o.statusGrace, "status-grace", 60*time.Second, "after a scale-up: how long a Running pod's network-status may take to land (it is retried in the background when a PATCH fails)")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock; printed)")
	flag.BoolVar(&o.keep, "keep", false, "keep the namespace, networks and hang plugin at the end (for inspection)")
	flag.IntVar(&o.execParallel, "exec-parallel", 4, "kubectl execs at once when checking interfaces")
	flag.BoolVar(&o.noKubeletRestart, "no-kubelet-restart", false, "leave the kubelet alone")
	flag.BoolVar(&o.noAPIServerPause, "no-apiserver-pause", false, "leave the API server alone")
	flag.BoolVar(&o.noRecordCorruption, "no-record-corruption", false, "corrupt no record")
	flag.BoolVar(&o.noMultinetdKills, "no-multinetd-kills", false, "kill multinetd never (same as -kills 0)")
	flag.BoolVar(&o.noHangingDelegate, "no-hanging-delegate", false, "no hanging delegate pods (same as -hang-pods 0)")
	flag.DurationVar(&o.multinetdWaitBudget, "multinetd-wait", 6*time.Minute, "how long a kill waits for a running multinetd (CrashLoopBackOff after earlier kills)")
	o.multinetdNamespace, o.multinetdAppLabel = "multinet-system", "multinetd"
	flag.Parse()
	lo, hi, ok := strings.Cut(kills, "-")
	var err1, err2 error
	o.killsMin, err1 = strconv.Atoi(lo)
	o.killsMax = o.killsMin
	if ok {
		o.killsMax, err2 = strconv.Atoi(hi)
	}
	if err1 != nil || err2 != nil || o.killsMin < 0 || o.killsMax < o.killsMin {
		fatalf("-kills %q: want N or MIN-MAX", kills)
	}
	if o.noMultinetdKills {
		o.killsMin, o.killsMax = 0, 0
	}
	if o.noHangingDelegate {
		o.hangPods = 0
	}
	if o.pods < 1 || o.rounds < 1 {
		fatalf("-pods and -rounds must be positive")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return o
}

// ---- logging ---------------------------------------------------------------

var start = time.Now()

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s [chaos +%4.0fs] %s\n", time.Now().UTC().Format("15:04:05"), time.Since(start).Seconds(), fmt.Sprintf(format, a...))
}

func fatalf(format string, a ...any) {
	logf("ERROR: "+format, a...)
	resumeAPIServer()
	os.Exit(2)
}

// ---- the cluster -----------------------------------------------------------

type cluster struct {
	env   map[string]string
	kube  kubernetes.Interface
	multi *versioned.Clientset
}

func connect(path string) (*cluster, error) {
	if path == "" {
		path = filepath.Join("_output", "cluster", "env")
	}
	env, err := clusterenv.Read(path)
	if err != nil {
		return nil, fmt.Errorf("env file (make cluster-up writes it): %w", err)
	}
	for _, k := range []string{"KUBECONFIG", "KUBECTL", "MULTINET_CLUSTER_DIR", "CNI_BIN_DIR", "CNI_CONF_DIR", "CNI_IPAM_DIR",
		"PID_DIR", "CONTAINERD_SOCKET", "CTR", "NODE_NAME", "TEST_IMAGE", "CONTAINERD_NETNS_DIR", "CNI_MODE"} {
		if env[k] == "" {
			return nil, fmt.Errorf("%s: %s is not set (an env file of an older cluster-up?)", path, k)
		}
	}
	if env["CNI_MODE"] != "multinet" {
		return nil, fmt.Errorf("the cluster's CNI is not multinet (CNI_MODE=%s)", env["CNI_MODE"])
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return nil, err
	}
	// Short: the API server is paused on purpose; every call is retried.
	cfg.Timeout = 15 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	multi, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil || strings.TrimSpace(string(body)) != "ok" {
		return nil, fmt.Errorf("API server not ready: %v %s", err, body)
	}
	return &cluster{env: env, kube: kube, multi: multi}, nil
}

// recordsDir is multinetd's attachment records directory (stateDir of
// deploy/overlays/local/multinetd.yaml).
func (c *cluster) recordsDir() string {
	return filepath.Join(c.env["MULTINET_CLUSTER_DIR"], "multinet", "state", "records")
}

func (c *cluster) devinfoCNIDir() string {
	root := c.env["DEVINFO_ROOT"]
	if root == "" {
		root = "/var/run/k8s.cni.cncf.io/devinfo"
	}
	return filepath.Join(root, "cni")
}

func (c *cluster) taskDir() string {
	return filepath.Join(filepath.Dir(c.env["CONTAINERD_SOCKET"]), "state", "io.containerd.runtime.v2.task", "k8s.io")
}

func (c *cluster) kubectl(ctx context.Context, d time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.env["KUBECTL"], append([]string{"--kubeconfig", c.env["KUBECONFIG"]}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

func (c *cluster) ctr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// stdout only: ctr logs warnings (cgroup v1 deprecation) to stderr.
	cmd := exec.CommandContext(ctx, c.env["CTR"], append([]string{"--address", c.env["CONTAINERD_SOCKET"], "--namespace", "k8s.io"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// retry calls f until it succeeds or d passes (the API server may be paused
// or restarting), returning the last error.
func retry(d time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// ---- the workload ----------------------------------------------------------

// bridgeNet is one of the Deployment's three networks: bridge + host-local.
type bridgeNet struct {
	Name, Version, Bridge, Subnet, DataDir string
}

const (
	appLabel     = "multinet-chaos"
	depName      = "chaos"
	devDepName   = "chaos-dev"
	hangPodLabel = "chaos-hang"
	hangNAD      = "hang"
	netdevNAD    = "netdev"
)

// hangPlugin is the hanging delegate: its ADD never returns (multinetd's
// delegateTimeout ends it); DEL, CHECK, GC and STATUS succeed, so the pods
// selecting it can still be deleted.
const hangPlugin = `#!/bin/sh
# multinet chaos suite: a delegate whose ADD hangs.
case "$CNI_COMMAND" in
ADD) exec sleep 2147483647 ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]}' ;;
esac
exit 0
`

// failPlugin is the delegate of -break-delegate (the demonstration that a
// broken multinet fails the suite): ADD always fails with exit 1; DEL,
// CHECK, GC and STATUS succeed, so that the pods can still be deleted.
const failPlugin = `#!/bin/sh
# multinet chaos suite (-break-delegate): a delegate whose ADD always fails.
case "$CNI_COMMAND" in
ADD) echo '{"cniVersion":"0.4.0","code":999,"msg":"multinet chaos -break-delegate: this ADD always fails"}'; exit 1 ;;
VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]}' ;;
esac
exit 0
`

// brokenNet is the network -break-delegate breaks.
const brokenNet = "net-c"

type suite struct {
	o   *options
	c   *cluster
	rnd *mrand.Rand

	ns         string
	nets       []*bridgeNet
	hangType   string
	hangPath   string
	failType   string // -break-delegate's plugin
	failPath   string
	netdev     bool   // device pods run
	netdevRes  string // resource name
	netdevDevs []string

	base     *inventory // before the first round
	results  []roundResult
	lastKill int
	killsAll int

	faultMu   sync.Mutex
	lastFault time.Time // when the last fault ended
}

func (s *suite) setup() error {
	s.ns = "multinet-chaos-" + randHex(3)
	logf("namespace %s", s.ns)
	if err := retry(time.Minute, func(ctx context.Context) error {
		_, err := s.c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			// Labelled trusted, as an admin would (the shipped NAD trust
			// policy): its NADs name node bridges and host-local dataDirs.
			Name: s.ns, Labels: map[string]string{"multinet.io/chaos": "true", podnetworks.NADTrustLabel: podnetworks.NADTrustUnrestricted}}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	tag := randHex(3)
	for i, v := range []string{"1.0.0", "1.1.0", "0.4.0"} {
		n := &bridgeNet{
			Name:    "net-" + string(rune('a'+i)),
			Version: v,
			// mne*: cluster-down removes such links if this run cannot.
			Bridge:  fmt.Sprintf("mnec%s%c", tag, 'a'+i),
			Subnet:  fmt.Sprintf("10.213.%d.0/24", i+1),
			DataDir: filepath.Join(s.c.env["CNI_IPAM_DIR"], "chaos", s.ns+"-net-"+string(rune('a'+i))),
		}
		plugin := map[string]any{
			"type": "bridge", "bridge": n.Bridge,
			"ipam": map[string]any{"type": "host-local", "dataDir": n.DataDir,
				"ranges": [][]map[string]string{{{"subnet": n.Subnet}}}},
		}
		if s.o.breakDelegate && n.Name == brokenNet {
			if err := s.writeFailPlugin(tag); err != nil {
				return err
			}
			plugin, n.Bridge = map[string]any{"type": s.failType}, ""
		}
		conf := map[string]any{"cniVersion": v, "name": n.Name, "plugins": []any{plugin}}
		if err := s.createNAD(n.Name, conf, nil); err != nil {
			return err
		}
		s.nets = append(s.nets, n)
	}
	if s.o.hangPods > 0 {
		s.hangType = "mne-chaos-hang-" + tag
		s.hangPath = filepath.Join(s.c.env["CNI_BIN_DIR"], s.hangType)
		if err := os.WriteFile(s.hangPath, []byte(hangPlugin), 0o755); err != nil {
			return err
		}
		if err := s.createNAD(hangNAD, map[string]any{"cniVersion": "1.0.0", "name": hangNAD, "type": s.hangType}, nil); err != nil {
			return err
		}
	}
	if s.o.devicePods > 0 {
		if err := s.setupDevices(); err != nil {
			return err
		}
	}
	if err := s.createDeployment(depName, "net-a,net-b,net-c"); err != nil {
		return err
	}
	if s.netdev {
		if err := s.createDeployment(devDepName, netdevNAD); err != nil {
			return err
		}
	}
	for i := 0; i < s.o.hangPods; i++ {
		p := s.podTemplate(map[string]string{"app": hangPodLabel}, "net-a,"+hangNAD)
		pod := &corev1.Pod{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
		pod.Name = fmt.Sprintf("hang-%d", i)
		if err := retry(time.Minute, func(ctx context.Context) error {
			_, err := s.c.kube.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			return fmt.Errorf("create hang pod: %w", err)
		}
	}
	return nil
}

// writeFailPlugin installs the broken delegate of -break-delegate.
func (s *suite) writeFailPlugin(tag string) error {
	s.failType = "mne-chaos-fail-" + tag
	s.failPath = filepath.Join(s.c.env["CNI_BIN_DIR"], s.failType)
	if err := os.WriteFile(s.failPath, []byte(failPlugin), 0o755); err != nil {
		return fmt.Errorf("-break-delegate: install the failing plugin: %w", err)
	}
	logf("-break-delegate: %s's delegate is %s, whose ADD always fails: this run must FAIL", brokenNet, s.failPath)
	return nil
}

// setupDevices creates the netdev NAD on the pool of hack/cluster-devices.sh;
// without the pool the run cannot do what it says and fails.
func (s *suite) setupDevices() error {
	denv, err := clusterenv.Read(filepath.Join(s.c.env["MULTINET_CLUSTER_DIR"], "multinet", "devices.env"))
	s.netdevRes, s.netdevDevs, err = devicePool(s.o.devicePods, denv, err)
	if err != nil {
		return err
	}
	s.netdev = true
	dataDir := filepath.Join(s.c.env["CNI_IPAM_DIR"], "chaos", s.ns+"-"+netdevNAD)
	s.nets = append(s.nets, &bridgeNet{Name: netdevNAD, DataDir: dataDir})
	return s.createNAD(netdevNAD, map[string]any{
		"cniVersion": "1.1.0", "name": netdevNAD, "type": "multinet-netdev",
		"capabilities": map[string]bool{"deviceID": true, "CNIDeviceInfoFile": true},
		"ipam": map[string]any{"type": "host-local", "dataDir": dataDir,
			"ranges": [][]map[string]string{{{"subnet": "10.213.9.0/24"}}}},
	}, map[string]string{"k8s.v1.cni.cncf.io/resourceName": s.netdevRes})
}

func (s *suite) createNAD(name string, conf any, annotations map[string]string) error {
	b, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	return retry(time.Minute, func(ctx context.Context) error {
		_, err := s.c.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(s.ns).Create(ctx, &nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Annotations: annotations},
			Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: string(b)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

func (s *suite) podTemplate(labels map[string]string, networks string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{nadv1.NetworksAnnotation: networks}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "c", Image: s.c.env["TEST_IMAGE"], ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"},
			}},
		},
	}
}

func (s *suite) createDeployment(name, networks string) error {
	labels := map[string]string{"app": appLabel, "deployment": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: s.podTemplate(labels, networks),
		},
	}
	return retry(time.Minute, func(ctx context.Context) error {
		_, err := s.c.kube.AppsV1().Deployments(s.ns).Create(ctx, d, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

func (s *suite) scale(name string, n int) error {
	return retry(2*time.Minute, func(ctx context.Context) error {
		sc, err := s.c.kube.AppsV1().Deployments(s.ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = int32(n)
		_, err = s.c.kube.AppsV1().Deployments(s.ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
		return err
	})
}

func (s *suite) listPods(selector string) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := s.c.kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func running(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
}

// ---- the chaos --------------------------------------------------------------

// event is one disturbance of a round, fired when its phase ("up" or
// "down") has made progress at (fraction of the pods Running, or gone).
type event struct {
	kind  string // kill, kubelet, pause, corrupt
	phase string
	at    float64
	fired bool
}

func (s *suite) plan(round int) []*event {
	var evs []*event
	up := func() float64 { return 0.1 + 0.8*s.rnd.Float64() }
	phase := func() string {
		if s.rnd.IntN(2) == 0 {
			return "up"
		}
		return "down"
	}
	kills := s.o.killsMin + s.rnd.IntN(s.o.killsMax-s.o.killsMin+1)
	for i := 0; i < kills; i++ {
		evs = append(evs, &event{kind: "kill", phase: phase(), at: up()})
	}
	if !s.o.noKubeletRestart {
		evs = append(evs, &event{kind: "kubelet", phase: phase(), at: up()})
	}
	if !s.o.noAPIServerPause {
		evs = append(evs, &event{kind: "pause", phase: phase(), at: up()})
	}
	if !s.o.noRecordCorruption {
		// A record of a running pod: while pods come up.
		evs = append(evs, &event{kind: "corrupt", phase: "up", at: 0.3 + 0.6*s.rnd.Float64()})
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	return evs
}

// executor runs the fired events one after the other and records each as
// a fault, done or not.
type executor struct {
	s       *suite
	ch      chan *event
	wg      sync.WaitGroup
	mu      sync.Mutex
	pending int
	faults  []fault
}

func (s *suite) newExecutor() *executor {
	x := &executor{s: s, ch: make(chan *event, 32)}
	go func() {
		for ev := range x.ch {
			f := s.fire(ev)
			x.mu.Lock()
			x.faults = append(x.faults, f)
			x.pending--
			x.mu.Unlock()
			x.wg.Done()
		}
	}()
	return x
}

func (x *executor) fire(ev *event) {
	if ev.fired {
		return
	}
	ev.fired = true
	x.mu.Lock()
	x.pending++
	x.mu.Unlock()
	x.wg.Add(1)
	x.ch <- ev
}

// idle: every fault fired so far is over.
func (x *executor) idle() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pending == 0
}

// done waits for the fired faults and returns them all.
func (x *executor) done() []fault {
	x.wg.Wait()
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]fault(nil), x.faults...)
}

// trigger fires the events of phase whose progress point is reached.
func (x *executor) trigger(evs []*event, phase string, progress float64) {
	for _, ev := range evs {
		if ev.phase == phase && ev.at <= progress {
			x.fire(ev)
		}
	}
}

// allFired: every event of phase has been fired.
func allFired(evs []*event, phase string) bool {
	for _, ev := range evs {
		if ev.phase == phase && !ev.fired {
			return false
		}
	}
	return true
}

// fire injects one fault and notes when the last one ended.
func (s *suite) fire(ev *event) fault {
	t0 := time.Since(start)
	var msg string
	var err error
	switch ev.kind {
	case "kill":
		msg, err = s.killMultinetd()
	case "kubelet":
		msg, err = s.restartKubelet()
	case "pause":
		msg, err = s.pauseAPIServer()
	case "corrupt":
		msg, err = s.corruptRecord()
	default:
		err = fmt.Errorf("NOT DONE: unknown fault %q", ev.kind)
	}
	f := fault{kind: ev.kind, phase: ev.phase, at: ev.at, done: err == nil, msg: msg}
	if err != nil {
		f.msg = err.Error()
	}
	f.msg = fmt.Sprintf("+%.0fs %s", t0.Seconds(), f.msg)
	logf("%s", f)
	s.faultMu.Lock()
	s.lastFault = time.Now()
	s.faultMu.Unlock()
	return f
}

// boundFrom is when the bound (-converge) of a scale-up that began at t0
// starts: at the end of the last fault, or at t0 when that is later.
func (s *suite) boundFrom(t0 time.Time) time.Time {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.lastFault.After(t0) {
		return s.lastFault
	}
	return t0
}

// multinetdPID returns the host PID of the running multinetd container's
// main process (deployed_pid of hack/lib/cluster.sh), other than the last
// one killed.
func (s *suite) multinetdPID() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := s.c.kube.CoreV1().Pods(s.o.multinetdNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + s.o.multinetdAppLabel})
	if err != nil {
		return 0, err
	}
	for _, p := range l.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != "multinetd" || cs.State.Running == nil {
				continue
			}
			id := strings.TrimPrefix(cs.ContainerID, "containerd://")
			b, err := os.ReadFile(filepath.Join(s.c.taskDir(), id, "init.pid"))
			if err != nil {
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid == s.lastKill || !alive(pid) {
				continue
			}
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) != "multinetd" {
				continue
			}
			return pid, nil
		}
	}
	return 0, errors.New("no running multinetd container")
}

// gone waits up to d for the process to exit (or be a zombie).
func gone(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); alive(pid); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

func (s *suite) killMultinetd() (string, error) {
	t0 := time.Now()
	for {
		pid, err := s.multinetdPID()
		if err == nil {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return "", fmt.Errorf("NOT KILLED: kill multinetd pid %d: %w", pid, err)
			}
			if !gone(pid, 10*time.Second) {
				return "", fmt.Errorf("NOT KILLED: multinetd pid %d still alive 10s after SIGKILL", pid)
			}
			s.lastKill = pid
			s.killsAll++
			return fmt.Sprintf("multinetd pid %d SIGKILLed (waited %.0fs for a running one)", pid, time.Since(t0).Seconds()), nil
		}
		if time.Since(t0) > s.o.multinetdWaitBudget {
			return "", fmt.Errorf("NOT KILLED: no running multinetd within %v: %w", s.o.multinetdWaitBudget, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// restartKubelet: SIGTERM, then the same command line again with the same
// log file and PID file (hack/cluster-devices.sh restart-kubelet, which is
// cluster-up's start_component); waits until the node is Ready.
func (s *suite) restartKubelet() (string, error) {
	t0 := time.Now()
	root := os.Getenv("MULTINET_ROOT") // hack/chaos.sh runs it from the repository's root
	if root == "" {
		root = "."
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	before, err := s.componentPID("kubelet")
	if err != nil {
		return "", fmt.Errorf("NOT RESTARTED: %w", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "cluster-devices.sh"), "restart-kubelet")
	cmd.Env = append(os.Environ(), "MULTINET_CLUSTER_ENV="+s.o.env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("NOT RESTARTED: hack/cluster-devices.sh restart-kubelet failed after %.0fs: %w: %s", time.Since(t0).Seconds(), err, strings.TrimSpace(string(out)))
	}
	after, err := s.componentPID("kubelet")
	if err := pidReplaced("kubelet", before, after, err); err != nil {
		return "", fmt.Errorf("NOT RESTARTED: %w", err)
	}
	return fmt.Sprintf("kubelet pid %d restarted as pid %d, node Ready again after %.1fs", before, after, time.Since(t0).Seconds()), nil
}

var (
	apiServerMu      sync.Mutex
	apiServerStopped int // the PID stopped, 0 when none
)

// resumeAPIServer sends SIGCONT to the API server if this program stopped
// it (also on the way out after a failure or a signal).
func resumeAPIServer() {
	apiServerMu.Lock()
	defer apiServerMu.Unlock()
	if apiServerStopped != 0 {
		_ = syscall.Kill(apiServerStopped, syscall.SIGCONT)
		apiServerStopped = 0
	}
}

func (s *suite) componentPID(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(s.c.env["PID_DIR"], name+".pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, err
	}
	if want, err := os.ReadFile(filepath.Join(s.c.env["PID_DIR"], name+".exe")); err == nil {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if strings.TrimSuffix(exe, " (deleted)") != strings.TrimSpace(string(want)) {
			return 0, fmt.Errorf("%s: pid %d runs %q, not %s", name, pid, exe, want)
		}
	}
	if !alive(pid) {
		return 0, fmt.Errorf("%s (pid %d) is not running", name, pid)
	}
	return pid, nil
}

func (s *suite) pauseAPIServer() (string, error) {
	pid, err := s.componentPID("kube-apiserver")
	if err != nil {
		return "", fmt.Errorf("NOT PAUSED: %w", err)
	}
	apiServerMu.Lock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		apiServerMu.Unlock()
		return "", fmt.Errorf("NOT PAUSED: SIGSTOP kube-apiserver pid %d: %w", pid, err)
	}
	apiServerStopped = pid
	apiServerMu.Unlock()
	time.Sleep(s.o.pause)
	resumeAPIServer()
	return fmt.Sprintf("kube-apiserver pid %d stopped for %v, then SIGCONT", pid, s.o.pause), nil
}

// corruptRecord overwrites the attachment record of a running pod of the
// three-network Deployment with garbage.
func (s *suite) corruptRecord() (string, error) {
	pods, err := s.listPods("deployment=" + depName)
	if err != nil {
		return "", fmt.Errorf("NOT CORRUPTED: list pods: %w", err)
	}
	runningPods := map[string]bool{}
	for i := range pods {
		if running(&pods[i]) {
			runningPods[pods[i].Name] = true
		}
	}
	recs, err := readRecords(s.c.recordsDir())
	if err != nil {
		return "", fmt.Errorf("NOT CORRUPTED: %w", err)
	}
	var names []string
	for f, r := range recs {
		if r != nil && r.PodNamespace == s.ns && runningPods[r.PodName] {
			names = append(names, f)
		}
	}
	if len(names) == 0 {
		return "", errors.New("NOT CORRUPTED: no record of a running pod")
	}
	sort.Strings(names)
	f := names[s.rnd.IntN(len(names))]
	garbage := append([]byte(`{"version":2,"containerID":`), []byte(randHex(24))...)
	if err := os.WriteFile(filepath.Join(s.c.recordsDir(), f), garbage, 0o600); err != nil {
		return "", fmt.Errorf("NOT CORRUPTED: %w", err)
	}
	return fmt.Sprintf("record %s of pod %s overwritten with %d bytes of garbage", f, recs[f].PodName, len(garbage)), nil
}

// ---- one round ---------------------------------------------------------------

func (s *suite) round(i int) roundResult {
	r := roundResult{round: i, wanted: s.o.pods}
	if s.netdev {
		r.wanted += s.o.devicePods
	}
	evs := s.plan(i)
	r.planned = len(evs)
	var planned []string
	for _, ev := range evs {
		planned = append(planned, fmt.Sprintf("%s@%s:%.0f%%", ev.kind, ev.phase, ev.at*100))
	}
	logf("round %d: 0→%d→0; chaos: %s", i, s.o.pods, strings.Join(planned, " "))
	x := s.newExecutor()

	t0 := time.Now()
	s.scaleAll(s.o.pods, s.o.devicePods)
	s.waitUp(&r, x, evs, t0)
	r.upTime = time.Since(t0)
	logf("round %d: scale-up: %d/%d Running, %d with complete network-status, in %.0fs; checking interfaces", i, r.running, r.wanted, r.complete, r.upTime.Seconds())
	for _, m := range r.notComplete {
		logf("  network-status not complete: %s", m)
	}
	r.checked, r.incomplete = s.checkPods()
	logf("round %d: %d Running pods checked, %d incomplete", i, r.checked, len(r.incomplete))
	for _, m := range r.incomplete {
		logf("  incomplete: %s", m)
	}

	t1 := time.Now()
	s.scaleAll(0, 0)
	s.waitDown(i, x, evs, max(r.running, 1))
	x.trigger(evs, "down", 1.1)
	r.faults = x.done()
	close(x.ch)
	r.downTime = time.Since(t1)
	logf("round %d: scale-down in %.0fs; %d of %d faults done", i, r.downTime.Seconds(), r.faultsDone(), r.planned)
	return r
}

// scaleAll scales the Deployment to pods and the device Deployment (when
// it runs) to devicePods.
func (s *suite) scaleAll(pods, devicePods int) {
	if err := s.scale(depName, pods); err != nil {
		fatalf("scale %s to %d: %v", depName, pods, err)
	}
	if s.netdev {
		if err := s.scale(devDepName, devicePods); err != nil {
			fatalf("scale %s to %d: %v", devDepName, devicePods, err)
		}
	}
}

// waitUp fires the scale-up's faults as pods come up (those not reached by
// -up-timeout fire then) and returns once every pod wanted is Running with
// complete network-status and every fault is over, or once the bound
// (-converge) after the end of the last fault has passed. It leaves the
// last counts in r.
func (s *suite) waitUp(r *roundResult, x *executor, evs []*event, t0 time.Time) {
	lastLog := time.Now()
	for {
		quiet := x.idle() && allFired(evs, "up")
		pods, err := s.listPods("app=" + appLabel)
		if err == nil {
			c := countPods(pods)
			r.running, r.complete, r.notComplete, r.notRunning = c.running, c.complete, c.notComplete, c.notRunning
			x.trigger(evs, "up", float64(c.running)/float64(r.wanted))
			if quiet && c.running >= r.wanted && c.complete >= r.wanted {
				return
			}
		}
		if time.Since(t0) > s.o.upTimeout {
			x.trigger(evs, "up", 1.1)
		}
		if quiet && time.Since(s.boundFrom(t0)) > s.o.converge {
			logf("round %d: NOT converged %v after the last fault: %d/%d Running, %d with complete network-status", r.round, s.o.converge, r.running, r.wanted, r.complete)
			return
		}
		if time.Since(lastLog) > 20*time.Second {
			logf("round %d: %d/%d Running, %d with complete network-status", r.round, r.running, r.wanted, r.complete)
			lastLog = time.Now()
		}
		time.Sleep(time.Second)
	}
}

// waitDown fires the scale-down's faults as pods go and returns once every
// pod is gone or -down-timeout has passed.
func (s *suite) waitDown(i int, x *executor, evs []*event, from int) {
	t0, lastLog := time.Now(), time.Now()
	for {
		pods, err := s.listPods("app=" + appLabel)
		if err == nil {
			x.trigger(evs, "down", 1-float64(len(pods))/float64(from))
			if len(pods) == 0 {
				return
			}
			if time.Since(lastLog) > 20*time.Second {
				logf("round %d: %d pods left", i, len(pods))
				lastLog = time.Now()
			}
		}
		if time.Since(t0) > s.o.downTimeout {
			logf("round %d: scale-down NOT complete after %v", i, s.o.downTimeout)
			return
		}
		time.Sleep(time.Second)
	}
}

// checkPods checks every Running pod of the Deployments: network-status
// lists the default network and each selected network (interfaces eth0,
// net1, ...), and the pod has exactly those interfaces with the listed MACs
// and IPs. A pod's network-status may land late (it is retried in the
// background when a PATCH fails): each pod gets until statusGrace.
func (s *suite) checkPods() (int, []string) {
	deadline := time.Now().Add(s.o.statusGrace)
	pods, err := s.listPods("app=" + appLabel)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		pods, err = s.listPods("app=" + appLabel)
	}
	if err != nil {
		return 0, []string{"cannot list pods: " + err.Error()}
	}
	var todo []string
	for i := range pods {
		if running(&pods[i]) {
			todo = append(todo, pods[i].Name)
		}
	}
	var mu sync.Mutex
	var bad []string
	sem := make(chan struct{}, max(1, s.o.execParallel))
	var wg sync.WaitGroup
	checked := 0
	for _, name := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var why string
			gone := false
			for {
				why, gone = s.checkPod(name)
				if why == "" || gone || time.Now().After(deadline) {
					break
				}
				time.Sleep(2 * time.Second)
			}
			mu.Lock()
			defer mu.Unlock()
			if gone {
				return
			}
			checked++
			if why != "" {
				bad = append(bad, name+": "+why)
			}
		}()
	}
	wg.Wait()
	sort.Strings(bad)
	return checked, bad
}

// checkPod returns why the pod's network-status or interfaces are
// incomplete ("" when complete), or gone when it is not running any more.
func (s *suite) checkPod(name string) (why string, gone bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	p, err := s.c.kube.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		return "", true
	}
	if err != nil {
		return "get: " + err.Error(), false
	}
	if !running(p) {
		return "", true
	}
	nets, err := requestedNetworks(p)
	if err != nil {
		return err.Error(), false
	}
	list, why := statusProblem(p.Annotations[status.Annotation], nets)
	if why != "" {
		return why, false
	}
	wantIf := make([]string, 0, len(list))
	for _, st := range list {
		wantIf = append(wantIf, st.Interface)
	}
	out, err := s.c.kubectl(context.Background(), 30*time.Second, "-n", s.ns, "exec", name, "--", "sh", "-c", "ip -o link; echo ---; ip -o addr")
	if err != nil {
		return fmt.Sprintf("exec: %v: %s", err, strings.TrimSpace(out)), false
	}
	links, addrs, _ := strings.Cut(out, "---")
	ifs := map[string]*struct {
		mac string
		ips []string
	}{}
	for _, l := range strings.Split(links, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		if n == "lo" {
			continue
		}
		e := &struct {
			mac string
			ips []string
		}{}
		for k := range f {
			if f[k] == "link/ether" && k+1 < len(f) {
				e.mac = f[k+1]
			}
		}
		ifs[n] = e
	}
	for _, l := range strings.Split(addrs, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || (f[2] != "inet" && f[2] != "inet6") || strings.HasPrefix(f[3], "fe80:") {
			continue
		}
		if e, ok := ifs[f[1]]; ok {
			e.ips = append(e.ips, strings.SplitN(f[3], "/", 2)[0])
		}
	}
	var have []string
	for n := range ifs {
		have = append(have, n)
	}
	sort.Strings(have)
	wantSorted := append([]string(nil), wantIf...)
	sort.Strings(wantSorted)
	if strings.Join(have, ",") != strings.Join(wantSorted, ",") {
		return fmt.Sprintf("interfaces in the pod %v, network-status lists %v", have, wantIf), false
	}
	for _, st := range list {
		e := ifs[st.Interface]
		if !strings.EqualFold(e.mac, st.Mac) {
			return fmt.Sprintf("%s: mac %s in the pod, %s in network-status", st.Interface, e.mac, st.Mac), false
		}
		a, b := append([]string(nil), e.ips...), append([]string(nil), st.IPs...)
		sort.Strings(a)
		sort.Strings(b)
		for k := range b {
			b[k] = strings.SplitN(b[k], "/", 2)[0]
		}
		if strings.Join(a, ",") != strings.Join(b, ",") {
			return fmt.Sprintf("%s: ips %v in the pod, %v in network-status", st.Interface, e.ips, st.IPs), false
		}
	}
	return "", false
}

// ---- what is left ------------------------------------------------------------

// inventory is what the node holds that a pod's networking makes: each kind
// a set of identities, so that the state before the run can be subtracted.
type inventory struct {
	leases      map[string]bool // "dir/ip → containerID"
	veths       map[string]bool // "bridge: port"
	records     map[string]bool // file (podNamespace/podName or why it is counted)
	devinfo     map[string]bool
	netns       map[string]bool
	devices     map[string]bool
	stuck       map[string]bool
	hangProcs   int
	liveSandbox int
}

func newInventory() *inventory {
	return &inventory{leases: map[string]bool{}, veths: map[string]bool{}, records: map[string]bool{},
		devinfo: map[string]bool{}, netns: map[string]bool{}, devices: map[string]bool{}, stuck: map[string]bool{}}
}

// runningTasks returns the IDs of containerd's running tasks (sandboxes and
// containers) and the network namespaces the running sandboxes use.
func (s *suite) runningTasks() (map[string]bool, map[string]bool, error) {
	out, err := s.c.ctr("tasks", "ls")
	if err != nil {
		return nil, nil, fmt.Errorf("ctr tasks ls: %v: %s", err, out)
	}
	tasks := map[string]bool{}
	for _, l := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) >= 3 && f[2] == "RUNNING" {
			tasks[f[0]] = true
		}
	}
	netns := map[string]bool{}
	out, err = s.c.ctr("containers", "ls", "-q", `labels."io.cri-containerd.kind"==sandbox`)
	if err != nil {
		return nil, nil, fmt.Errorf("ctr containers ls: %v: %s", err, out)
	}
	for _, id := range strings.Fields(out) {
		if !tasks[id] {
			continue
		}
		info, err := s.c.ctr("containers", "info", id)
		if err != nil {
			continue
		}
		var ci struct {
			Spec struct {
				Linux struct {
					Namespaces []struct{ Type, Path string } `json:"namespaces"`
				} `json:"linux"`
			} `json:"Spec"`
		}
		if json.Unmarshal([]byte(info), &ci) == nil {
			for _, n := range ci.Spec.Linux.Namespaces {
				if n.Type == "network" && n.Path != "" {
					netns[filepath.Base(n.Path)] = true
				}
			}
		}
	}
	return tasks, netns, nil
}

func readRecords(dir string) (map[string]*state.Record, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*state.Record{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r state.Record
		if json.Unmarshal(b, &r) != nil {
			out[e.Name()] = nil // undecodable
			continue
		}
		out[e.Name()] = &r
	}
	return out, nil
}

// leaseDirs are host-local's directories: each network's of this run, and
// the default network's (from the conflist in CNI_CONF_DIR).
func (s *suite) leaseDirs() []string {
	var dirs []string
	for _, n := range s.nets {
		dirs = append(dirs, filepath.Join(n.DataDir, n.Name))
	}
	files, _ := filepath.Glob(filepath.Join(s.c.env["CNI_CONF_DIR"], "*.conflist"))
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "00-multinet") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var l struct {
			Name    string `json:"name"`
			Plugins []struct {
				IPAM struct {
					Type    string `json:"type"`
					DataDir string `json:"dataDir"`
				} `json:"ipam"`
			} `json:"plugins"`
		}
		if json.Unmarshal(b, &l) != nil {
			continue
		}
		for _, p := range l.Plugins {
			if p.IPAM.Type == "host-local" {
				d := p.IPAM.DataDir
				if d == "" {
					d = "/var/lib/cni/networks"
				}
				dirs = append(dirs, filepath.Join(d, l.Name))
			}
		}
	}
	return dirs
}

func bridgePorts(bridge string) []string {
	out, err := exec.Command("ip", "-o", "link", "show", "master", bridge).CombinedOutput()
	if err != nil {
		return nil
	}
	var ports []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			ports = append(ports, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	return ports
}

// take counts what is left now. A lease, record or network namespace that a
// running sandbox holds is not left; everything of this run's namespace is.
func (s *suite) take() (*inventory, error) {
	inv := newInventory()
	tasks, sandboxNetns, err := s.runningTasks()
	if err != nil {
		return nil, err
	}
	inv.liveSandbox = len(sandboxNetns)
	// host-local leases.
	for _, d := range s.leaseDirs() {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() || e.Name() == "lock" || strings.HasPrefix(e.Name(), "last_reserved_ip") {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(d, e.Name()))
			owner := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
			if tasks[owner] {
				continue
			}
			inv.leases[fmt.Sprintf("%s/%s → %.12s", filepath.Base(d), e.Name(), owner)] = true
		}
	}
	// veths on the bridges: this run's bridges and the default network's.
	var bridges []string
	if b := s.c.env["DEFAULT_NETWORK_BRIDGE"]; b != "" {
		bridges = append(bridges, b)
	}
	for _, n := range s.nets {
		if n.Bridge != "" {
			bridges = append(bridges, n.Bridge)
		}
	}
	for _, b := range bridges {
		for _, p := range bridgePorts(b) {
			inv.veths[b+": "+p] = true
		}
	}
	// multinetd's records.
	recs, err := readRecords(s.c.recordsDir())
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	for f, r := range recs {
		switch {
		case r == nil:
			inv.records[f+" (undecodable)"] = true
		case s.ns != "" && r.PodNamespace == s.ns:
			inv.records[fmt.Sprintf("%s (%s)", f, r.PodName)] = true
		case !tasks[r.ContainerID]:
			inv.records[fmt.Sprintf("%s (%s/%s, no running sandbox)", f, r.PodNamespace, r.PodName)] = true
		}
	}
	// device-info files multinetd wrote (cni/).
	entries, _ := os.ReadDir(s.c.devinfoCNIDir())
	for _, e := range entries {
		inv.devinfo[e.Name()] = true
	}
	// network namespaces no running sandbox uses.
	entries, _ = os.ReadDir(s.c.env["CONTAINERD_NETNS_DIR"])
	for _, e := range entries {
		if !sandboxNetns[e.Name()] {
			inv.netns[e.Name()] = true
		}
	}
	// device allocations: devices PodResources still gives pods of this run,
	// and pool devices not back on the node.
	if err := s.podResourceDevices(inv); err != nil {
		inv.devices["podresources: "+err.Error()] = true
	}
	for _, d := range s.netdevDevs {
		if _, err := net.InterfaceByName(d); err != nil {
			inv.devices[d+" not in the node's namespace"] = true
		}
	}
	// pods of this run still there.
	if s.ns == "" {
		return inv, nil // before the run: no namespace yet
	} else if pods, err := s.listPods(""); err == nil {
		for i := range pods {
			inv.stuck[pods[i].Name+" "+podState(&pods[i])] = true
		}
	} else {
		inv.stuck["list pods: "+err.Error()] = true
	}
	if s.hangType != "" {
		inv.hangProcs = countProcs(s.hangType)
	}
	return inv, nil
}

func (s *suite) podResourceDevices(inv *inventory) error {
	sock := s.c.env["PODRESOURCES_SOCKET"]
	if sock == "" {
		return nil
	}
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(cc).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return err
	}
	for _, p := range resp.GetPodResources() {
		if p.GetNamespace() != s.ns {
			continue
		}
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				for _, id := range d.GetDeviceIds() {
					inv.devices[fmt.Sprintf("%s %s/%s", p.GetName(), d.GetResourceName(), id)] = true
				}
			}
		}
	}
	return nil
}

// countProcs counts the processes whose command line names the plugin (the
// hanging delegate's sleeps outlive their ADD only when nothing ends them).
func countProcs(word string) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		if d.Name() == self || d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(word)) {
			if pid, _ := strconv.Atoi(d.Name()); alive(pid) {
				n++
			}
		}
	}
	return n
}

// minus removes what was there before the run.
func minus(now, before map[string]bool) []string {
	var out []string
	for k := range now {
		if !before[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

type kinds struct {
	leases, veths, records, devinfo, netns, devices, stuck []string
}

func (s *suite) left(inv *inventory) kinds {
	return kinds{
		leases:  minus(inv.leases, s.base.leases),
		veths:   minus(inv.veths, s.base.veths),
		records: minus(inv.records, s.base.records),
		devinfo: minus(inv.devinfo, s.base.devinfo),
		netns:   minus(inv.netns, s.base.netns),
		devices: minus(inv.devices, s.base.devices),
		stuck:   minus(inv.stuck, s.base.stuck),
	}
}

func (k kinds) total() int {
	return len(k.leases) + len(k.veths) + len(k.records) + len(k.devinfo) + len(k.netns) + len(k.devices) + len(k.stuck)
}

// ---- main ----------------------------------------------------------------------

func main() {
	o := parseFlags()
	o.printedCommandLine = strings.Join(os.Args, " ")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		sg := <-sig
		resumeAPIServer()
		logf("interrupted (%v)", sg)
		os.Exit(130)
	}()
	defer resumeAPIServer()

	c, err := connect(o.env)
	if err != nil {
		fatalf("the local cluster is not usable: %v (make cluster-up)", err)
	}
	if o.env == "" {
		o.env, _ = filepath.Abs(filepath.Join("_output", "cluster", "env"))
	}
	s := &suite{o: o, c: c, rnd: mrand.New(mrand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))}
	logf("seed %d; %d rounds of 0→%d→0 (%d device pods), %d-%d multinetd kills a round, %d hang pods", o.seed, o.rounds, o.pods, o.devicePods, o.killsMin, o.killsMax, o.hangPods)

	// What the node holds before: not this run's.
	s.netdevDevs = nil
	if s.base, err = s.take(); err != nil {
		fatalf("inventory before the run: %v", err)
	}
	if err := s.setup(); err != nil {
		s.cleanup()
		fatalf("setup: %v", err)
	}
	// The device pool's devices present before the run are the baseline's.
	for _, d := range s.netdevDevs {
		if _, err := net.InterfaceByName(d); err != nil {
			s.base.devices[d+" not in the node's namespace"] = true
		}
	}

	for i := 1; i <= o.rounds; i++ {
		s.results = append(s.results, s.round(i))
	}

	// Everything to 0, hang pods deleted, then settle.
	logf("last round done: deleting the hang pods and settling (up to %v)", o.settleTimeout)
	t0 := time.Now()
	_ = s.scale(depName, 0)
	if s.netdev {
		_ = s.scale(devDepName, 0)
	}
	_ = retry(time.Minute, func(ctx context.Context) error {
		return s.c.kube.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=" + hangPodLabel})
	})
	var inv *inventory
	var k kinds
	for {
		inv, err = s.take()
		if err == nil {
			k = s.left(inv)
			if k.total() == 0 {
				break
			}
		}
		if time.Since(t0) > o.settleTimeout {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if inv == nil {
		fatalf("inventory after the run: %v", err)
	}
	settle := time.Since(t0)
	code := s.report(k, inv, settle)
	if !o.keep {
		s.cleanup()
	} else {
		logf("-keep: namespace %s, bridges, data dirs and %s left in place", s.ns, s.hangPath)
	}
	os.Exit(code)
}

func (s *suite) report(k kinds, inv *inventory, settle time.Duration) int {
	var b strings.Builder
	s.reportHeader(&b)
	fmt.Fprintf(&b, "\n%s\n", roundHeader)
	for _, r := range s.results {
		fmt.Fprintln(&b, roundRow(r))
	}
	fmt.Fprintf(&b, "\nfaults:\n")
	for _, r := range s.results {
		for _, f := range r.faults {
			fmt.Fprintf(&b, "  round %d %s\n", r.round, f)
		}
	}
	s.reportLeft(&b, k, inv, settle)
	reasons := verdict(s.results, s.o.converge, k.total())
	if len(reasons) == 0 {
		fmt.Fprintf(&b, "\nRESULT: PASS (every pod wanted Running with complete network-status within %v after the last fault, every fault done, nothing left)\n", s.o.converge)
		fmt.Print(b.String())
		return 0
	}
	fmt.Fprintf(&b, "\nRESULT: FAIL\n")
	for _, why := range reasons {
		fmt.Fprintf(&b, "  FAIL: %s\n", why)
	}
	fmt.Print(b.String())
	return 1
}

func (s *suite) reportHeader(b *strings.Builder) {
	o := s.o
	fmt.Fprintf(b, "\n== multinet chaos suite: %s\n", o.printedCommandLine)
	fmt.Fprintf(b, "   %s, seed %d, node %s, %.0fs in all\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), o.seed, s.c.env["NODE_NAME"], time.Since(start).Seconds())
	fmt.Fprintf(b, "   %d rounds of 0→%d→0 (+%d netdev pods), pods on net-a (bridge, CNI 1.0.0), net-b (1.1.0), net-c (0.4.0); %d hang pods (net-a + a delegate whose ADD hangs)\n",
		o.rounds, o.pods, map[bool]int{true: o.devicePods}[s.netdev], o.hangPods)
	if o.breakDelegate {
		fmt.Fprintf(b, "   -break-delegate: %s's delegate is %s, whose ADD always fails\n", brokenNet, s.failType)
	}
	fmt.Fprintf(b, "   verdict: a round fails unless every pod wanted is Running with complete network-status within %v (-converge) after its scale-up's last fault, and every fault planned happened\n", o.converge)
}

func (s *suite) reportLeft(b *strings.Builder, k kinds, inv *inventory, settle time.Duration) {
	incomplete, checked := 0, 0
	for _, r := range s.results {
		incomplete += len(r.incomplete)
		checked += r.checked
	}
	fmt.Fprintf(b, "\nleft after the last round, scaled to 0 and settled (%.0fs):\n\n| kind | count |\n|---|---|\n", settle.Seconds())
	rows := []struct {
		kind string
		list []string
	}{
		{"host-local leases left", k.leases},
		{"veths left on the bridges", k.veths},
		{"multinetd records left", k.records},
		{"device-info files left", k.devinfo},
		{"network namespaces left", k.netns},
		{"device allocations left", k.devices},
		{"pods stuck in ContainerCreating or Terminating", k.stuck},
	}
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %d |\n", r.kind, len(r.list))
	}
	fmt.Fprintf(b, "| scale-ups: Running pods with incomplete interfaces | %d (of %d checked) |\n", incomplete, checked)
	fmt.Fprintf(b, "\n(info, not counted: hang delegate processes still running: %d)\n", inv.hangProcs)
	for _, r := range rows {
		listSome(b, r.kind, r.list)
	}
	for _, r := range s.results {
		listSome(b, fmt.Sprintf("not Running (round %d)", r.round), r.notRunning)
		listSome(b, fmt.Sprintf("network-status not complete (round %d)", r.round), r.notComplete)
		for _, m := range r.incomplete {
			fmt.Fprintf(b, "  incomplete (round %d): %s\n", r.round, m)
		}
	}
}

// listSome prints the first 10 of list, each with what.
func listSome(b *strings.Builder, what string, list []string) {
	for i, x := range list {
		if i == 10 {
			fmt.Fprintf(b, "  %s: ... %d more\n", what, len(list)-10)
			return
		}
		fmt.Fprintf(b, "  %s: %s\n", what, x)
	}
}

// cleanup removes what the run made: the namespace (its NADs and
// Deployments), the bridges, the data dirs and the hang plugin. Leaks have
// been counted by then.
func (s *suite) cleanup() {
	_ = retry(time.Minute, func(ctx context.Context) error {
		err := s.c.kube.CoreV1().Namespaces().Delete(ctx, s.ns, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	// Wait for the namespace to go before removing what its pods might use.
	_ = retry(2*time.Minute, func(ctx context.Context) error {
		_, err := s.c.kube.CoreV1().Namespaces().Get(ctx, s.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.New("namespace still there")
	})
	for _, n := range s.nets {
		if n.Bridge != "" {
			_ = exec.Command("ip", "link", "del", n.Bridge).Run()
		}
		_ = os.RemoveAll(n.DataDir)
	}
	for _, p := range []string{s.hangPath, s.failPath} {
		if p != "" {
			_ = os.Remove(p)
		}
	}
}
