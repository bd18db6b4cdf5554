package policysync

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/nftpolicy"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/internal/testing/cnitest"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
	policyclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/pkg/spec/policy"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

const node = "node-a"

// env is a controller as multinetd runs it: informers of a real API
// server with multinetd's RBAC (deploy/base/multinetd-rbac.yaml), a real
// record store, real network namespaces and nftables.
type env struct {
	t      *testing.T
	core   *corev1client.CoreV1Client // admin
	nads   *nadclient.K8sCniCncfIoV1Client
	pols   *policyclient.K8sCniCncfIoV1beta2Client
	sa     *rest.Config // multinetd's ServiceAccount
	store  *state.Store
	locks  *keyedmutex.Map
	writer *recordingWriter
	events *recordingEvents
	obs    *recordingObserver
	ns     string // the policies' and the target's namespace
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cnitest.RequireRoot(t)
	srv := apiservertest.Shared(t)
	admin := srv.Config()
	e := &env{t: t, locks: &keyedmutex.Map{}, writer: &recordingWriter{last: map[string][]policy.Interface{}},
		events: &recordingEvents{}, obs: &recordingObserver{}}
	var err error
	if e.core, err = corev1client.NewForConfig(admin); err != nil {
		t.Fatal(err)
	}
	if e.nads, err = nadclient.NewForConfig(admin); err != nil {
		t.Fatal(err)
	}
	if e.pols, err = policyclient.NewForConfig(admin); err != nil {
		t.Fatal(err)
	}
	e.sa = srv.ServiceAccountConfig(t, "deploy/base/multinetd-rbac.yaml", "multinet-system", "multinetd")
	if e.store, err = state.NewStore(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	e.ns = apiservertest.Name(t, "ps-"+strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))[:10])
	e.namespace(e.ns, map[string]string{"team": "a"})
	e.nad(e.ns, "net")
	return e
}

// controller starts a controller over new informers of multinetd's
// ServiceAccount; it stops when the test ends or stop is called.
func (e *env) controller() (c *Controller, stop func()) {
	e.t.Helper()
	core, err := corev1client.NewForConfig(e.sa)
	if err != nil {
		e.t.Fatal(err)
	}
	nads, err := nadclient.NewForConfig(e.sa)
	if err != nil {
		e.t.Fatal(err)
	}
	pols, err := policyclient.NewForConfig(e.sa)
	if err != nil {
		e.t.Fatal(err)
	}
	polInf, err := NewPolicyInformer(pols)
	if err != nil {
		e.t.Fatal(err)
	}
	podInf, err := NewPodInformer(core)
	if err != nil {
		e.t.Fatal(err)
	}
	nsInf, err := kube.NewInformer[*corev1.NamespaceList](core.Namespaces(), &corev1.Namespace{}, kube.InformerOptions{Transform: kube.NamespaceLabelsOnly})
	if err != nil {
		e.t.Fatal(err)
	}
	nadInf, err := kube.NewInformer[*nadv1.NetworkAttachmentDefinitionList](nads.NetworkAttachmentDefinitions(""), &nadv1.NetworkAttachmentDefinition{}, kube.InformerOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	c, err = New(Options{NodeName: node, Store: e.store, Locks: e.locks, Policies: polInf, Namespaces: nsInf, NADs: nadInf, Pods: podInf,
		Live: podGetter{core}, Writer: e.writer, Events: e.events, Observer: e.obs})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	for _, inf := range []cache.SharedIndexInformer{polInf, podInf, nsInf, nadInf} {
		go inf.RunWithContext(ctx)
	}
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return c, stop
}

type podGetter struct{ core corev1client.PodsGetter }

func (g podGetter) Get(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return g.core.Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (e *env) namespace(name string, labels map[string]string) {
	e.t.Helper()
	_, err := e.core.Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// relabelNamespace sets namespace name's labels.
func (e *env) relabelNamespace(name string, labels map[string]string) {
	e.t.Helper()
	ns, err := e.core.Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	ns.Labels = labels
	if _, err := e.core.Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) nad(namespace, name string) {
	e.t.Helper()
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"type":"macvlan"}`, name)}}
	if _, err := e.nads.NetworkAttachmentDefinitions(namespace).Create(context.Background(), nad, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// policy creates p in the env's namespace.
func (e *env) policy(p *v1beta2.MultiNetworkPolicy) *v1beta2.MultiNetworkPolicy {
	e.t.Helper()
	p.Namespace = e.ns
	out, err := e.pols.MultiNetworkPolicies(e.ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// pod creates pod namespace/name on nodeName with labels and a
// network-status annotation (networkStatus "": none).
func (e *env) pod(namespace, name, nodeName string, labels map[string]string, networkStatus string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if networkStatus != "" {
		p.Annotations = map[string]string{"k8s.v1.cni.cncf.io/network-status": networkStatus}
	}
	out, err := e.core.Pods(namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// relabelPod sets pod namespace/name's labels.
func (e *env) relabelPod(namespace, name string, labels map[string]string) {
	e.t.Helper()
	p, err := e.core.Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	p.Labels = labels
	if _, err := e.core.Pods(namespace).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// sandbox makes a network namespace with a dummy net1 and the complete
// record of container id of pod: the default network on eth0 and network
// ns/net on net1 with address addr (result is the recorded CNI result of
// net1; "" makes one with net1 in the sandbox).
func (e *env) sandbox(id string, pod *corev1.Pod, addr, result string) (*state.Record, ns.NetNS) {
	e.t.Helper()
	netns := cnitest.NewNS(e.t)
	cnitest.Dummy(e.t, netns, "net1", true)
	if result == "" {
		result = fmt.Sprintf(`{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":%q}],"ips":[{"address":%q,"interface":0}]}`, netns.Path(), addr+"/24")
	}
	rec := &state.Record{
		ContainerID: id, Netns: netns.Path(), PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID),
		Complete: true, Selection: true,
		Attachments: []state.Attachment{
			{Network: "default", Default: true, IfName: "eth0", Phase: state.PhaseAdded},
			{Network: e.ns + "/net", IfName: "net1", Phase: state.PhaseAdded, Result: []byte(result)},
		},
	}
	if err := e.store.Save(rec); err != nil {
		e.t.Fatal(err)
	}
	return rec, netns
}

// hasTable reports whether multinetd's table is in netns.
func hasTable(t *testing.T, netns ns.NetNS) bool {
	t.Helper()
	c, closeNetns := cnitest.NFTables(t, netns)
	defer closeNetns()
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(tables, func(tb *nftables.Table) bool { return tb.Name == nftpolicy.TableName })
}

// eventually polls cond (every 20 ms, at most 30 s) and fails the test
// with what when it never holds. The bound is a hang guard, not a timing
// assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// recordingWriter is nftpolicy's Writer that remembers the last rules
// written into each netns (nil after Remove).
type recordingWriter struct {
	mu      sync.Mutex
	last    map[string][]policy.Interface
	applies int
}

func (w *recordingWriter) Apply(ctx context.Context, netns string, ifaces []policy.Interface) (nftpolicy.Stats, error) {
	st, err := nftWriter{}.Apply(ctx, netns, ifaces)
	if err == nil {
		w.mu.Lock()
		w.last[netns] = ifaces
		w.applies++
		w.mu.Unlock()
	}
	return st, err
}

func (w *recordingWriter) Remove(ctx context.Context, netns string) error {
	err := nftWriter{}.Remove(ctx, netns)
	if err == nil {
		w.mu.Lock()
		delete(w.last, netns)
		w.mu.Unlock()
	}
	return err
}

// ingressPeers returns the peer prefixes of the ingress rules last
// written into netns.
func (w *recordingWriter) ingressPeers(netns string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, i := range w.last[netns] {
		for _, r := range i.Ingress.Rules {
			for _, p := range r.Peers {
				out = append(out, p.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

type event struct{ kind, object, reason, message string }

type recordingEvents struct {
	mu  sync.Mutex
	all []event
}

func (r *recordingEvents) Warning(obj runtime.Object, reason, format string, args ...any) {
	kind := fmt.Sprintf("%T", obj)
	name := ""
	switch o := obj.(type) {
	case *corev1.Pod:
		kind, name = "Pod", o.Namespace+"/"+o.Name
	case *v1beta2.MultiNetworkPolicy:
		kind, name = o.Kind, o.Namespace+"/"+o.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, event{kind, name, reason, fmt.Sprintf(format, args...)})
}

func (r *recordingEvents) of(kind, object, reason string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.all {
		if e.kind == kind && e.object == object && e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

type recordingObserver struct {
	mu        sync.Mutex
	results   map[string]int
	latencies []time.Duration
}

func (o *recordingObserver) PolicySynced(result string, latency time.Duration, _, _ int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.results == nil {
		o.results = map[string]int{}
	}
	o.results[result]++
	if latency > 0 {
		o.latencies = append(o.latencies, latency)
	}
}

func (o *recordingObserver) count(result string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.results[result]
}
