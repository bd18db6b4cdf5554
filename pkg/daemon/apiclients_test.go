package daemon

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/apiservertest"
	"github.com/multinet/multinet/pkg/kube"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

// Events have a rate limiter of their own (issue 14): with multinetd's
// clients (newAPIClients, as multinetd's ServiceAccount) limited to a burst
// of 5 requests and then one per 1000 s, a burst of 8 Events on a pod uses
// up the Events' budget (5 land, 3 wait), and the pod's network-status
// PATCHes still go through at once. Were the limiter shared, the PATCH
// would have to wait 1000 s for a token, longer than its context allows,
// and fail at once (client-go's limiter refuses a wait past the deadline).
func TestEventsDoNotHoldBackStatusPatches(t *testing.T) {
	srv := apiservertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	const ns = "events-budget"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{NodeName: "node-events", Containers: []corev1.Container{{Name: "c", Image: "registry.example/web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	rc := srv.ServiceAccountConfig(t, "deploy/base/multinetd-rbac.yaml", "multinet-system", "multinetd")
	const burst = 5
	rc.QPS, rc.Burst = 0.001, burst
	clients, err := newAPIClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	evCtx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	events := kube.NewEvents(evCtx, clients.events, "multinetd", "node-events")
	defer events.Shutdown()
	for i := range burst + 3 {
		events.Warning(pod, kube.ReasonAttachFailed, "attempt %d failed", i)
	}
	// The Events' budget is used up: burst Events landed; the others wait.
	sel := fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String()
	landed := 0
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err
		}
		landed = len(l.Items)
		return landed >= burst, nil
	}); err != nil {
		t.Fatalf("%d Events landed, want %d: %v", landed, burst, err)
	}

	p := kube.NewStatusPatcher(clients.core)
	for i := range burst {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := p.PatchAnnotation(pctx, ns, pod.Name, string(pod.UID), "k8s.v1.cni.cncf.io/network-status", fmt.Sprintf(`[{"name":"n%d"}]`, i))
		cancel()
		if err != nil {
			t.Fatalf("network-status PATCH %d with the Events' budget used up: %v", i, err)
		}
	}
	got, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`[{"name":"n%d"}]`, burst-1); got.Annotations["k8s.v1.cni.cncf.io/network-status"] != want {
		t.Errorf("network-status = %q, want %q", got.Annotations["k8s.v1.cni.cncf.io/network-status"], want)
	}
	l, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != burst {
		t.Errorf("%d Events landed, want %d: the Events' client was not limited to its burst", len(l.Items), burst)
	}
}
