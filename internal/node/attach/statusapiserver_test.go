package attach

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/netstatus"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/internal/testing/cnitest"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// The network-status write (synchronous, or asynchronous from the record:
// multinetd's asyncStatus, docs/decisions/status.md) against a real API
// server (internal/testing/apiservertest: etcd and kube-apiserver) with real pods
// and RBAC: the PATCH is multinetd's (kube.StatusPatcher), the delegates
// are real (bridge, host-local in a test netns).

// realAPI is the test's view of the real API server: an admin client.
type realAPI struct {
	srv   *apiservertest.Server
	admin kubernetes.Interface
}

func newRealAPI(t *testing.T) *realAPI {
	t.Helper()
	srv := apiservertest.Shared(t)
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	_, err := admin.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return &realAPI{srv: srv, admin: admin}
}

// writer returns a StatusWriter of a new user whom RBAC allows nothing yet,
// and grant, which allows it to PATCH pods/status (what multinetd's
// network-status write needs).
func (r *realAPI) writer(t *testing.T) (sw netstatus.StatusWriter, grant func()) {
	t.Helper()
	user := "status-writer-" + cnitest.UniqueName("")
	client := corev1client.NewForConfigOrDie(r.srv.ConfigAs(user))
	grant = func() {
		t.Helper()
		ctx := context.Background()
		if _, err := r.admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = r.admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
			_ = r.admin.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
		})
	}
	return kube.NewStatusPatcher(client), grant
}

// pod creates a pod selecting networks in the API server and registers it
// with e (the engine's pod lookup); it is deleted when the test ends.
func (r *realAPI) pod(t *testing.T, e *env, networks string) *corev1.Pod {
	t.Helper()
	p, err := r.admin.CoreV1().Pods(podNS).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + cnitest.UniqueName(""), Namespace: podNS,
			Annotations: map[string]string{selection.NetworksAnnotation: networks}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.pods.add(p.DeepCopy())
	t.Cleanup(func() { r.deletePod(t, p) })
	return p
}

func (r *realAPI) deletePod(t *testing.T, p *corev1.Pod) {
	var grace int64
	err := r.admin.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// annotation is pod's network-status in the API server ("" when it has
// none, or the pod is gone).
func (r *realAPI) annotation(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	got, err := r.admin.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.Annotations[status.Annotation]
}

// waitBackground waits for the engine's background work (an asynchronous
// status write's first attempt).
func waitBackground(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := e.pub.Wait(ctx); err != nil {
		t.Fatalf("engine background work: %v", err)
	}
}

// asyncStatus: false. When ADD returns, the annotation is on the pod in the
// API server and the record says landed.
func TestStatusRealAPIServerSync(t *testing.T) {
	r := newRealAPI(t)
	e := newEnv(t, func(o *envOptions) { o.Status = kube.NewStatusPatcher(corev1client.NewForConfigOrDie(r.srv.Config())) })
	e.bridgeNAD("net-a")
	pod := r.pod(t, e, "net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	rec := e.record(id)
	if rec.NetworkStatus == nil || rec.NetworkStatus.State != state.StatusLanded {
		t.Fatalf("record network-status %+v when ADD returned, want landed", rec.NetworkStatus)
	}
	if got := r.annotation(t, pod); got != rec.NetworkStatus.Value {
		t.Errorf("annotation when ADD returned = %q, want the record's %q", got, rec.NetworkStatus.Value)
	}
}

// asyncStatus: true. With the pod's PATCH held back (its publish lock
// taken), ADD returns with the attachments made and the record pending,
// and the pod has no annotation; once released, the PATCH lands in the API
// server and the record says landed.
func TestStatusRealAPIServerAsyncLandsAfterAdd(t *testing.T) {
	r := newRealAPI(t)
	held := &heldWriter{w: kube.NewStatusPatcher(corev1client.NewForConfigOrDie(r.srv.Config())), gate: make(chan struct{})}
	e := newEnv(t, func(o *envOptions) {
		o.Status = held
		o.AsyncStatus = true
	})
	e.bridgeNAD("net-a")
	pod := r.pod(t, e, "net-a")
	id := "ctr-" + cnitest.UniqueName("")
	unlock := func() { close(held.gate) }
	released := false
	defer func() {
		if !released {
			unlock()
		}
	}()
	select {
	case err := <-addAsync(e, id, pod):
		if err != nil {
			t.Fatalf("ADD: %v", err)
		}
	case <-time.After(guard):
		t.Fatal("ADD did not return while its network-status PATCH was held back")
	}
	e.wantLinks("eth0", "net1")
	rec := e.record(id)
	if !rec.Complete || !rec.Pending() {
		t.Fatalf("record complete=%v status=%+v when ADD returned; want complete, status pending", rec.Complete, rec.NetworkStatus)
	}
	if got := r.annotation(t, pod); got != "" {
		t.Fatalf("annotation %q before the PATCH was let through", got)
	}
	unlock()
	released = true
	waitBackground(t, e)
	rec = e.record(id)
	if rec.NetworkStatus.State != state.StatusLanded {
		t.Fatalf("record status %q after the write, want landed", rec.NetworkStatus.State)
	}
	if got := r.annotation(t, pod); got != rec.NetworkStatus.Value {
		t.Errorf("annotation = %q, want the record's %q", got, rec.NetworkStatus.Value)
	}
}

// asyncStatus: true. multinetd stops (crash) with a network-status not
// written (the API server refused its PATCH); a new engine over the same
// records resumes the write from the record, and it lands.
func TestStatusRealAPIServerRestartResumes(t *testing.T) {
	r := newRealAPI(t)
	sw, grant := r.writer(t)
	e := newEnv(t, func(o *envOptions) { o.Status = sw; o.AsyncStatus = true })
	e.bridgeNAD("net-a")
	pod := r.pod(t, e, "net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	waitBackground(t, e) // its first attempt: forbidden
	if !e.record(id).Pending() {
		t.Fatalf("record status %+v after a refused PATCH, want pending", e.record(id).NetworkStatus)
	}
	// The first engine is gone (never runs its retrier); a new one starts.
	grant()
	eng := recordEngine(t, e.store, sw, nil, &fakeEvents{})
	runRetries(t, eng, fastRetries)
	want := e.record(id).NetworkStatus.Value
	eventually(t, "the resumed network-status lands and its retries end", func() bool {
		return r.annotation(t, pod) == want && e.statusState(id) == state.StatusLanded && eng.Pending() == 0
	})
}

// asyncStatus: true. The pod is deleted while its network-status write is
// being retried: the API server's answer (the pod is gone) ends the
// retries and the record says withdrawn.
func TestStatusRealAPIServerDeletedPodStopsRetries(t *testing.T) {
	r := newRealAPI(t)
	sw, grant := r.writer(t)
	e := newEnv(t, func(o *envOptions) { o.Status = sw; o.AsyncStatus = true })
	runRetries(t, e.pub, fastRetries)
	e.bridgeNAD("net-a")
	pod := r.pod(t, e, "net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	waitBackground(t, e)
	if n := e.pub.Pending(); n != 1 {
		t.Fatalf("%d statuses pending after a refused PATCH, want 1", n)
	}
	r.deletePod(t, pod)
	grant() // the next PATCH is allowed, and finds no pod
	eventually(t, "the retries of a deleted pod end", func() bool {
		return e.pub.Pending() == 0 && e.statusState(id) == state.StatusWithdrawn
	})
}

// asyncStatus: true. DEL of a container whose network-status is pending
// ends its retries: once the API server accepts PATCHes again, another
// pod's pending status lands through the same retrier, and the deleted
// container's pod (still there) never gets its stale annotation.
func TestStatusRealAPIServerDelLeavesNoStalePatch(t *testing.T) {
	r := newRealAPI(t)
	sw, grant := r.writer(t)
	e := newEnv(t, func(o *envOptions) { o.Status = sw; o.AsyncStatus = true })
	runRetries(t, e.pub, fastRetries)
	e.bridgeNAD("net-a")
	gone, kept := r.pod(t, e, "net-a"), r.pod(t, e, "net-a")
	idGone, idKept := "ctr-"+cnitest.UniqueName(""), "ctr-"+cnitest.UniqueName("")
	e.add(idGone, gone)
	// The other pod's sandbox: a netns of its own.
	req := e.req(api.CmdAdd, idKept, kept)
	req.Netns = cnitest.NewNS(t).Path()
	if _, err := e.eng.Add(context.Background(), req); err != nil {
		t.Fatalf("ADD %s: %v", idKept, err)
	}
	waitBackground(t, e)
	if n := e.pub.Pending(); n != 2 {
		t.Fatalf("%d statuses pending after refused PATCHes, want 2", n)
	}
	e.del(idGone, gone)
	if n := e.pub.Pending(); n != 1 {
		t.Fatalf("%d statuses pending after DEL, want 1", n)
	}
	if s := e.statusState(idGone); s != "gone" {
		t.Fatalf("record of the deleted container: status %q, want no record", s)
	}
	grant()
	want := e.record(idKept).NetworkStatus.Value
	eventually(t, "the other pod's pending status lands", func() bool {
		return r.annotation(t, kept) == want && e.pub.Pending() == 0
	})
	if got := r.annotation(t, gone); got != "" {
		t.Errorf("the deleted container's pod got network-status %q after its DEL", got)
	}
}

// heldWriter holds every PATCH back until gate is closed (the test's
// unlock), as a held publish lock of the pod would.
type heldWriter struct {
	w    netstatus.StatusWriter
	gate chan struct{}
}

func (h *heldWriter) PatchAnnotation(ctx context.Context, namespace, name, uid, key, value string) error {
	<-h.gate // as the pod's publish lock held: the PATCH's own timeout starts after it
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return h.w.PatchAnnotation(pctx, namespace, name, uid, key, value)
}
