package attach

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// patchGate holds every network-status PATCH of a statusAPI until release
// is called, and tells, at the moment the first PATCH reached the API
// server, how many AddedInterface Events the ADD had posted (ADD posts them
// after it has published network-status, just before it returns).
type patchGate struct {
	entered      chan struct{}
	eventsAtSend int
	release      func()
}

func gatePatches(api *statusAPI, events *fakeEvents) *patchGate {
	g := &patchGate{entered: make(chan struct{})}
	open := make(chan struct{})
	var once, first sync.Once
	g.release = func() { once.Do(func() { close(open) }) }
	api.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		first.Do(func() {
			g.eventsAtSend = len(events.of(corev1.EventTypeNormal, kube.ReasonAddedInterface))
			close(g.entered)
		})
		<-open
		return false, nil, nil // on to statusAPI's reactor and the tracker
	})
	return g
}

// addAsync runs ADD of container id in the background; its error arrives on
// the returned channel.
func addAsync(e *env, id string, pod *corev1.Pod) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
		done <- err
	}()
	return done
}

// guard bounds a wait that would otherwise hang the test (not a speed
// assertion: the event either comes or the code under test is wrong).
const guard = 30 * time.Second

// asyncStatus: false (the default). The ADD's network-status PATCH reaches
// the API server before the ADD has finished (no AddedInterface Event yet),
// the ADD waits for it, and when the ADD returns the annotation is on the pod
// and the record says landed: a container reading the annotation when it
// starts sees it.
func TestStatusWriteSyncWaitsForPatch(t *testing.T) {
	e, api := statusEnv(t, nil, nil)
	e.bridgeNAD("net-a")
	pod := statusPod(t, e, api, "net-a")
	id := "ctr-" + cnitest.UniqueName("")
	g := gatePatches(api, e.events)
	t.Cleanup(g.release)

	done := addAsync(e, id, pod)
	select {
	case <-g.entered:
	case err := <-done:
		t.Fatalf("ADD returned (%v) before its network-status PATCH reached the API server", err)
	case <-time.After(guard):
		t.Fatal("no network-status PATCH")
	}
	if g.eventsAtSend != 0 {
		t.Errorf("the PATCH was sent after ADD posted %d AddedInterface Events, want before ADD finished", g.eventsAtSend)
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatalf("ADD: %v", err)
	}
	rec := e.record(id)
	if rec.NetworkStatus == nil || rec.NetworkStatus.State != state.StatusLanded {
		t.Fatalf("record network-status %+v when ADD returned, want landed", rec.NetworkStatus)
	}
	if got := api.annotation(t, pod); got != rec.NetworkStatus.Value {
		t.Errorf("annotation when ADD returned = %q, want the record's %q", got, rec.NetworkStatus.Value)
	}
}

// asyncStatus: true. With every PATCH held by the API server, ADD returns
// success once the attachments are made and the record (status pending) is
// saved; the PATCH is sent only after ADD finished, and once the API server
// answers the annotation lands and the record says so.
func TestStatusWriteAsyncReturnsBeforePatch(t *testing.T) {
	e, api := statusEnv(t, nil, func(o *envOptions) { o.AsyncStatus = true })
	e.bridgeNAD("net-a")
	pod := statusPod(t, e, api, "net-a")
	id := "ctr-" + cnitest.UniqueName("")
	g := gatePatches(api, e.events)
	t.Cleanup(g.release)

	select {
	case err := <-addAsync(e, id, pod):
		if err != nil {
			t.Fatalf("ADD: %v", err)
		}
	case <-time.After(guard):
		t.Fatal("ADD did not return while its network-status PATCH was held")
	}
	e.wantLinks("eth0", "net1")
	rec := e.record(id)
	if !rec.Complete || !rec.Pending() || rec.NetworkStatus.PodUID != string(pod.UID) {
		t.Fatalf("record complete=%v status=%+v when ADD returned; want complete, status pending", rec.Complete, rec.NetworkStatus)
	}
	if got := api.annotation(t, pod); got != "" {
		t.Fatalf("annotation %q while the PATCH is held", got)
	}

	select {
	case <-g.entered:
	case <-time.After(guard):
		t.Fatal("no network-status PATCH after ADD returned")
	}
	if g.eventsAtSend != 1 {
		t.Errorf("the PATCH was sent after %d AddedInterface Events, want after ADD finished (1)", g.eventsAtSend)
	}
	g.release()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := e.pub.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.statusState(id); st != state.StatusLanded {
		t.Fatalf("record network-status state %q after the PATCH, want landed", st)
	}
	if got := api.annotation(t, pod); got != rec.NetworkStatus.Value {
		t.Errorf("annotation %q, want the record's %q", got, rec.NetworkStatus.Value)
	}
}

// BenchmarkAddStatusWrite is one pod's ADD (default network and one bridge
// attachment, real plugins) with network-status written synchronously and
// asynchronously, against a fake API server whose PATCH takes latency (the
// ≈5 ms measured on the local cluster, docs/bench.md). Each iteration
// includes the DEL (not timed) that makes the next ADD start from nothing.
func BenchmarkAddStatusWrite(b *testing.B) {
	for _, latency := range []time.Duration{5 * time.Millisecond, 50 * time.Millisecond} {
		for _, async := range []bool{false, true} {
			mode := "sync"
			if async {
				mode = "async"
			}
			b.Run(fmt.Sprintf("patch=%v/%s", latency, mode), func(b *testing.B) {
				api := newStatusAPI()
				api.delay = latency
				e := newEnv(b, func(o *envOptions) {
					o.Status = kube.NewStatusPatcher(api.client.CoreV1())
					o.AsyncStatus = async
				})
				e.bridgeNAD("net-a")
				pod := e.podWithNetworks("net-a")
				if err := api.client.Tracker().Add(pod.DeepCopy()); err != nil {
					b.Fatal(err)
				}
				id := "ctr-" + cnitest.UniqueName("")
				for b.Loop() {
					e.add(id, pod)
					b.StopTimer()
					if err := e.pub.Wait(context.Background()); err != nil {
						b.Fatal(err)
					}
					e.del(id, pod)
					b.StartTimer()
				}
			})
		}
	}
}
