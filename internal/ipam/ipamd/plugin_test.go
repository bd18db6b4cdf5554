package ipamd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	claimv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/internal/ipam"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	claimlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1alpha1"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

var plugin struct {
	once sync.Once
	dir  string
	err  error
}

// pluginDir builds cmd/multinet-ipam once per test binary.
func pluginDir(t *testing.T) string { return pluginDirB(t) }

func pluginDirB(t testing.TB) string {
	t.Helper()
	plugin.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		plugin.dir, plugin.err = os.MkdirTemp("", "multinet-ipam-plugin-")
		if plugin.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(plugin.dir, "multinet-ipam"), "./cmd/multinet-ipam")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			plugin.err = fmt.Errorf("go build ./cmd/multinet-ipam: %v\n%s", err, out)
		}
	})
	if plugin.err != nil {
		t.Fatal(plugin.err)
	}
	return plugin.dir
}

// multinetdIdentity is the config of multinetd's ServiceAccount with the
// ClusterRole of deploy/base/multinetd-rbac.yaml applied to the server:
// the service runs with exactly the privileges the install gives it.
func multinetdIdentity(t *testing.T, srv *apiservertest.Server) *rest.Config {
	t.Helper()
	return srv.ServiceAccountConfig(t, "deploy/base/multinetd-rbac.yaml", "multinet-system", "multinetd")
}

// livePods is Pods by GET (multinetd passes its node-local pod cache).
type livePods struct{ kubernetes.Interface }

func (p livePods) Get(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error) {
	return p.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// node is one node's multinetd IPAM service, run as multinetd's
// ServiceAccount.
type node struct {
	name   string
	socket string
	svc    *Service
}

func startNode(t *testing.T, srv *apiservertest.Server, name string) *node {
	t.Helper()
	return startNodeTenancy(t, srv, name, nil)
}

// startNodeTenancy is startNode with multinetd's pool rules and limits.
func startNodeTenancy(t *testing.T, srv *apiservertest.Server, name string, tenancy *ipam.Tenancy) *node {
	t.Helper()
	cfg := multinetdIdentity(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pods := livePods{kubernetes.NewForConfigOrDie(cfg)}
	socket := filepath.Join(t.TempDir(), "run", "ipam.sock")
	svc, err := Start(ctx, Options{Config: cfg, Node: name, SocketPath: socket, Pods: pods, ReconcileInterval: -1, GCMinAge: time.Nanosecond, Tenancy: tenancy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = svc.Shutdown(sctx)
	})
	if !svc.allocator.Cache.WaitForSync(ctx, 30*time.Second) {
		t.Fatal("IPAllocation cache did not sync")
	}
	return &node{name: name, socket: socket, svc: svc}
}

// socketExec runs plugins as multinetd's delegates run them: with the
// node's IPAM socket in api.IPAMSocketEnv (multinetd's environment).
type socketExec struct {
	*invoke.DefaultExec
	socket string
}

func (e socketExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	return e.DefaultExec.ExecPlugin(ctx, pluginPath, stdinData, append(environ, api.IPAMSocketEnv+"="+e.socket))
}

// newSocketExec is socketExec for socket.
func newSocketExec(socket string) socketExec {
	return socketExec{DefaultExec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}, socket: socket}
}

// cni is libcni for the node's plugins in dir, caching in cacheDir.
func (n *node) cni(dir, cacheDir string) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{dir}, cacheDir, newSocketExec(n.socket))
}

// network is a conflist whose one plugin is multinet-ipam, declaring the
// ips and ipamClaimReference capabilities, as libcni runs it.
func (n *node) network(t *testing.T, cniVersion, netName, ipamKeys string) *libcni.NetworkConfigList {
	t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[{"type":"multinet-ipam",
		"capabilities":{"ips":true,"ipamClaimReference":true},
		"ipam":{"type":"multinet-ipam",%s}}]}`, cniVersion, netName, ipamKeys)
	l, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func rt(containerID, ifName string, pod *corev1.Pod, caps map[string]any) *libcni.RuntimeConf {
	r := &libcni.RuntimeConf{ContainerID: containerID, NetNS: "/var/run/netns/" + containerID, IfName: ifName, CapabilityArgs: caps}
	if pod != nil {
		r.Args = [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", pod.Namespace}, {"K8S_POD_NAME", pod.Name}, {"K8S_POD_UID", string(pod.UID)}}
	}
	return r
}

func ips(t *testing.T, res types.Result) []string {
	t.Helper()
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ip := range r.IPs {
		out = append(out, ip.Address.String()+" gw "+ip.Gateway.String())
	}
	return out
}

func createPod(t *testing.T, kc kubernetes.Interface, ns, name, nodeName string) *corev1.Pod {
	t.Helper()
	p, err := kc.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func poolObjects(t *testing.T, cs versioned.Interface, pool string) []string {
	t.Helper()
	list, err := cs.IPAMV1alpha1().IPAllocations().List(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(ipam.FieldPool, pool).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range list.Items {
		out = append(out, o.Spec.Address+"@"+o.Spec.Owner.Node)
	}
	slices.Sort(out)
	return out
}

// The plugin binary, run by libcni with the CNI environment, allocates
// through a multinetd-side service running as multinetd's ServiceAccount
// (deploy/ RBAC) against a real API server: ADD (dual-stack, the result in
// the configuration's cniVersion), CHECK, runtimeConfig ips, an IPAMClaim
// reused by a pod on another node, GC with valid attachments, DEL; a pod
// of another node is refused; STATUS and ADD fail as the CNI spec says when
// multinetd is gone.
func TestPluginEndToEnd(t *testing.T) {
	srv := apiservertest.Shared(t)
	admin := srv.Config()
	kc := kubernetes.NewForConfigOrDie(admin)
	cs := versioned.NewForConfigOrDie(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := apiservertest.Name(t, "plugin-e2e")
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, b := startNode(t, srv, "node-a"), startNode(t, srv, "node-b")
	cacheDir := t.TempDir()
	cni, cniB := a.cni(pluginDir(t), cacheDir), b.cni(pluginDir(t), cacheDir)
	const keys = `"ranges":[[{"subnet":"10.60.0.0/24","gateway":"10.60.0.254"}],[{"subnet":"fd60::/64"}]],"routes":[{"dst":"0.0.0.0/0"}]`
	netA := a.network(t, "1.1.0", "e2e-net", keys)
	netB := b.network(t, "1.1.0", "e2e-net", keys)

	pod1 := createPod(t, kc, ns, "pod1", "node-a")
	res, err := cni.AddNetworkList(ctx, netA, rt("c1", "net1", pod1, nil))
	if err != nil {
		t.Fatal(err)
	}
	got := ips(t, res)
	c1IPs := got
	if len(got) != 2 || !strings.HasSuffix(got[0], "/24 gw 10.60.0.254") || !strings.HasSuffix(got[1], "/64 gw fd60::1") {
		t.Errorf("ADD result %v", got)
	}
	if r, _ := current.NewResultFromResult(res); len(r.Routes) != 1 || r.Routes[0].Dst.String() != "0.0.0.0/0" {
		t.Errorf("routes %v", r.Routes)
	}
	if err := cni.CheckNetworkList(ctx, netA, rt("c1", "net1", pod1, nil)); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if objs := poolObjects(t, cs, "e2e-net"); len(objs) != 2 || !strings.HasSuffix(objs[0], "@node-a") {
		t.Errorf("IPAllocations %v", objs)
	}

	// runtimeConfig ips (capability ips), in an older cniVersion.
	old := a.network(t, "0.4.0", "e2e-net", keys)
	pod2 := createPod(t, kc, ns, "pod2", "node-a")
	res, err = cni.AddNetworkList(ctx, old, rt("c2", "net1", pod2, map[string]any{"ips": []string{"10.60.0.77/24", "fd60::77/64"}}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Version() != "0.4.0" || !slices.Equal(ips(t, res), []string{"10.60.0.77/24 gw 10.60.0.254", "fd60::77/64 gw fd60::1"}) {
		t.Errorf("requested ips: version %s, %v", res.Version(), ips(t, res))
	}
	// The same address again: taken, a clear CNI error.
	pod3 := createPod(t, kc, ns, "pod3", "node-a")
	_, err = cni.AddNetworkList(ctx, netA, rt("c3", "net1", pod3, map[string]any{"ips": []string{"10.60.0.77/24"}}))
	var cerr *types.Error
	if !errors.As(err, &cerr) || cerr.Code != types.ErrTryAgainLater || !strings.Contains(cerr.Msg, "10.60.0.77 is held by pod "+ns+"/pod2") {
		t.Errorf("taken address: %v", err)
	}

	// A pod of node-b asking node-a: refused.
	podB := createPod(t, kc, ns, "pod-b", "node-b")
	if _, err := cni.AddNetworkList(ctx, netA, rt("cb", "net1", podB, nil)); err == nil || !strings.Contains(err.Error(), `bound to node "node-b"`) {
		t.Errorf("another node's pod: %v", err)
	}

	// An IPAMClaim: node-a allocates and records it; the pod's successor on
	// node-b gets the same addresses; DEL keeps them.
	claim, err := cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Create(ctx, &claimv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Name: "vm.e2e-net.net1"},
		Spec: claimv1.IPAMClaimSpec{Network: "e2e-net", Interface: "net1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vm1 := createPod(t, kc, ns, "vm1", "node-a")
	claimCaps := map[string]any{"ipamClaimReference": claim.Name}
	res1, err := cni.AddNetworkList(ctx, netA, rt("vm1", "net1", vm1, claimCaps))
	if err != nil {
		t.Fatal(err)
	}
	if err := cni.DelNetworkList(ctx, netA, rt("vm1", "net1", vm1, claimCaps)); err != nil {
		t.Fatal(err)
	}
	vm2 := createPod(t, kc, ns, "vm2", "node-b")
	res2, err := cniB.AddNetworkList(ctx, netB, rt("vm2", "net1", vm2, claimCaps))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ips(t, res1), ips(t, res2)) {
		t.Errorf("claim on node-b got %v, on node-a %v", ips(t, res2), ips(t, res1))
	}
	c, _ := cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
	if len(c.Status.IPs) != 2 {
		t.Errorf("claim status %v", c.Status.IPs)
	}
	// Deleting the claim releases its addresses (node-a allocated them:
	// its informer's delete event).
	before := len(poolObjects(t, cs, "e2e-net"))
	if err := cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(poolObjects(t, cs, "e2e-net")) != before-2 {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted claim's addresses are still allocated: %v", poolObjects(t, cs, "e2e-net"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// GC (CNI 1.1.0) with c1 valid: libcni DELs c2 (in its cache), and
	// multinet-ipam's GC releases an allocation of node-a that libcni never
	// knew (an orphan); node-a's c1 stays.
	orphan := ipam.Request{Attachment: ipam.Attachment{ContainerID: "orphan", IfName: "net1"}}
	if _, err := a.svc.Allocator().Allocate(ctx, mustCfg(t, "e2e-net", keys), orphan); err != nil {
		t.Fatal(err)
	}
	valid := []types.GCAttachment{{ContainerID: "c1", IfName: "net1"}}
	if err := cni.GCNetworkList(ctx, netA, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
		t.Fatal(err)
	}
	if objs, want := poolObjects(t, cs, "e2e-net"), ips2objs(t, c1IPs, "node-a"); !slices.Equal(objs, want) {
		t.Errorf("after GC: %v, want c1's %v", objs, want)
	}
	// DEL of c1: released; a second DEL is fine.
	for range 2 {
		if err := cni.DelNetworkList(ctx, netA, rt("c1", "net1", pod1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cni.CheckNetworkList(ctx, netA, rt("c1", "net1", pod1, nil)); err == nil {
		t.Error("CHECK after DEL succeeded")
	}
	if objs := poolObjects(t, cs, "e2e-net"); len(objs) != 0 {
		t.Errorf("after DEL: %v", objs)
	}
	if err := cni.GetStatusNetworkList(ctx, netA); err != nil {
		t.Errorf("STATUS: %v", err)
	}

	// multinetd gone: STATUS is 50, ADD 11.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := a.svc.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := cni.GetStatusNetworkList(ctx, netA); !errors.As(err, &cerr) || cerr.Code != 50 {
		t.Errorf("STATUS without multinetd: %v", err)
	}
	pod4 := createPod(t, kc, ns, "pod4", "node-a")
	if _, err := cni.AddNetworkList(ctx, netA, rt("c4", "net1", pod4, nil)); !errors.As(err, &cerr) || cerr.Code != types.ErrTryAgainLater || !strings.Contains(cerr.Msg, "not reachable") {
		t.Errorf("ADD without multinetd: %v", err)
	}
}

func mustCfg(t *testing.T, name, keys string) *ipam.Config {
	t.Helper()
	nc, err := ipam.ParseNetConf([]byte(fmt.Sprintf(`{"name":%q,"ipam":{"type":"multinet-ipam",%s}}`, name, keys)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := nc.Config()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ips2objs turns "addr/len gw g" result entries into poolObjects entries.
func ips2objs(t *testing.T, entries []string, node string) []string {
	t.Helper()
	var out []string
	for _, e := range entries {
		addr, _, _ := strings.Cut(e, " ")
		out = append(out, addr+"@"+node)
	}
	slices.Sort(out)
	return out
}

// The reconcile pass of the service, as multinetd's ServiceAccount: one
// metadata list of pods, then the allocations of this node's pods that are
// gone are released, those of live pods kept, and another node's (node-b's,
// as if node-b had died) left alone: a node releases only its own
// (docs/security.md "Node-scoped authority"). multinet-ipam-cleanup's
// pass, as its own ServiceAccount, releases node-b's.
func TestServiceReconcile(t *testing.T) {
	srv := apiservertest.Shared(t)
	admin := srv.Config()
	kc := kubernetes.NewForConfigOrDie(admin)
	cs := versioned.NewForConfigOrDie(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := apiservertest.Name(t, "reconcile")
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, b := startNode(t, srv, "node-a"), startNode(t, srv, "node-b")
	cfg := mustCfg(t, "reconcile-net", `"ranges":[[{"subnet":"10.61.0.0/24"}]]`)
	alloc := func(n *node, p *corev1.Pod) {
		t.Helper()
		r := ipam.Request{Attachment: ipam.Attachment{ContainerID: "c-" + p.Name, IfName: "net1", Pod: &ipam.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}}}
		if _, err := n.svc.Allocator().Allocate(ctx, cfg, r); err != nil {
			t.Fatal(err)
		}
	}
	live := createPod(t, kc, ns, "live", "node-a")
	goneA := createPod(t, kc, ns, "gone-a", "node-a")
	goneB := createPod(t, kc, ns, "gone-b", "node-b")
	alloc(a, live)
	alloc(a, goneA)
	alloc(b, goneB)
	for _, p := range []string{"gone-a", "gone-b"} {
		if err := kc.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	// A pass lists pods from the API server's watch cache (resourceVersion
	// "0"), which may not have seen the deletions yet: a pass then keeps
	// the allocation (never releases a live pod's) and a later one
	// releases it.
	untilReleased := func(name string, pass func(context.Context) (ipam.ReconcileResult, error)) {
		t.Helper()
		var res ipam.ReconcileResult
		var err error
		for res.ReleasedPod == 0 && ctx.Err() == nil {
			if res, err = pass(ctx); err != nil || res.ReleasedPod > 1 {
				t.Fatalf("%s: reconcile: %+v, %v", name, res, err)
			}
			if res.ReleasedPod == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if res.ReleasedPod != 1 {
			t.Fatalf("%s: reconcile never released the gone pod's allocation: %+v", name, res)
		}
	}
	untilReleased("node-a", func(ctx context.Context) (ipam.ReconcileResult, error) { return a.svc.reconcileOnce(ctx, 0) })
	if objs := poolObjects(t, cs, "reconcile-net"); len(objs) != 2 || countSuffix(objs, "@node-a") != 1 || countSuffix(objs, "@node-b") != 1 {
		t.Fatalf("after node-a's pass: %v, want the live pod's and node-b's", objs)
	}
	if res, err := a.svc.reconcileOnce(ctx, 0); err != nil || res.ReleasedPod != 0 || res.Checked != 1 {
		t.Errorf("node-a's second pass: %+v, %v; want its one live allocation checked, node-b's not looked at", res, err)
	}

	cleanupCfg := srv.ServiceAccountConfig(t, "deploy/base/ipam-cleanup.yaml", "multinet-system", "multinet-ipam-cleanup")
	cleanup := newCleanupReconciler(versioned.NewForConfigOrDie(cleanupCfg).IPAMV1alpha1(), versioned.NewForConfigOrDie(cleanupCfg).K8sCniCncfIoV1alpha1(),
		corev1client.NewForConfigOrDie(cleanupCfg), metadata.NewForConfigOrDie(cleanupCfg),
		claimlisters.NewIPAMClaimLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})))
	m := newMetrics(prometheus.NewRegistry())
	untilReleased("multinet-ipam-cleanup", func(ctx context.Context) (ipam.ReconcileResult, error) {
		return cleanup.pass(ctx, 0, m, klog.Background())
	})
	if objs := poolObjects(t, cs, "reconcile-net"); len(objs) != 1 || !strings.HasSuffix(objs[0], "@node-a") {
		t.Errorf("left %v, want the live pod's", objs)
	}
	checkCleanupMetrics(t, cleanup, m)
}

// checkCleanupMetrics checks what multinet-ipam-cleanup's passes counted
// (one gone pod's allocation released, nothing failed, a success time),
// then that a failing pass (its context ended) counts an error and leaves
// the last success alone.
func checkCleanupMetrics(t *testing.T, cleanup *reconciler, m *metrics) {
	t.Helper()
	last := metricValue(t, m.lastSuccess)
	if ok, rel, checked, failed := metricValue(t, m.passes.WithLabelValues("ok")), metricValue(t, m.released.WithLabelValues("pod-gone")),
		metricValue(t, m.checked), metricValue(t, m.failed); ok < 1 || rel != 1 || checked < 2 || failed != 0 || last < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("after the cleanup's passes: ok %v released %v checked %v failed %v last success %v; want >= 1, 1, >= 2, 0, now",
			ok, rel, checked, failed, last)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cleanup.pass(ctx, 0, m, klog.Background()); err == nil {
		t.Fatal("a pass with an ended context succeeded")
	}
	if e, l := metricValue(t, m.passes.WithLabelValues("error")), metricValue(t, m.lastSuccess); e != 1 || l != last {
		t.Errorf("after a failed pass: errors %v last success %v; want 1, %v", e, l, last)
	}
}

// metricValue is a counter's or gauge's value.
func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// The plugin binary through libcni, with multinetd's pool rules: the
// NAD's namespace reaches the service in CNI_ARGS MULTINET_NETWORK_NAMESPACE
// (as multinetd adds it for every delegate); a pod of B through a NAD of B
// naming A's pool is refused with CNI code 7 naming the pool, its owner
// and B, also when no meta-plugin says the NAD's namespace (the pod's
// decides); an empty value is a network of the node's own configuration,
// whose pool is the cluster's.
func TestPluginTenancy(t *testing.T) {
	srv := apiservertest.Shared(t)
	admin := srv.Config()
	kc := kubernetes.NewForConfigOrDie(admin)
	cs := versioned.NewForConfigOrDie(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nsA, nsB, pool := apiservertest.Name(t, "tenancy-a"), apiservertest.Name(t, "tenancy-b"), apiservertest.Name(t, "tenancy-blue")
	for _, ns := range []string{nsA, nsB} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n := startNodeTenancy(t, srv, "node-t", &ipam.Tenancy{AdminNamespaces: []string{"default"}})
	cni := n.cni(pluginDir(t), t.TempDir())
	keys := func(pool string) string {
		return fmt.Sprintf(`"pool":%q,"ranges":[[{"subnet":"10.61.0.0/24"}]]`, pool)
	}
	withNetworkNS := func(r *libcni.RuntimeConf, ns string) *libcni.RuntimeConf {
		r.Args = append(r.Args, api.NetworkNamespaceArg(ns+"/nad"))
		return r
	}
	podA, podB := createPod(t, kc, nsA, "a", "node-t"), createPod(t, kc, nsB, "b", "node-t")
	if _, err := cni.AddNetworkList(ctx, n.network(t, "1.1.0", "net", keys(pool)), withNetworkNS(rt("ta", "net1", podA, nil), nsA)); err != nil {
		t.Fatal(err)
	}
	keyA := nsA + "/" + pool
	before := poolObjects(t, cs, keyA)
	if len(before) != 1 {
		t.Fatalf("namespace %s's pool %s holds %v", nsA, keyA, before)
	}
	for _, r := range []*libcni.RuntimeConf{withNetworkNS(rt("tb", "net1", podB, nil), nsB), rt("tb2", "net1", podB, nil)} {
		_, err := cni.AddNetworkList(ctx, n.network(t, "1.1.0", "net", keys(keyA)), r)
		var cerr *types.Error
		if !errors.As(err, &cerr) || cerr.Code != types.ErrInvalidNetworkConfig ||
			!strings.Contains(cerr.Msg, fmt.Sprintf("pool %q belongs to namespace %s", keyA, nsA)) || !strings.Contains(cerr.Msg, fmt.Sprintf("namespace %q", nsB)) {
			t.Errorf("B naming A's pool (args %v): %v, want code 7 naming the pool and both namespaces", r.Args, err)
		}
	}
	if got := poolObjects(t, cs, keyA); !slices.Equal(got, before) {
		t.Errorf("namespace %s's pool changed: %v, was %v", nsA, got, before)
	}
	// a network of the node's own configuration: the cluster pool
	cr := rt("tc", "net1", podB, nil)
	cr.Args = append(cr.Args, api.NetworkNamespaceArg("10-default.conflist"))
	if _, err := cni.AddNetworkList(ctx, n.network(t, "1.1.0", "net", keys(pool)), cr); err != nil {
		t.Fatal(err)
	}
	if got := poolObjects(t, cs, pool); len(got) != 1 {
		t.Errorf("cluster pool %s holds %v, want the one address", pool, got)
	}
	for _, c := range []string{"ta", "tc"} {
		if _, err := n.svc.allocator.Release(ctx, c, "net1"); err != nil {
			t.Error(err)
		}
	}
}

func countSuffix(l []string, suffix string) int {
	n := 0
	for _, s := range l {
		if strings.HasSuffix(s, suffix) {
			n++
		}
	}
	return n
}
