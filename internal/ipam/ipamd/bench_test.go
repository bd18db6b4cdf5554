package ipamd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/multinet/multinet/internal/node/cniserver"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/testing/apiservertest"
)

// hostLocal is the reference host-local plugin the local cluster caches
// ($MULTINET_HOST_LOCAL overrides).
func hostLocal() string {
	if p := os.Getenv("MULTINET_HOST_LOCAL"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "multinet", "cni-plugins-static", "v1.9.1", "host-local")
}

// BenchmarkPluginAdd: one CNI ADD of an IPv4 address on a /16 through
// libcni, as a delegate runs its IPAM plugin: multinet-ipam (plugin exec,
// the socket to a multinetd-side service, the allocation in the real API
// server) against host-local (plugin exec, a file in a data dir) on the
// same network shape, and the multinet-ipam binary against a socket whose
// server answers at once (exec + socket round trip: the floor). The pod
// check answers from memory, as multinetd's pod cache does. DEL runs
// outside the timer. Figures: p50-ms, p99-ms of the ADD; for
// multinet-ipam also where the time goes: handler-p50-ms (the service's
// run time of the ADD: what is not exec and socket), api-p50-ms (the
// ADD's API requests, summed per ADD), requests/ADD and, per kind of
// request, <verb>-p50-ms.
func BenchmarkPluginAdd(b *testing.B) {
	srv := apiservertest.Shared(b)
	kc := kubernetes.NewForConfigOrDie(srv.Config())
	ctx := context.Background()
	ns := "bench-plugin"
	_, _ = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	pod, err := kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"},
		Spec: corev1.PodSpec{NodeName: "bench-node", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var calls apiTimer
	var handler addTimer
	socket := filepath.Join(b.TempDir(), "ipam.sock")
	svcCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	svc, err := Start(svcCtx, Options{Config: calls.wrap(srv.Config()), Node: "bench-node", SocketPath: socket, Pods: cachedPod{pod},
		ReconcileInterval: -1, Server: cniserver.Options{Observer: &handler}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(context.Background()) }()
	svc.allocator.Cache.WaitForSync(ctx, 30*time.Second)
	stubSocket := serveStub(b)

	dataDir := b.TempDir()
	for _, tc := range []struct{ name, plugin, dir, socket, ipam string }{
		{"multinet-ipam", "multinet-ipam", pluginDirB(b), socket, `{"type":"multinet-ipam","ranges":[[{"subnet":"10.70.0.0/16"}]]}`},
		{"socket-only", "multinet-ipam", pluginDirB(b), stubSocket, `{"type":"multinet-ipam","ranges":[[{"subnet":"10.72.0.0/16"}]]}`},
		{"host-local", "host-local", filepath.Dir(hostLocal()), "", fmt.Sprintf(`{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.71.0.0/16"}]]}`, dataDir)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if _, err := os.Stat(filepath.Join(tc.dir, tc.plugin)); err != nil {
				b.Skipf("no %s binary (%v); set MULTINET_HOST_LOCAL", tc.plugin, err)
			}
			list, err := libcni.ConfListFromBytes([]byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bench-%s","plugins":[{"type":%q,"ipam":%s}]}`,
				tc.name, tc.plugin, tc.ipam)))
			if err != nil {
				b.Fatal(err)
			}
			cni := libcni.NewCNIConfigWithCacheDir([]string{tc.dir}, b.TempDir(), newSocketExec(tc.socket))
			calls.reset()
			handler.reset()
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				r := rt(fmt.Sprintf("%s-%d", tc.name, i), "net1", pod, nil)
				calls.startADD()
				start := time.Now()
				if _, err := cni.AddNetworkList(ctx, list, r); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				calls.endADD()
				b.StopTimer()
				if err := cni.DelNetworkList(ctx, list, r); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			p50, p99 := percentiles(lat)
			b.ReportMetric(ms(p50), "p50-ms")
			b.ReportMetric(ms(p99), "p99-ms")
			if tc.name == "multinet-ipam" {
				h, _ := percentiles(handler.get())
				b.ReportMetric(ms(h), "handler-p50-ms")
				perADD, n, byVerb := calls.get()
				a, _ := percentiles(perADD)
				b.ReportMetric(ms(a), "api-p50-ms")
				b.ReportMetric(float64(n)/float64(len(lat)), "requests/ADD")
				for verb, d := range byVerb {
					p, _ := percentiles(d)
					b.ReportMetric(ms(p), verb+"-p50-ms")
				}
			}
		})
	}
}

// serveStub serves a socket whose ADD answers a fixed result at once.
func serveStub(b *testing.B) string {
	socket := filepath.Join(b.TempDir(), "stub", "ipam.sock")
	l, err := cniserver.Listen(socket)
	if err != nil {
		b.Fatal(err)
	}
	s := cniserver.New(stubHandler{}, cniserver.Options{})
	go func() { _ = s.Serve(l) }()
	b.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return socket
}

type stubHandler struct{}

func (stubHandler) Add(context.Context, *api.Request) ([]byte, error) {
	return []byte(`{"cniVersion":"1.1.0","ips":[{"address":"10.72.0.2/16"}]}`), nil
}
func (stubHandler) Del(context.Context, *api.Request) error    { return nil }
func (stubHandler) Check(context.Context, *api.Request) error  { return nil }
func (stubHandler) GC(context.Context, *api.Request) error     { return nil }
func (stubHandler) Status(context.Context, *api.Request) error { return nil }

// addTimer is a cniserver.Observer keeping the run time of each ADD.
type addTimer struct {
	mu  sync.Mutex
	ran []time.Duration
}

func (t *addTimer) OnStart(string) {}
func (t *addTimer) OnDone(cmd string, _, _, ran time.Duration, _ *types.Error) {
	if cmd != api.CmdAdd {
		return
	}
	t.mu.Lock()
	t.ran = append(t.ran, ran)
	t.mu.Unlock()
}
func (t *addTimer) reset() { t.mu.Lock(); t.ran = nil; t.mu.Unlock() }
func (t *addTimer) get() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ran)
}

// apiTimer times the API requests sent between startADD and endADD by the
// clients of a config it wrapped (watches excluded), by kind: list, get,
// create, delete, update.
type apiTimer struct {
	on     atomic.Bool
	mu     sync.Mutex
	cur    time.Duration
	n      int
	perADD []time.Duration
	byVerb map[string][]time.Duration
}

func (t *apiTimer) wrap(cfg *rest.Config) *rest.Config {
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			start := time.Now()
			resp, err := rt.RoundTrip(r)
			if t.on.Load() && r.URL.Query().Get("watch") != "true" {
				t.record(verb(r), time.Since(start))
			}
			return resp, err
		})
	}
	return cfg
}

func verb(r *http.Request) string {
	switch r.Method {
	case http.MethodGet:
		if strings.HasSuffix(r.URL.Path, "s") { // a collection: …/ipallocations, …/ipamclaims
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodDelete:
		return "delete"
	}
	return "update"
}

func (t *apiTimer) record(verb string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur += d
	t.n++
	if t.byVerb == nil {
		t.byVerb = map[string][]time.Duration{}
	}
	t.byVerb[verb] = append(t.byVerb[verb], d)
}

func (t *apiTimer) startADD() { t.on.Store(true) }
func (t *apiTimer) endADD() {
	t.on.Store(false)
	t.mu.Lock()
	t.perADD = append(t.perADD, t.cur)
	t.cur = 0
	t.mu.Unlock()
}

func (t *apiTimer) reset() {
	t.mu.Lock()
	t.cur, t.n, t.perADD, t.byVerb = 0, 0, nil, nil
	t.mu.Unlock()
}

func (t *apiTimer) get() (perADD []time.Duration, n int, byVerb map[string][]time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.perADD), t.n, t.byVerb
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cachedPod is Pods answering from memory, as multinetd's node-local pod
// cache does for a pod whose ADD it is serving (no request).
type cachedPod struct{ pod *corev1.Pod }

func (c cachedPod) Get(context.Context, string, string, string) (*corev1.Pod, error) {
	return c.pod, nil
}
