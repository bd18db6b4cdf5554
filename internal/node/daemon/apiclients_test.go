package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/testing/apiservertest"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

// clientFixture is the set-up of the API client tests: the shared real API
// server, a context of a minute, an admin clientset, the namespace ns with
// a pod "web" bound to node, and a client config of multinetd's
// ServiceAccount (its RBAC from deploy/base) for newAPIClients.
type clientFixture struct {
	ns    string // the namespace: apiservertest.Unique of the one asked for
	ctx   context.Context
	admin kubernetes.Interface
	pod   *corev1.Pod
	rc    *rest.Config
}

func newClientFixture(t *testing.T, ns, node string) clientFixture {
	t.Helper()
	srv := apiservertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	ns = apiservertest.Name(t, ns)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.example/web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := srv.ServiceAccountConfig(t, "deploy/base/multinetd-rbac.yaml", "multinet-system", "multinetd")
	return clientFixture{ns: ns, ctx: ctx, admin: admin, pod: pod, rc: rc}
}

// Events have a rate limiter of their own: with multinetd's
// clients (newAPIClients, as multinetd's ServiceAccount) limited to a burst
// of 5 requests and then one per 1000 s, a burst of 8 Events on a pod uses
// up the Events' budget (5 land, 3 wait), and the pod's network-status
// PATCHes still go through at once. Were the limiter shared, the PATCH
// would have to wait 1000 s for a token, longer than its context allows,
// and fail at once (client-go's limiter refuses a wait past the deadline).
func TestEventsDoNotHoldBackStatusPatches(t *testing.T) {
	f := newClientFixture(t, "events-budget", "node-events")
	ns, ctx, admin, pod, rc := f.ns, f.ctx, f.admin, f.pod, f.rc
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

// headerLog records each request's Accept header and its answer's
// Content-Type, by URL path.
type headerLog struct {
	mu   sync.Mutex
	seen map[string][2]string
	next http.RoundTripper
}

func (h *headerLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err == nil {
		h.mu.Lock()
		h.seen[req.Method+" "+req.URL.Path] = [2]string{req.Header.Get("Accept"), resp.Header.Get("Content-Type")}
		h.mu.Unlock()
	}
	return resp, err
}

// multinetd's clients of built-in kinds (pods and their status, Events,
// ResourceSlices) ask for protobuf and get it from a real API server; the
// NAD client (a CRD, served as JSON only) asks for JSON.
func TestAPIClientsSpeakProtobuf(t *testing.T) {
	f := newClientFixture(t, "protobuf", "node-pb")
	ns, ctx, pod, rc := f.ns, f.ctx, f.pod, f.rc
	log := &headerLog{seen: map[string][2]string{}}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { log.next = rt; return log })
	clients, err := newAPIClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clients.core.Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.NewStatusPatcher(clients.core).PatchAnnotation(ctx, ns, pod.Name, string(pod.UID), "k8s.v1.cni.cncf.io/network-status", `[{"name":"pb"}]`); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.events.Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "web."},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}, Reason: "Test", Message: "protobuf",
		Type: corev1.EventTypeNormal}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.resource.ResourceSlices().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.nads.NetworkAttachmentDefinitions(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	const pb = "application/vnd.kubernetes.protobuf"
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, k := range []string{"GET /api/v1/namespaces/" + ns + "/pods/web", "PATCH /api/v1/namespaces/" + ns + "/pods/web/status",
		"POST /api/v1/namespaces/" + ns + "/events", "GET /apis/resource.k8s.io/v1/resourceslices"} {
		if h, ok := log.seen[k]; !ok || !strings.HasPrefix(h[0], pb) || h[1] != pb {
			t.Errorf("%s: Accept %q, answered as %q (seen %v), want %s", k, h[0], h[1], ok, pb)
		}
	}
	k := "GET /apis/k8s.cni.cncf.io/v1/namespaces/" + ns + "/network-attachment-definitions"
	if h := log.seen[k]; strings.Contains(h[0], pb) || !strings.HasPrefix(h[1], "application/json") {
		t.Errorf("%s: Accept %q, answered as %q, want JSON", k, h[0], h[1])
	}
}
