package attach

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/hotplug"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/policysync"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/policy"
	"github.com/multinet/multinet/pkg/spec/status"
)

// recordingEnforcer is a PolicyEnforcer that records what it is called
// with and, on Enforce, what the sandbox looked like at that moment.
type recordingEnforcer struct {
	e   *env
	err error // what Enforce returns

	mu       sync.Mutex
	enforced []enforceCall
	released [][2]string // container ID, netns
}

type enforceCall struct {
	pod      string
	netns    string
	ifNames  []string // the record's added attachments
	planned  []string // the record's planned attachments (a hot-plug's, before its delegates)
	links    []string // the interfaces in the netns then
	complete bool     // the stored record was complete then (ADD had answered)
}

// newPolicyEnv is an env whose engine and hot-plug have a
// recordingEnforcer returning err.
func newPolicyEnv(t *testing.T, err error) (*env, *recordingEnforcer) {
	rec := &recordingEnforcer{err: err}
	e := newEnv(t, func(o *envOptions) { o.NetworkPolicy = rec })
	rec.e = e
	return e, rec
}

func (r *recordingEnforcer) Enforce(_ context.Context, pod *corev1.Pod, rec *state.Record) error {
	c := enforceCall{netns: rec.Netns, links: r.e.links()}
	if pod != nil {
		c.pod = pod.Namespace + "/" + pod.Name
	}
	for _, a := range rec.Attachments {
		switch a.Phase {
		case state.PhaseAdded:
			c.ifNames = append(c.ifNames, a.IfName)
		case state.PhasePlanned:
			c.planned = append(c.planned, a.IfName)
		}
	}
	if stored, err := r.e.store.Load(rec.ContainerID); err == nil {
		c.complete = stored.Complete
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enforced = append(r.enforced, c)
	return r.err
}

func (r *recordingEnforcer) Release(_ context.Context, containerID, netns string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, [2]string{containerID, netns})
	return nil
}

func (r *recordingEnforcer) calls() ([]enforceCall, [][2]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.enforced), slices.Clone(r.released)
}

// TestAddEnforcesNetworkPolicyBeforeAnswering: ADD hands the sandbox to
// the network policy enforcer after every delegate succeeded (the
// interfaces are in the netns, the record lists them added) and before it
// answers (the stored record is not complete yet), so that a pod selected
// at creation is never reachable without its rules; DEL and hot-plug call
// it too. Without the hook no call is made.
func TestAddEnforcesNetworkPolicyBeforeAnswering(t *testing.T) {
	e, rec := newPolicyEnv(t, nil)
	e.bridgeNAD("blue")
	pod := e.podWithNetworks("blue")
	e.add("c1", pod)

	enforced, _ := rec.calls()
	if len(enforced) != 1 {
		t.Fatalf("Enforce called %d times during ADD, want 1", len(enforced))
	}
	c := enforced[0]
	if c.pod != pod.Namespace+"/"+pod.Name || c.netns != e.netns.Path() {
		t.Errorf("Enforce got pod %q netns %q, want %s/%s in %s", c.pod, c.netns, pod.Namespace, pod.Name, e.netns.Path())
	}
	if !slices.Equal(c.ifNames, []string{"eth0", "net1"}) || !slices.Contains(c.links, "net1") {
		t.Errorf("at Enforce the record had %q added and the netns %q: want the delegates done (eth0, net1)", c.ifNames, c.links)
	}
	if c.complete {
		t.Error("at Enforce the stored record was already complete: the rules must be in place before ADD answers")
	}

	// A hot-plug puts the rules in place for the new attachment before its
	// delegate makes the interface (the record has it planned, the netns
	// has no net2 yet), and again once it is added.
	e.bridgeNAD("green")
	pod, _ = e.mustHotPlug(pod, "blue,green")
	enforced, _ = rec.calls()
	if len(enforced) != 3 {
		t.Fatalf("after hot-plugging green: Enforce calls %+v, want two more (before and after its delegate)", enforced)
	}
	if before := enforced[1]; !slices.Equal(before.planned, []string{"net2"}) || slices.Contains(before.links, "net2") {
		t.Errorf("first hot-plug Enforce: planned %q, links %q; want net2 planned and not yet in the netns", before.planned, before.links)
	}
	if after := enforced[2]; !slices.Contains(after.ifNames, "net2") || len(after.planned) != 0 {
		t.Errorf("second hot-plug Enforce: added %q, planned %q; want net2 added", after.ifNames, after.planned)
	}

	e.del("c1", pod)
	if _, released := rec.calls(); !slices.Equal(released, [][2]string{{"c1", e.netns.Path()}}) {
		t.Errorf("Release calls %q, want [[c1 %s]]", released, e.netns.Path())
	}
}

// TestAddFailsWhenPolicyCannotBeEnforced: when the rules of a pod cannot
// be put in place, ADD fails with CNI error 11 (try again later) and tears
// its attachments down: the pod never runs unprotected.
func TestAddFailsWhenPolicyCannotBeEnforced(t *testing.T) {
	e, _ := newPolicyEnv(t, errors.New("nftables: boom"))
	e.bridgeNAD("blue")
	pod := e.podWithNetworks("blue")
	_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, "c1", pod))
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater {
		t.Fatalf("ADD = %v, want CNI error 11", err)
	}
	e.wantLinks() // every attachment torn down
	if r, err := e.store.Load("c1"); err != nil || len(r.Attachments) != 0 || r.Complete {
		t.Errorf("record after the failed ADD: %+v, %v; want one with no attachments", r, err)
	}
}

// TestPolicyTargetIsThePublishedStatus: the pod multinetd computes rules
// for during ADD (policysync.TargetPod, from the record) is the pod
// kubectl multinet explain computes them for (policy.PodFromObject of the
// network-status ADD publishes), attachment for attachment: explain cannot
// show rules other than those multinetd writes.
func TestPolicyTargetIsThePublishedStatus(t *testing.T) {
	var rec *state.Record
	enf := enforcerFunc(func(_ context.Context, _ *corev1.Pod, r *state.Record) error { rec = r; return nil })
	e := newEnv(t, func(o *envOptions) { o.NetworkPolicy = enf })
	e.bridgeNAD("blue")
	e.bridgeNAD("green")
	pod := e.podWithNetworks(`[{"name":"blue"},{"name":"green","interface":"g0","default-route":[]}]`)
	pod.Labels = map[string]string{"app": "web"}
	e.add("c1", pod)

	fromRecord, err := policysync.TargetPod(pod, rec)
	if err != nil {
		t.Fatal(err)
	}
	published := pod.DeepCopy()
	value, err := status.Encode(e.networkStatus(pod))
	if err != nil {
		t.Fatal(err)
	}
	published.Annotations[status.Annotation] = value
	fromStatus, err := policy.PodFromObject(published)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromRecord.Attachments) != 2 || !reflect.DeepEqual(fromRecord, fromStatus) {
		t.Errorf("multinetd's target %+v\nexplain's target  %+v", fromRecord, fromStatus)
	}
}

type enforcerFunc func(ctx context.Context, pod *corev1.Pod, rec *state.Record) error

func (f enforcerFunc) Enforce(ctx context.Context, pod *corev1.Pod, rec *state.Record) error {
	return f(ctx, pod, rec)
}
func (enforcerFunc) Release(context.Context, string, string) error { return nil }

// TestHotPlugFailsWhenPolicyCannotBeEnforcedFirst: when the rules of the
// hot-plugged interfaces cannot be put in place before their delegates
// run, nothing is attached (no delegate ADD, no interface, not in the
// record), the pod gets a HotPlugFailed Warning and the hot-plug fails to
// be retried; the interfaces the pod had are kept.
func TestHotPlugFailsWhenPolicyCannotBeEnforcedFirst(t *testing.T) {
	e, rec := newPolicyEnv(t, nil)
	e.bridgeNAD("blue")
	pod := e.podWithNetworks("blue")
	e.add("c1", pod)
	e.bridgeNAD("green")
	e.exec.reset()
	rec.mu.Lock()
	rec.err = errors.New("nftables: boom")
	rec.mu.Unlock()

	_, _, err := e.hotPlug(pod, "blue,green")
	var hpErr *hotplug.Error
	if !errors.As(err, &hpErr) || !hpErr.Retry {
		t.Fatalf("hot-plug = %v, want a hotplug.Error to retry", err)
	}
	if calls := e.exec.of(""); len(calls) != 0 {
		t.Errorf("delegate calls %+v, want none: the rules were not in place", calls)
	}
	e.wantLinks("eth0", "net1")
	r, err := e.store.Load("c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Attachments {
		if a.Network == podNS+"/green" {
			t.Errorf("record keeps green (%s, %s) after the refused hot-plug", a.IfName, a.Phase)
		}
	}
	if len(e.events.of(corev1.EventTypeWarning, kube.ReasonHotPlugFailed)) == 0 {
		t.Error("no HotPlugFailed Warning Event")
	}
}
