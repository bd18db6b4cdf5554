package attach

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/hotplug"
	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/netstatus"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// TestMain builds the CNI plugins once (cnitest) and stops the real API
// server some tests share (apiservertest) at the end.
func TestMain(m *testing.M) {
	code := cnitest.Main(m)
	apiservertest.StopShared()
	os.Exit(code)
}

// The in-memory implementations of the engine's interfaces below stand for
// the API server and kubelet.

// fakePods serves pods by namespace/name; err, when set, is what every Get
// returns (the API server is down).
type fakePods struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
	err  error
}

func (f *fakePods) Get(_ context.Context, namespace, name, uid string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	p, ok := f.pods[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if uid != "" && string(p.UID) != uid {
		return nil, fmt.Errorf("pod %s/%s has UID %s, not %s", namespace, name, p.UID, uid)
	}
	return p.DeepCopy(), nil
}

func (f *fakePods) add(p *corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[p.Namespace+"/"+p.Name] = p
}

func (f *fakePods) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// fakeNADs serves NetworkAttachmentDefinitions; a missing one is NotFound.
type fakeNADs struct {
	mu   sync.Mutex
	nads map[string]*nadv1.NetworkAttachmentDefinition
}

func (f *fakeNADs) Get(_ context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nads[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "k8s.cni.cncf.io", Resource: "network-attachment-definitions"}, name)
	}
	return n.DeepCopy(), nil
}

func (f *fakeNADs) put(namespace, name, config string, annotations map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nads[namespace+"/"+name] = &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}

func (f *fakeNADs) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.nads)
}

// statusCall is one PatchAnnotation call.
type statusCall struct{ Namespace, Name, UID, Key, Value string }

type fakeStatus struct {
	mu    sync.Mutex
	calls []statusCall
}

func (f *fakeStatus) PatchAnnotation(_ context.Context, namespace, name, uid, key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, statusCall{namespace, name, uid, key, value})
	return nil
}

func (f *fakeStatus) all() []statusCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// event is one posted Event.
type event struct{ Type, Reason, Message, Pod string }

type fakeEvents struct {
	mu     sync.Mutex
	events []event
}

func (f *fakeEvents) post(typ string, obj runtime.Object, reason, format string, args ...any) {
	pod := ""
	if p, ok := obj.(*corev1.Pod); ok {
		pod = p.Namespace + "/" + p.Name
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event{typ, reason, fmt.Sprintf(format, args...), pod})
}

func (f *fakeEvents) Normal(obj runtime.Object, reason, format string, args ...any) {
	f.post(corev1.EventTypeNormal, obj, reason, format, args...)
}

func (f *fakeEvents) Warning(obj runtime.Object, reason, format string, args ...any) {
	f.post(corev1.EventTypeWarning, obj, reason, format, args...)
}

// of returns the events of type typ and reason.
func (f *fakeEvents) of(typ, reason string) []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []event
	for _, e := range f.events {
		if e.Type == typ && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// fakeDevices returns the same allocation for every pod.
type fakeDevices map[string][]string

func (f fakeDevices) DeviceIDs(context.Context, string, string) (map[string][]string, error) {
	return f, nil
}

// call is one delegate plugin invocation seen by recordingExec.
type call struct {
	Command, ContainerID, IfName, Plugin, Netns string
	// Args is CNI_ARGS.
	Args string
}

// recordingExec runs plugins for real and records each invocation. before,
// when set, runs before the plugin (tests use it to block or observe); fail,
// when set and returning an error, replaces the plugin's run by that error.
type recordingExec struct {
	invoke.Exec
	mu     sync.Mutex
	calls  []call
	before func(call)
	fail   func(call) error
}

func newRecordingExec() *recordingExec {
	return &recordingExec{Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}}
}

func (r *recordingExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	c := call{Plugin: filepath.Base(pluginPath)}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CNI_COMMAND":
			c.Command = v
		case "CNI_CONTAINERID":
			c.ContainerID = v
		case "CNI_IFNAME":
			c.IfName = v
		case "CNI_NETNS":
			c.Netns = v
		case "CNI_ARGS":
			c.Args = v
		}
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	before, fail := r.before, r.fail
	r.mu.Unlock()
	if before != nil {
		before(c)
	}
	if fail != nil {
		if err := fail(c); err != nil {
			return nil, err
		}
	}
	return r.Exec.ExecPlugin(ctx, pluginPath, stdin, environ)
}

// of returns the recorded invocations of command cmd ("" for all).
func (r *recordingExec) of(cmd string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if cmd == "" || c.Command == cmd {
			out = append(out, c)
		}
	}
	return out
}

func (r *recordingExec) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// ifNames lists the CNI_IFNAME of calls in order.
func ifNames(calls []call) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.IfName)
	}
	return out
}

const podNS = "ns1"

// env is one engine over real plugins, a real record store and a pod
// network namespace, with the fakes above.
type env struct {
	t       testing.TB
	bin     string
	netns   ns.NetNS
	store   *state.Store
	ipamDir string
	pods    *fakePods
	nads    *fakeNADs
	status  *fakeStatus
	events  *fakeEvents
	exec    *recordingExec
	eng     *Engine
	pub     *netstatus.Publisher // nil without a status writer
	hp      *hotplug.HotPlugger
	subnet  int
	// defaultNet is the default network's CNI name.
	defaultNet string
}

// newEnv makes an env whose default network is a bridge on 10.200.<k>.0/24.
// opt, when set, adjusts the engine options before New.
func newEnv(t testing.TB, opt func(*envOptions)) *env {
	t.Helper()
	cnitest.RequireRoot(t)
	e := &env{
		t: t, bin: cnitest.BinDir(t), netns: cnitest.NewNS(t), ipamDir: t.TempDir(),
		pods:   &fakePods{pods: map[string]*corev1.Pod{}},
		nads:   &fakeNADs{nads: map[string]*nadv1.NetworkAttachmentDefinition{}},
		status: &fakeStatus{}, events: &fakeEvents{}, exec: newRecordingExec(),
		defaultNet: "mnu-default",
	}
	store, err := state.NewStore(filepath.Join(t.TempDir(), "records"))
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	def, err := libcni.ConfListFromBytes([]byte(e.bridgeConf(e.defaultNet, `,"routes":[{"dst":"0.0.0.0/0"}]`)))
	if err != nil {
		t.Fatal(err)
	}
	opts := envOptions{Options: Options{
		Store:          store,
		DefaultNetwork: func() (*libcni.NetworkConfigList, string, error) { return def, e.defaultNet, nil },
		Pods:           e.pods, NADs: e.nads, Events: e.events,
		Exec:            e.exec,
		DelegateTimeout: 30 * time.Second,
	}, Status: e.status}
	if opt != nil {
		opt(&opts)
	}
	e.eng, e.pub, e.hp = newEngine(t, opts)
	return e
}

// envOptions are an env's engine options and its network-status
// publisher's: Status is the annotation's writer (nil: no publisher),
// AsyncStatus the publisher's Async.
type envOptions struct {
	Options
	Status      netstatus.StatusWriter
	AsyncStatus bool
}

// newEngine returns the engine of o, the network-status publisher it
// publishes through (when o.Status is set) and its hot-plug, as multinetd
// wires them.
func newEngine(t testing.TB, o envOptions) (*Engine, *netstatus.Publisher, *hotplug.HotPlugger) {
	t.Helper()
	var pub *netstatus.Publisher
	if o.Locks == nil {
		o.Locks = &keyedmutex.Map{}
	}
	if o.Status != nil {
		obs, _ := o.Observer.(netstatus.Observer)
		var err error
		pub, err = netstatus.New(netstatus.Options{Store: o.Store, Writer: o.Status, Locks: o.Locks, Events: o.Events, Observer: obs, Async: o.AsyncStatus})
		if err != nil {
			t.Fatal(err)
		}
		o.Options.Status = pub
	}
	eng, hp := newHotPlugEngine(t, o.Options, pub)
	return eng, pub, hp
}

// newHotPlugEngine returns the engine of opts (over a new hotplug.Sandboxes)
// and its hot-plug, publishing through pub (nil: none).
func newHotPlugEngine(t testing.TB, opts Options, pub *netstatus.Publisher) (*Engine, *hotplug.HotPlugger) {
	t.Helper()
	sb := &hotplug.Sandboxes{}
	opts.Sandboxes = sb
	eng, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ho := hotplug.Options{Engine: eng.HotPlugPort(), Sandboxes: sb, Store: opts.Store, Locks: eng.locks, Events: opts.Events}
	if opts.NetworkPolicy != nil {
		ho.NetworkPolicy = opts.NetworkPolicy
	}
	if pub != nil {
		ho.Status = pub
	}
	ho.Observer, _ = opts.Observer.(hotplug.Observer)
	hp, err := hotplug.New(ho)
	if err != nil {
		t.Fatal(err)
	}
	return eng, hp
}

// bridgeConf returns a conflist named name: a bridge (removed when the test
// ends) with host-local IPAM on the next 10.200.<k>.0/24 of this env.
// ipamExtra is appended inside the ipam object.
func (e *env) bridgeConf(name, ipamExtra string) string {
	return e.bridgeConfRange(name, fmt.Sprintf(`{"subnet":"10.200.%d.0/24"}`, e.nextSubnet()), ipamExtra)
}

// bridgeConfRange is bridgeConf with the host-local range object given.
func (e *env) bridgeConfRange(name, rangeObj, ipamExtra string) string {
	e.t.Helper()
	br := cnitest.UniqueName("mnu")
	cnitest.DeleteLinkAtCleanup(e.t, br)
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[%s]]%s}}]}`,
		name, br, e.ipamDir, rangeObj, ipamExtra)
}

// nextSubnet returns k for the next 10.200.<k>.0/24, counting up per env
// from 1 (the default network's). The bridges carry no host address, so
// envs may reuse subnets.
func (e *env) nextSubnet() int {
	e.subnet++
	return e.subnet
}

// bridgeNAD creates NAD podNS/name over a new bridge network and returns
// the first three octets of its subnet ("10.200.2").
func (e *env) bridgeNAD(name string) string {
	e.t.Helper()
	e.nads.put(podNS, name, e.bridgeConf(name, ""), nil)
	return fmt.Sprintf("10.200.%d", e.subnet)
}

// pod registers a pod of podNS with the given annotations and returns it.
func (e *env) pod(annotations map[string]string) *corev1.Pod {
	name := "pod-" + cnitest.UniqueName("")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: podNS, Name: name, UID: types.UID("uid-" + name), Annotations: annotations}}
	e.pods.add(p)
	return p
}

// podWithNetworks registers a pod whose selection annotation is networks.
func (e *env) podWithNetworks(networks string) *corev1.Pod {
	return e.pod(map[string]string{selection.NetworksAnnotation: networks})
}

// req returns a CNI request of cmd for container id of pod (nil: no pod)
// in the env's netns, with the runtime config in cniVersion 0.4.0, decoded
// as multinetd's server decodes it.
func (e *env) req(cmd, id string, pod *corev1.Pod) *cnirequest.Request {
	return cnirequest.Decode(e.wire(cmd, id, pod))
}

// wire is req as the shim sends it.
func (e *env) wire(cmd, id string, pod *corev1.Pod) *api.Request {
	args := "IgnoreUnknown=1;K8S_POD_INFRA_CONTAINER_ID=" + id
	if pod != nil {
		args += fmt.Sprintf(";K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", pod.Namespace, pod.Name, pod.UID)
	}
	return &api.Request{
		V: api.Version, Command: cmd, ContainerID: id, Netns: e.netns.Path(), IfName: "eth0",
		Args: args, Path: e.bin,
		Config: json.RawMessage(`{"cniVersion":"0.4.0","name":"multinet","type":"multinet-shim"}`),
	}
}

// add runs ADD and fails the test on error.
func (e *env) add(id string, pod *corev1.Pod) []byte {
	e.t.Helper()
	out, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
	if err != nil {
		e.t.Fatalf("ADD %s: %v", id, err)
	}
	return out
}

// del runs DEL with the env's netns and fails the test on error.
func (e *env) del(id string, pod *corev1.Pod) {
	e.t.Helper()
	if err := e.eng.Del(context.Background(), e.req(api.CmdDel, id, pod)); err != nil {
		e.t.Fatalf("DEL %s: %v", id, err)
	}
}

// leases returns the addresses host-local holds for network net, each as
// "ip container-id ifname".
func (e *env) leases(net string) []string {
	e.t.Helper()
	dir := filepath.Join(e.ipamDir, net)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range entries {
		if strings.HasPrefix(d.Name(), "last_reserved_ip") || d.Name() == "lock" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, d.Name()))
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, d.Name()+" "+strings.Join(strings.Fields(string(b)), " "))
	}
	return out
}

// wantLeases fails the test unless network net has exactly n leases.
func (e *env) wantLeases(net string, n int) {
	e.t.Helper()
	if got := e.leases(net); len(got) != n {
		e.t.Errorf("host-local leases of %s = %q, want %d", net, got, n)
	}
}

// links returns the names of the links in the env's netns other than lo.
func (e *env) links() []string {
	e.t.Helper()
	ls, err := cnitest.Handle(e.t, e.netns).LinkList()
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		if n := l.Attrs().Name; n != "lo" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// wantLinks fails the test unless the netns holds exactly names (and lo).
func (e *env) wantLinks(names ...string) {
	e.t.Helper()
	want := slices.Clone(names)
	slices.Sort(want)
	if got := e.links(); !slices.Equal(got, want) {
		e.t.Errorf("links in the pod netns = %q, want %q", got, want)
	}
}

// networkStatus decodes the single network-status PATCH of pod.
func (e *env) networkStatus(pod *corev1.Pod) []status.NetworkStatus {
	e.t.Helper()
	var got []statusCall
	for _, c := range e.status.all() {
		if c.Namespace == pod.Namespace && c.Name == pod.Name {
			got = append(got, c)
		}
	}
	if len(got) != 1 {
		e.t.Fatalf("network-status PATCHes of %s/%s = %d, want 1", pod.Namespace, pod.Name, len(got))
	}
	c := got[0]
	if c.Key != status.Annotation || c.UID != string(pod.UID) {
		e.t.Errorf("PATCH key %q uid %q, want %q %q", c.Key, c.UID, status.Annotation, pod.UID)
	}
	list, err := status.Decode(c.Value)
	if err != nil {
		e.t.Fatalf("network-status %s: %v", c.Value, err)
	}
	return list
}

// defaultRoutes returns the pod's IPv4 default routes as "<gateway> dev
// <interface>", in the kernel's order.
func (e *env) defaultRoutes() []string {
	e.t.Helper()
	h := cnitest.Handle(e.t, e.netns)
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		e.t.Fatal(err)
	}
	var defaults []string
	for _, r := range routes {
		if isDefault(r.Dst) {
			l, err := h.LinkByIndex(r.LinkIndex)
			if err != nil {
				e.t.Fatal(err)
			}
			defaults = append(defaults, r.Gw.String()+" dev "+l.Attrs().Name)
		}
	}
	return defaults
}
