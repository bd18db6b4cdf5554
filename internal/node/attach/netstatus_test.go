package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/netstatus"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/client/clientset/kubernetes/fake"
	"github.com/multinet/multinet/pkg/spec/status"
)

// statusAPI is the API server side of network-status: a fake clientset
// holding the pods, written through the real kube.StatusPatcher. While down
// is set every PATCH of a pod answers it.
type statusAPI struct {
	client *fake.Clientset
	mu     sync.Mutex
	down   error
	// delay, when set, is how long each PATCH takes (concurrency tests).
	delay   time.Duration
	patches map[string]int // by namespace/name, every PATCH seen
	active  atomic.Int32   // PATCHes in progress
	maxSeen atomic.Int32   // most PATCHes seen at once
}

func newStatusAPI(pods ...*corev1.Pod) *statusAPI {
	objs := make([]k8sruntime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	a := &statusAPI{client: fake.NewSimpleClientset(objs...), patches: map[string]int{}}
	a.client.PrependReactor("patch", "pods", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		n := a.active.Add(1)
		defer a.active.Add(-1)
		for {
			m := a.maxSeen.Load()
			if n <= m || a.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		a.mu.Lock()
		a.patches[action.GetNamespace()+"/"+action.(k8stesting.PatchAction).GetName()]++
		down, delay := a.down, a.delay
		a.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
		}
		if down != nil {
			return true, nil, down
		}
		return false, nil, nil // the tracker applies the merge patch
	})
	return a
}

func (a *statusAPI) setDown(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = err
}

func (a *statusAPI) patchCount(pod *corev1.Pod) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.patches[pod.Namespace+"/"+pod.Name]
}

// annotation returns pod's network-status annotation as the API has it
// ("" when it has none, or the pod is gone).
func (a *statusAPI) annotation(t testing.TB, pod *corev1.Pod) string {
	t.Helper()
	got, err := a.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), pod.Namespace, pod.Name)
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.(*corev1.Pod).Annotations[status.Annotation]
}

func (a *statusAPI) deletePod(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	if err := a.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), pod.Namespace, pod.Name); err != nil {
		t.Fatal(err)
	}
}

var errAPIDown = apierrors.NewServiceUnavailable("the API server is down")

// statusObserver counts what the engine reports to multinetd's metrics.
type statusObserver struct {
	mu      sync.Mutex
	pending []int
	retried map[string]int
}

func (o *statusObserver) DelegateDone(string, string, time.Duration, error) {}
func (o *statusObserver) StatusPending(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, n)
}
func (o *statusObserver) StatusRetried(result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.retried == nil {
		o.retried = map[string]int{}
	}
	o.retried[result]++
}

// lastPending is the last pending count reported (0 when none was).
func (o *statusObserver) lastPending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) == 0 {
		return 0
	}
	return o.pending[len(o.pending)-1]
}

func (o *statusObserver) retries(result string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retried[result]
}

// fastRetries retry every few milliseconds.
var fastRetries = netstatus.RetryOptions{Workers: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 40 * time.Millisecond, AttemptTimeout: 5 * time.Second}

// runRetries runs eng's retrier until the test ends (or stop is called) and
// fails the test if it does not stop.
func runRetries(t *testing.T, eng *netstatus.Publisher, opts netstatus.RetryOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Run(ctx, opts); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond for up to 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statusEnv is an engine env whose network-status goes to a statusAPI.
func statusEnv(t *testing.T, obs *statusObserver, opt func(*envOptions)) (*env, *statusAPI) {
	api := newStatusAPI()
	e := newEnv(t, func(o *envOptions) {
		o.Status = kube.NewStatusPatcher(api.client.CoreV1())
		if obs != nil {
			o.Observer = obs
		}
		if opt != nil {
			opt(o)
		}
	})
	return e, api
}

// statusPod registers a pod (selecting networks) with the env and the API.
func statusPod(t *testing.T, e *env, api *statusAPI, networks string) *corev1.Pod {
	pod := e.podWithNetworks(networks)
	if err := api.client.Tracker().Add(pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	return pod
}

// record loads the record of container id.
func (e *env) record(id string) *state.Record {
	e.t.Helper()
	rec, err := e.store.Load(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// statusState is the state of container id's network-status ("" when the
// record has none, "gone" when there is no record).
func (e *env) statusState(id string) state.StatusState {
	rec, err := e.store.Load(id)
	if errors.Is(err, state.ErrNotFound) {
		return "gone"
	}
	if err != nil || rec.NetworkStatus == nil {
		return ""
	}
	return rec.NetworkStatus.State
}

// The API server fails the network-status PATCH during ADD: the ADD still
// succeeds, with a NetworkStatusFailed Warning and the status pending in
// the record. Once the API server is back the retrier writes the annotation,
// listing exactly the attachments the pod has, marks the record landed and
// posts NetworkStatusWritten.
func TestStatusPatchFailsDuringAddLandsLater(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("AsyncStatus=%v", async), func(t *testing.T) {
			obs := &statusObserver{}
			e, api := statusEnv(t, obs, func(o *envOptions) { o.AsyncStatus = async })
			e.bridgeNAD("net-a")
			pod := statusPod(t, e, api, "net-a")
			id := "ctr-" + cnitest.UniqueName("")

			api.setDown(errAPIDown)
			e.add(id, pod)
			if err := e.pub.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if api.patchCount(pod) == 0 {
				t.Fatal("ADD made no network-status PATCH")
			}
			if got := api.annotation(t, pod); got != "" {
				t.Fatalf("annotation %q while the API server is down", got)
			}
			if got := e.events.of("Warning", kube.ReasonNetworkStatusFailed); len(got) != 1 {
				t.Errorf("NetworkStatusFailed events = %+v, want 1", got)
			}
			rec := e.record(id)
			if !rec.Complete || !rec.Pending() || rec.NetworkStatus.PodUID != string(pod.UID) {
				t.Fatalf("record complete=%v status=%+v; want complete, status pending for pod UID %s", rec.Complete, rec.NetworkStatus, pod.UID)
			}
			if n := e.pub.Pending(); n != 1 || obs.lastPending() != 1 {
				t.Errorf("pending status writes = %d (reported %d), want 1", n, obs.lastPending())
			}

			// Retries while the API server is still down fail and keep it pending.
			runRetries(t, e.pub, fastRetries)
			eventually(t, "a failed retry", func() bool { return obs.retries(netstatus.RetryFailed) > 0 })
			if got := api.annotation(t, pod); got != "" || e.statusState(id) != state.StatusPending {
				t.Fatalf("annotation %q, state %q while the API server is down", got, e.statusState(id))
			}

			api.setDown(nil)
			eventually(t, "the record marked landed", func() bool { return e.statusState(id) == state.StatusLanded })
			value := api.annotation(t, pod)
			list, err := status.Decode(value)
			if err != nil {
				t.Fatalf("annotation %q: %v", value, err)
			}
			// Exactly the attachments that exist: the pod's links, the
			// record's attachments, and their addresses.
			e.wantLinks("eth0", "net1")
			rec = e.record(id)
			if len(list) != len(rec.Attachments) {
				t.Fatalf("network-status lists %d attachments, the record %d", len(list), len(rec.Attachments))
			}
			for i, s := range list {
				a := rec.Attachments[i]
				if s.Name != a.Network || s.Interface != a.IfName || s.Default != a.Default || len(s.IPs) != 1 {
					t.Errorf("network-status[%d] = %s@%s default=%v ips %v; the attachment is %s@%s default=%v", i, s.Name, s.Interface, s.Default, s.IPs, a.Network, a.IfName, a.Default)
				}
				if ip := s.IPs[0]; !strings.Contains(string(a.Result), `"`+ip+`/`) {
					t.Errorf("network-status[%d] ip %s is not in the attachment's result %s", i, ip, a.Result)
				}
			}
			if value != rec.NetworkStatus.Value {
				t.Errorf("annotation differs from the record's network-status:\n%s\n%s", value, rec.NetworkStatus.Value)
			}
			if got := e.events.of("Normal", kube.ReasonNetworkStatusWritten); len(got) != 1 || got[0].Pod != pod.Namespace+"/"+pod.Name {
				t.Errorf("NetworkStatusWritten events = %+v, want 1 on the pod", got)
			}
			eventually(t, "nothing pending", func() bool { return e.pub.Pending() == 0 && obs.lastPending() == 0 })
			if obs.retries(netstatus.RetryLanded) != 1 {
				t.Errorf("retries landed = %d, want 1", obs.retries(netstatus.RetryLanded))
			}
			// Landed: not PATCHed again.
			n := api.patchCount(pod)
			time.Sleep(100 * time.Millisecond)
			if m := api.patchCount(pod); m != n {
				t.Errorf("%d more PATCHes after the status landed", m-n)
			}
			e.del(id, pod)
		})
	}
}

// The final record save fails (the record directory is unusable): the ADD
// fails and tears its attachments down, and no network-status listing them
// is ever PATCHed, then or later.
func TestStatusNotPublishedWhenRecordSaveFails(t *testing.T) {
	e := newEnv(t, func(o *envOptions) { o.CacheDir = t.TempDir() }) // libcni's cache outside the records
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")

	dir := e.store.Dir()
	moved := dir + ".moved"
	t.Cleanup(func() {
		if _, err := os.Stat(moved); err == nil {
			os.Remove(dir)
			os.Rename(moved, dir)
		}
	})
	// While the last delegate runs, after the plan was saved: the directory
	// becomes a file, so the final save fails.
	e.exec.before = func(c call) {
		if c.Command == "ADD" && c.IfName == "net1" {
			if err := os.Rename(dir, moved); err != nil {
				t.Error(err)
				return
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	_, err := e.eng.Add(context.Background(), e.req("ADD", id, pod))
	if err == nil {
		t.Fatal("ADD succeeded although its record could not be saved")
	}
	if err := e.pub.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls := e.status.all(); len(calls) != 0 {
		t.Errorf("network-status PATCHed for an ADD that failed and was rolled back: %+v", calls)
	}
	e.wantLinks()
	e.wantLeases(e.defaultNet, 0)
	e.wantLeases("net-a", 0)
	if n := e.pub.Pending(); n != 0 {
		t.Errorf("pending status writes = %d, want 0", n)
	}
	if got := e.events.of("Warning", kube.ReasonAttachFailed); len(got) != 1 {
		t.Errorf("NetworkAttachFailed events = %+v, want 1", got)
	}
}

// A record left by a failed ADD (save failed, teardown done) or by one that
// was rolled back never carries a pending status: the retrier publishes
// nothing for it after a restart.
func TestStatusFailedAddRecordHasNoStatus(t *testing.T) {
	e, api := statusEnv(t, nil, nil)
	e.bridgeNAD("net-a")
	pod := statusPod(t, e, api, "net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.exec.fail = func(c call) error {
		if c.Command == "ADD" && c.IfName == "net1" {
			return errors.New("injected failure")
		}
		return nil
	}
	if _, err := e.eng.Add(context.Background(), e.req("ADD", id, pod)); err == nil {
		t.Fatal("ADD succeeded")
	}
	if rec := e.record(id); rec.NetworkStatus != nil || rec.Complete {
		t.Errorf("record of a failed ADD: complete=%v status=%+v", rec.Complete, rec.NetworkStatus)
	}
	runRetries(t, e.pub, fastRetries)
	time.Sleep(100 * time.Millisecond)
	if n := api.patchCount(pod); n != 0 {
		t.Errorf("%d network-status PATCHes for a failed ADD", n)
	}
}

// saveRecord writes a complete record of container id for pod with a
// network-status in state st.
func saveRecord(t *testing.T, store *state.Store, id string, pod *corev1.Pod, value string, st state.StatusState) {
	t.Helper()
	rec := &state.Record{
		ContainerID: id, Netns: "/var/run/netns/" + id,
		PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID),
		CNIArgs:  fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", pod.Namespace, pod.Name, pod.UID),
		Complete: true,
		Attachments: []state.Attachment{{Network: "cbr0", Default: true, IfName: "eth0", Phase: state.PhaseAdded,
			ConfList: json.RawMessage(`{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"bridge"}]}`)}},
	}
	if st != "" {
		rec.NetworkStatus = &state.NetworkStatus{Value: value, PodUID: string(pod.UID), State: st}
	}
	if err := store.Save(rec); err != nil {
		t.Fatal(err)
	}
}

func apiPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: podNS, Name: name, UID: types.UID("uid-" + name)}}
}

// statusValue is a network-status value naming network.
func statusValue(t *testing.T, network string) string {
	v, err := status.Encode([]status.NetworkStatus{{Name: network, Interface: "eth0", Default: true}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// recordEngine is the network-status publisher over store (no delegates
// run): multinetd started again over the records of an earlier one.
func recordEngine(t *testing.T, store *state.Store, sw netstatus.StatusWriter, obs *statusObserver, events *fakeEvents) *netstatus.Publisher {
	t.Helper()
	opts := netstatus.Options{Store: store, Writer: sw, Locks: &keyedmutex.Map{}, Events: events}
	if obs != nil {
		opts.Observer = obs
	}
	pub, err := netstatus.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// After a restart, a new retrier picks up the records whose network-status
// has not landed and writes them; landed, withdrawn and version 1 records
// are left alone; of two records of one pod only the newer sandbox's status
// is written (the older one is withdrawn).
func TestStatusRetriesResumeAfterRestart(t *testing.T) {
	store, err := state.NewStore(filepath.Join(t.TempDir(), "records"))
	if err != nil {
		t.Fatal(err)
	}
	pending, landed, withdrawn, old, twice := apiPod("pending"), apiPod("landed"), apiPod("withdrawn"), apiPod("old"), apiPod("twice")
	api := newStatusAPI(pending, landed, withdrawn, old, twice)
	saveRecord(t, store, "c-pending", pending, statusValue(t, "net-pending"), state.StatusPending)
	saveRecord(t, store, "c-landed", landed, statusValue(t, "net-landed"), state.StatusLanded)
	saveRecord(t, store, "c-withdrawn", withdrawn, statusValue(t, "net-withdrawn"), state.StatusWithdrawn)
	saveRecord(t, store, "c-twice-1", twice, statusValue(t, "older-sandbox"), state.StatusPending)
	time.Sleep(5 * time.Millisecond) // a later Updated
	saveRecord(t, store, "c-twice-2", twice, statusValue(t, "newer-sandbox"), state.StatusPending)
	// A version 1 record (written before network-status was recorded).
	v1 := fmt.Sprintf(`{"version":1,"containerID":"c-old","netns":"/x","podNamespace":%q,"podName":"old","podUID":"uid-old","attachments":[],"complete":true,"updated":"2026-01-02T03:04:05Z"}`, podNS)
	if err := os.WriteFile(filepath.Join(store.Dir(), "c-old.json"), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}

	obs := &statusObserver{}
	events := &fakeEvents{}
	eng := recordEngine(t, store, kube.NewStatusPatcher(api.client.CoreV1()), obs, events)
	runRetries(t, eng, fastRetries)
	eventually(t, "every pending status settled", func() bool {
		return eng.Pending() == 0 && obs.retries(netstatus.RetryLanded) == 2
	})

	if got := api.annotation(t, pending); got != statusValue(t, "net-pending") {
		t.Errorf("pending record's pod annotation = %q", got)
	}
	if got := api.annotation(t, twice); got != statusValue(t, "newer-sandbox") {
		t.Errorf("pod with two sandboxes: annotation = %q, want the newer sandbox's", got)
	}
	for _, p := range []*corev1.Pod{landed, withdrawn, old} {
		if n := api.patchCount(p); n != 0 {
			t.Errorf("pod %s PATCHed %d times; its record has nothing pending", p.Name, n)
		}
	}
	for id, want := range map[string]state.StatusState{
		"c-pending": state.StatusLanded, "c-landed": state.StatusLanded, "c-withdrawn": state.StatusWithdrawn,
		"c-twice-1": state.StatusWithdrawn, "c-twice-2": state.StatusLanded,
	} {
		rec, err := store.Load(id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.NetworkStatus.State != want {
			t.Errorf("record %s: state %q, want %q", id, rec.NetworkStatus.State, want)
		}
	}
	if rec, err := store.Load("c-old"); err != nil || rec.NetworkStatus != nil {
		t.Errorf("version 1 record: %+v, %v", rec, err)
	}
	if got := events.of("Normal", kube.ReasonNetworkStatusWritten); len(got) != 2 {
		t.Errorf("NetworkStatusWritten events = %+v, want 2", got)
	}
	if n := obs.retries(netstatus.RetryWithdrawn); n != 1 {
		t.Errorf("withdrawn retries = %d, want 1 (the older sandbox)", n)
	}
}

// The pod goes away before its network-status lands: the retrier gives it
// up, marks the record withdrawn and never writes it; DEL ends the retries
// of its container at once.
func TestStatusRetriesStopWhenPodGone(t *testing.T) {
	tests := []struct {
		name string
		gone func(t *testing.T, e *env, api *statusAPI, pod *corev1.Pod, id string)
		// wantState is the record's state afterwards ("gone": removed).
		wantState state.StatusState
	}{
		{
			name: "pod deleted, the API server answers NotFound",
			gone: func(t *testing.T, e *env, api *statusAPI, pod *corev1.Pod, _ string) {
				api.deletePod(t, pod)
				api.setDown(nil)
			},
			wantState: state.StatusWithdrawn,
		},
		{
			name: "pod re-created under its name, the UID precondition fails",
			gone: func(t *testing.T, e *env, api *statusAPI, pod *corev1.Pod, _ string) {
				api.deletePod(t, pod)
				again := pod.DeepCopy()
				again.UID = "uid-again"
				if err := api.client.Tracker().Add(again); err != nil {
					t.Fatal(err)
				}
				api.setDown(apierrors.NewConflict(corev1.Resource("pods"), pod.Name, errors.New("Precondition failed: UID in precondition: "+string(pod.UID)+", UID in object meta: uid-again")))
			},
			wantState: state.StatusWithdrawn,
		},
		{
			name: "the pod informer saw it deleted, the API server still down",
			gone: func(t *testing.T, e *env, api *statusAPI, pod *corev1.Pod, _ string) {
				e.pub.PodGone(pod.Namespace, pod.Name, string(pod.UID))
			},
			wantState: state.StatusWithdrawn,
		},
		{
			name: "DEL removed the record",
			gone: func(t *testing.T, e *env, api *statusAPI, pod *corev1.Pod, id string) {
				e.del(id, pod)
				if n := e.pub.Pending(); n != 0 {
					t.Errorf("pending after DEL = %d, want 0 at once", n)
				}
				api.setDown(nil)
			},
			wantState: "gone",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &statusObserver{}
			e, api := statusEnv(t, obs, nil)
			e.bridgeNAD("net-a")
			pod := statusPod(t, e, api, "net-a")
			id := "ctr-" + cnitest.UniqueName("")
			api.setDown(errAPIDown)
			e.add(id, pod)
			before := runtime.NumGoroutine()
			stop := runRetries(t, e.pub, fastRetries)
			eventually(t, "a failed retry", func() bool { return obs.retries(netstatus.RetryFailed) > 0 })

			tt.gone(t, e, api, pod, id)
			eventually(t, "the retries to end", func() bool { return e.pub.Pending() == 0 && obs.lastPending() == 0 })
			if got := e.statusState(id); got != tt.wantState {
				t.Errorf("record state %q, want %q", got, tt.wantState)
			}
			n := api.patchCount(pod)
			time.Sleep(100 * time.Millisecond)
			if m := api.patchCount(pod); m != n {
				t.Errorf("%d PATCHes after the retries ended", m-n)
			}
			if got := api.annotation(t, pod); got != "" {
				t.Errorf("annotation %q written for a pod that is gone", got)
			}
			if got := e.events.of("Normal", kube.ReasonNetworkStatusWritten); len(got) != 0 {
				t.Errorf("NetworkStatusWritten events %+v", got)
			}
			stop()
			eventually(t, "the retrier's goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
			if tt.wantState != "gone" {
				e.del(id, pod)
			}
		})
	}
}

// However many containers wait, at most Workers PATCHes run at once, the
// retrier's goroutines do not grow with them, and they all end when its
// context does; the records stay pending for the next start.
func TestStatusRetriesBounded(t *testing.T) {
	store, err := state.NewStore(filepath.Join(t.TempDir(), "records"))
	if err != nil {
		t.Fatal(err)
	}
	const containers = 40
	var pods []*corev1.Pod
	for i := range containers {
		pods = append(pods, apiPod(fmt.Sprintf("p%d", i)))
	}
	api := newStatusAPI(pods...)
	api.setDown(errAPIDown)
	api.delay = 2 * time.Millisecond
	for i, p := range pods {
		saveRecord(t, store, fmt.Sprintf("c%d", i), p, statusValue(t, "net"), state.StatusPending)
	}
	obs := &statusObserver{}
	eng := recordEngine(t, store, onePatch{api.client}, obs, &fakeEvents{})
	before := runtime.NumGoroutine()
	opts := fastRetries
	opts.Workers = 3
	stop := runRetries(t, eng, opts)
	eventually(t, "every container retried", func() bool { return obs.retries(netstatus.RetryFailed) >= 2*containers })
	if got := runtime.NumGoroutine() - before; got > opts.Workers+8 {
		t.Errorf("%d goroutines for %d waiting containers and %d workers", got, containers, opts.Workers)
	}
	if got := api.maxSeen.Load(); got > int32(opts.Workers) {
		t.Errorf("%d PATCHes at once, want at most %d", got, opts.Workers)
	}
	if n := eng.Pending(); n != containers {
		t.Errorf("pending = %d, want %d", n, containers)
	}
	stop()
	eventually(t, "the retrier's goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	for i := range containers {
		if rec, err := store.Load(fmt.Sprintf("c%d", i)); err != nil || !rec.Pending() {
			t.Fatalf("record c%d after stop: %+v, %v; want still pending", i, rec, err)
		}
	}
}

// onePatch writes an annotation with a single PATCH (kube.StatusPatcher
// without its own retries, which would only slow the test down).
type onePatch struct{ client *fake.Clientset }

func (w onePatch) PatchAnnotation(ctx context.Context, namespace, name, uid, key, value string) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": map[string]string{key: value}}})
	_, err := w.client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", kube.ErrPodGone, err)
	}
	return err
}
