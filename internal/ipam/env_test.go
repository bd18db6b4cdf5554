package ipam

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	claimv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

// env is a test's view of the shared real API server.
type env struct {
	t    testing.TB
	cfg  *rest.Config
	cs   versioned.Interface
	kube kubernetes.Interface
	// pods is the typed client multinetd reads pods with.
	pods corev1client.PodsGetter
}

func newEnv(t testing.TB) *env {
	t.Helper()
	cfg := apiservertest.Shared(t).Config()
	return &env{t: t, cfg: cfg, cs: versioned.NewForConfigOrDie(cfg), kube: kubernetes.NewForConfigOrDie(cfg), pods: corev1client.NewForConfigOrDie(cfg)}
}

// requestCounter counts the HTTP requests of the clients built from a
// config it wrapped.
type requestCounter struct{ n atomic.Int64 }

func (c *requestCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			c.n.Add(1)
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// allocator is a "node": its own clients (counted by rc when not nil) and,
// when cached, its own IPAllocation informer, synced.
func (e *env) allocator(t testing.TB, node string, cached bool, rc *requestCounter) *Allocator {
	t.Helper()
	cfg := e.cfg
	if rc != nil {
		cfg = rc.wrap(cfg)
	}
	cs := versioned.NewForConfigOrDie(cfg)
	a := &Allocator{IPAM: cs.IPAMV1alpha1(), Claims: cs.K8sCniCncfIoV1alpha1(), Node: node}
	if cached {
		c, err := NewCache(versioned.NewForConfigOrDie(e.cfg).IPAMV1alpha1())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		c.Start(ctx)
		if !c.WaitForSync(ctx, 30*time.Second) {
			t.Fatal("IPAllocation cache did not sync")
		}
		a.Cache = c
	}
	return a
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// name is a DNS label unique to the test and to its run (pools,
// namespaces): go test -count=N runs it N times against one server.
func name(t testing.TB, suffix string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	return apiservertest.Name(t, strings.Trim(s, "-")+"-"+suffix)
}

// config is a Config of network (the default pool) with the given "ipam" keys (ranges, exclude,
// …); the pool's IPAllocations are deleted when the test ends, to keep the
// shared API server small.
func config(t testing.TB, network, ipamKeys string) *Config {
	t.Helper()
	c := mustConfig(t, fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"ipam":{"type":"multinet-ipam",%s}}`, network, ipamKeys))
	pool := c.Pool
	t.Cleanup(func() {
		cs := versioned.NewForConfigOrDie(apiservertest.Shared(t).Config())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := cs.IPAMV1alpha1().IPAllocations().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(FieldPool, pool).String()})
		if err != nil {
			t.Errorf("cleaning up pool %s: %v", pool, err)
			return
		}
		for _, o := range list.Items {
			if err := cs.IPAMV1alpha1().IPAllocations().Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleaning up pool %s: %v", pool, err)
			}
		}
	})
	return c
}

// poolObjects lists the pool's IPAllocations from the API server.
func (e *env) poolObjects(pool string) []ipamv1.IPAllocation {
	e.t.Helper()
	list, err := e.cs.IPAMV1alpha1().IPAllocations().List(context.Background(),
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(FieldPool, pool).String()})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// syncWatchCache waits until the API server's watch cache (the
// resourceVersion "0" lists of GC and Reconcile) holds every IPAllocation
// of the pool that a consistent list returns, so that a pass right after
// an allocation sees it.
func (e *env) syncWatchCache(pool string) {
	e.t.Helper()
	sel := fields.OneTermEqualSelector(FieldPool, pool).String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		want, err := e.cs.IPAMV1alpha1().IPAllocations().List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			e.t.Fatal(err)
		}
		got, err := e.cs.IPAMV1alpha1().IPAllocations().List(context.Background(), metav1.ListOptions{FieldSelector: sel, ResourceVersion: "0"})
		if err != nil {
			e.t.Fatal(err)
		}
		have := map[string]bool{}
		for _, o := range got.Items {
			have[string(o.UID)] = true
		}
		missing := 0
		for _, o := range want.Items {
			if !have[string(o.UID)] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the watch cache still lacks %d IPAllocations of pool %s", missing, pool)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// poolAddresses is the sorted addresses of the pool's IPAllocations.
func (e *env) poolAddresses(pool string) []string {
	var out []string
	for _, o := range e.poolObjects(pool) {
		out = append(out, o.Spec.Address)
	}
	sort.Strings(out)
	return out
}

func (e *env) namespace(ns string) {
	e.t.Helper()
	_, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) pod(ns, name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) claim(ns, name string) *claimv1.IPAMClaim {
	e.t.Helper()
	c, err := e.cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Create(context.Background(), &claimv1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       claimv1.IPAMClaimSpec{Network: "n", Interface: "net1"},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// req is an ADD of container c (a container ID unique to the test) and ifName.
func req(t testing.TB, c, ifName string) Request {
	return Request{Attachment: Attachment{ContainerID: name(t, c), IfName: ifName}}
}

func podReq(t testing.TB, c, ifName string, p *corev1.Pod) Request {
	r := req(t, c, ifName)
	r.Pod = &PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
	return r
}

func addrs(al *Allocation) []string {
	var out []string
	for _, a := range al.Addresses {
		out = append(out, a.Prefix.String())
	}
	return out
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
