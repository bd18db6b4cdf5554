package ipam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CNI GC with cni.dev/valid-attachments releases this node's
// attachment-owned allocations of the network that are not listed, and
// nothing else: not the listed ones, not another node's, not another
// network's in the same pool, not a claim's, not one younger than minAge.
func TestGC(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ns := name(t, "ns")
	e.namespace(ns)
	pool := name(t, "p")
	ranges := `"pool":%q,"ranges":[[{"subnet":"10.40.0.0/24"}]]`
	cfg := config(t, "net-a", fmt.Sprintf(ranges, pool))
	other := config(t, "net-b", fmt.Sprintf(ranges, pool)) // the same pool, another network
	if cfg.Pool != pool || other.Pool != pool {
		t.Fatalf("pools %s %s", cfg.Pool, other.Pool)
	}
	nodeA, nodeB := e.allocator(t, "node-a", false, nil), e.allocator(t, "node-b", false, nil)
	alloc := func(a *Allocator, c *Config, r Request) string {
		t.Helper()
		al, err := a.Allocate(ctx, c, r)
		if err != nil {
			t.Fatal(err)
		}
		return al.Addresses[0].Prefix.String()
	}
	valid := alloc(nodeA, cfg, req(t, "valid", "net1"))
	stale1 := alloc(nodeA, cfg, req(t, "stale1", "net1"))
	stale2 := alloc(nodeA, cfg, req(t, "valid", "net2")) // a valid container, another interface
	elsewhere := alloc(nodeB, cfg, req(t, "other-node", "net1"))
	otherNet := alloc(nodeA, other, req(t, "other-net", "net1"))
	e.claim(ns, "c")
	cr := req(t, "claimed", "net1")
	cr.Pod, cr.Claim = &PodRef{Namespace: ns, Name: "p"}, "c"
	claimed := alloc(nodeA, cfg, cr)

	// Too young: nothing goes.
	keep := []GCAttachment{{ContainerID: name(t, "valid"), IfName: "net1"}}
	e.syncWatchCache(pool)
	if n, err := nodeA.GC(ctx, cfg, keep, time.Hour); err != nil || n != 0 {
		t.Fatalf("GC with minAge 1h released %d, %v", n, err)
	}
	e.syncWatchCache(pool)
	n, err := nodeA.GC(ctx, cfg, keep, 0)
	if err != nil || n != 2 {
		t.Fatalf("GC released %d, %v; want 2", n, err)
	}
	want := []string{valid, elsewhere, otherNet, claimed}
	slices.Sort(want)
	if got := e.poolAddresses(pool); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v (released %s %s)", got, want, stale1, stale2)
	}
}

// Reconcile releases the allocations of pods that no longer exist (deleted,
// or re-created under the same name: another UID), keeps those of live
// pods, of mirror pods by their runtime UID, and of attachments without a
// pod; Node restricts it to one node's allocations.
func TestReconcileGonePods(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ns := name(t, "ns")
	e.namespace(ns)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.41.0.0/24"}],[{"subnet":"fd41::/64"}]]`)
	nodeA, nodeB := e.allocator(t, "node-a", false, nil), e.allocator(t, "node-b", false, nil)
	live := e.pod(ns, "live")
	deleted := e.pod(ns, "deleted")
	recreated := e.pod(ns, "recreated")
	onB := e.pod(ns, "on-b")
	must := func(a *Allocator, r Request) {
		t.Helper()
		if _, err := a.Allocate(ctx, cfg, r); err != nil {
			t.Fatal(err)
		}
	}
	must(nodeA, podReq(t, "live", "net1", live))
	must(nodeA, podReq(t, "deleted", "net1", deleted))
	must(nodeA, podReq(t, "recreated", "net1", recreated))
	must(nodeB, podReq(t, "on-b", "net1", onB))
	must(nodeA, req(t, "no-pod", "net1"))
	mirror := podReq(t, "mirror", "net1", live)
	mirror.Pod.Name = "static"
	static := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "static", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "runtime-uid"}},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := e.kube.CoreV1().Pods(ns).Create(ctx, static, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mirror.Pod.UID = "runtime-uid"
	must(nodeA, mirror)

	for _, p := range []string{"deleted", "recreated", "on-b"} {
		if err := e.kube.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	e.pod(ns, "recreated")
	owners := LiveOwners{Pods: e.pods, Claims: e.cs.K8sCniCncfIoV1alpha1()}

	// Node A's pass leaves node B's allocations alone.
	e.syncWatchCache(pool)
	res, err := nodeA.Reconcile(ctx, ReconcileOptions{Owners: owners, Node: "node-a"})
	if err != nil || res.ReleasedPod != 4 {
		t.Errorf("node-a reconcile: %+v, %v; want 4 released (2 pods x 2 families)", res, err)
	}
	left := map[string]int{}
	for _, o := range e.poolObjects(pool) {
		left[o.Spec.Owner.ContainerID]++
	}
	wantLeft := map[string]int{name(t, "live"): 2, name(t, "on-b"): 2, name(t, "no-pod"): 2, name(t, "mirror"): 2}
	if !mapsEqual(left, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
	// A pass over every node (a dead node's allocations) releases node B's.
	e.syncWatchCache(pool)
	if res, err := nodeA.Reconcile(context.Background(), ReconcileOptions{Owners: owners}); err != nil || res.ReleasedPod != 2 {
		t.Errorf("cluster reconcile: %+v, %v; want node-b's 2", res, err)
	}
	// MinAge spares what is younger.
	must(nodeA, podReq(t, "young", "net1", deleted))
	e.syncWatchCache(pool)
	if res, err := nodeA.Reconcile(ctx, ReconcileOptions{Owners: owners, MinAge: time.Hour}); err != nil || res.ReleasedPod != 0 {
		t.Errorf("reconcile with MinAge: %+v, %v", res, err)
	}
	// An owner that cannot be checked is counted failed, never released.
	e.syncWatchCache(pool)
	res, err = nodeA.Reconcile(ctx, ReconcileOptions{Owners: unreachableOwners{}})
	if err == nil || res.Checked == 0 || res.Failed != res.Checked || res.ReleasedPod != 0 {
		t.Errorf("reconcile with unreachable owners: %+v, %v; want every checked allocation failed, none released", res, err)
	}
}

// unreachableOwners cannot say whether any owner exists (an API server
// that does not answer).
type unreachableOwners struct{}

func (unreachableOwners) PodExists(context.Context, string, string, string) (bool, error) {
	return false, errors.New("pods: connection refused")
}

func (unreachableOwners) ClaimExists(context.Context, string, string, string) (bool, error) {
	return false, errors.New("IPAMClaims: connection refused")
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
