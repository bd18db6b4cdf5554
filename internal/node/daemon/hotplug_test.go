package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/internal/node/hotplug"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// fakePodCache stands for the pod informer's store.
type fakePodCache struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

func (f *fakePodCache) Cached(namespace, name string) (*corev1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[namespace+"/"+name]
	return p, ok
}

func (f *fakePodCache) put(p *corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[p.Namespace+"/"+p.Name] = p
}

// fakeHotPlugEngine records the networks annotation of every pod it is
// given and answers with errs in turn (nil once they run out); block, when
// set, is waited for by the first call.
type fakeHotPlugEngine struct {
	mu      sync.Mutex
	seen    []string
	errs    []error
	started chan struct{}
	block   chan struct{}
	calls   chan struct{}
}

func (f *fakeHotPlugEngine) HotPlug(_ context.Context, pod *corev1.Pod) (*hotplug.Result, error) {
	f.mu.Lock()
	first := len(f.seen) == 0
	f.seen = append(f.seen, pod.Annotations[selection.NetworksAnnotation])
	var err error
	if len(f.errs) > 0 {
		err, f.errs = f.errs[0], f.errs[1:]
	}
	f.mu.Unlock()
	if first && f.block != nil {
		close(f.started)
		<-f.block
	}
	f.calls <- struct{}{}
	return nil, err
}

func (f *fakeHotPlugEngine) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func runningPod(networks string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "vm", UID: "uid-1",
			Annotations: map[string]string{selection.NetworksAnnotation: networks}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// startLoop runs h with one worker until the test ends.
func startLoop(t *testing.T, h *hotPlugger) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(ctx, 1, func() bool { return true })
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// Hot-plug: an annotation that changes several times while a hot-plug of
// the pod runs is converged once more, to its last value (the worker reads
// the pod from the cache, the queue holds the pod once), not to each value
// in turn.
func TestHotPlugLoopConvergesToLastValue(t *testing.T) {
	pods := &fakePodCache{pods: map[string]*corev1.Pod{}}
	eng := &fakeHotPlugEngine{started: make(chan struct{}), block: make(chan struct{}), calls: make(chan struct{}, 10)}
	h := newHotPlugger(pods, eng)
	startLoop(t, h)

	prev := runningPod("net-a")
	pods.put(prev)
	h.changed(nil, prev)
	<-eng.started
	for _, v := range []string{"net-a,net-b", "net-a", "net-a,net-b", "net-a,net-c"} {
		p := runningPod(v)
		pods.put(p)
		h.changed(prev, p)
		prev = p
	}
	close(eng.block)
	<-eng.calls
	<-eng.calls
	if got := eng.got(); len(got) != 2 || got[1] != "net-a,net-c" {
		t.Errorf("hot-plugs saw %q, want the first value then only the last (net-a,net-c)", got)
	}
}

// Which informer events start a hot-plug, and which pods the worker
// leaves alone: a change of the networks annotation, the phase or
// network-status (an ADD completed) enqueues the pod, other updates do
// not; a pod that is not Running, is being deleted or uses the host
// network is not hot-plugged.
func TestHotPlugLoopFilters(t *testing.T) {
	pods := &fakePodCache{pods: map[string]*corev1.Pod{}}
	eng := &fakeHotPlugEngine{calls: make(chan struct{}, 10)}
	h := newHotPlugger(pods, eng)

	p := runningPod("net-a")
	q := p.DeepCopy()
	q.Labels = map[string]string{"app": "x"}
	q.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	h.changed(p, q)
	if n := h.queue.Len(); n != 0 {
		t.Errorf("a label and condition update enqueued %d pods", n)
	}
	for what, mod := range map[string]func(*corev1.Pod){
		"networks":       func(p *corev1.Pod) { p.Annotations[selection.NetworksAnnotation] = "net-a,net-b" },
		"network-status": func(p *corev1.Pod) { p.Annotations["k8s.v1.cni.cncf.io/network-status"] = "[]" },
		"phase":          func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
	} {
		r := q.DeepCopy()
		mod(r)
		h.changed(q, r)
		if n := h.queue.Len(); n != 1 {
			t.Errorf("a %s change: %d pods queued, want 1", what, n)
		}
		key, _ := h.queue.Get()
		h.queue.Done(key)
	}

	now := metav1.Now()
	for name, mod := range map[string]func(*corev1.Pod){
		"pending":      func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
		"deleting":     func(p *corev1.Pod) { p.DeletionTimestamp = &now },
		"host network": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
	} {
		p := runningPod("net-a")
		mod(p)
		pods.put(p)
		if retry := h.hotPlug(context.Background(), "ns1/vm"); retry {
			t.Errorf("%s: retry", name)
		}
	}
	if got := eng.got(); len(got) != 0 {
		t.Errorf("hot-plugged %q; want none of those pods", got)
	}
}

// Which hot-plug outcomes are retried: a busy sandbox and a failure to
// retry are; success, no sandbox and a refusal are not.
func TestHotPlugLoopRetries(t *testing.T) {
	pods := &fakePodCache{pods: map[string]*corev1.Pod{}}
	pods.put(runningPod("net-a"))
	for _, tc := range []struct {
		err   error
		retry bool
	}{
		{nil, false},
		{hotplug.ErrNoSandbox, false},
		{fmt.Errorf("%w: ADD in flight", hotplug.ErrBusy), true},
		{&hotplug.Error{Retry: true, Err: fmt.Errorf("delegate failed")}, true},
		{&hotplug.Error{Err: fmt.Errorf("device network")}, false},
	} {
		eng := &fakeHotPlugEngine{errs: []error{tc.err}, calls: make(chan struct{}, 1)}
		h := newHotPlugger(pods, eng)
		if got := h.hotPlug(context.Background(), "ns1/vm"); got != tc.retry {
			t.Errorf("after %v: retry %v, want %v", tc.err, got, tc.retry)
		}
	}

	// Through the queue: busy, then done.
	eng := &fakeHotPlugEngine{errs: []error{hotplug.ErrBusy}, calls: make(chan struct{}, 10)}
	h := newHotPlugger(pods, eng)
	startLoop(t, h)
	h.changed(nil, runningPod("net-a"))
	<-eng.calls
	select {
	case <-eng.calls:
	case <-time.After(30 * time.Second):
		t.Fatal("a busy sandbox was not retried")
	}
}

// The hot-plug metrics count operations by result and observe durations.
func TestMetricsHotPlug(t *testing.T) {
	m := newMetrics()
	m.HotPlugDone(hotplug.Succeeded, 20*time.Millisecond)
	m.HotPlugDone(hotplug.Failed, time.Second)
	for _, r := range []string{hotplug.Succeeded, hotplug.Failed} {
		if v, _ := metricValue(t, m, "multinet_hotplug_operations_total", map[string]string{"result": r}); v != 1 {
			t.Errorf("hotplug_operations_total{result=%s} = %v, want 1", r, v)
		}
		if v, _ := metricValue(t, m, "multinet_hotplug_duration_seconds", map[string]string{"result": r}); v != 1 {
			t.Errorf("hotplug_duration_seconds{result=%s} count = %v, want 1", r, v)
		}
	}
	if v, ok := metricValue(t, m, "multinet_hotplug_operations_total", map[string]string{"result": hotplug.Refused}); !ok || v != 0 {
		t.Errorf("hotplug_operations_total{result=refused} = %v (exists %v), want 0", v, ok)
	}
}

// fakePodEvents is a pod cache that records the handlers registered on it.
type fakePodEvents struct {
	fakePodCache
	handlers []func(old, pod *corev1.Pod)
}

func (f *fakePodEvents) OnChange(h func(old, pod *corev1.Pod)) error {
	f.handlers = append(f.handlers, h)
	return nil
}

// disableHotPlug: with it, multinetd registers no pod handler and runs no
// hot-plug loop, so a changed annotation changes nothing; without it, a
// changed annotation reaches the engine.
func TestStartHotPlugDisabled(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disableHotPlug=%v", disabled), func(t *testing.T) {
			pods := &fakePodEvents{fakePodCache: fakePodCache{pods: map[string]*corev1.Pod{}}}
			eng := &fakeHotPlugEngine{calls: make(chan struct{}, 10)}
			h, err := startHotPlug(Config{DisableHotPlug: disabled}, pods, eng)
			if err != nil {
				t.Fatal(err)
			}
			if disabled {
				if h != nil || len(pods.handlers) != 0 {
					t.Fatalf("hot-plug disabled: got a loop %v and %d pod handlers, want none", h != nil, len(pods.handlers))
				}
				return
			}
			if h == nil || len(pods.handlers) != 1 {
				t.Fatalf("hot-plug enabled: loop %v, %d pod handlers; want a loop and 1 handler", h != nil, len(pods.handlers))
			}
			startLoop(t, h)
			old, now := runningPod("net-a"), runningPod("net-a,net-b")
			pods.put(now)
			pods.handlers[0](old, now)
			select {
			case <-eng.calls:
			case <-time.After(10 * time.Second):
				t.Fatal("a changed annotation did not reach the hot-plug engine")
			}
			if got := eng.got(); len(got) != 1 || got[0] != "net-a,net-b" {
				t.Errorf("hot-plugged %q, want [net-a,net-b]", got)
			}
		})
	}
}
