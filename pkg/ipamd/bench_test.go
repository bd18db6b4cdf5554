package ipamd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/apiservertest"
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
// same network shape. The pod check answers from memory, as multinetd's
// pod cache does. DEL runs outside the timer. Figures: p50-ms, p99-ms.
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
	socket := filepath.Join(b.TempDir(), "ipam.sock")
	svcCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	svc, err := Start(svcCtx, Options{Config: srv.Config(), Node: "bench-node", SocketPath: socket, Pods: cachedPod{pod}, ReconcileInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(context.Background()) }()
	svc.allocator.Cache.WaitForSync(ctx, 30*time.Second)

	dataDir := b.TempDir()
	for _, tc := range []struct{ name, dir, ipam string }{
		{"multinet-ipam", pluginDirB(b), fmt.Sprintf(`{"type":"multinet-ipam","socketPath":%q,"ranges":[[{"subnet":"10.70.0.0/16"}]]}`, socket)},
		{"host-local", filepath.Dir(hostLocal()), fmt.Sprintf(`{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.71.0.0/16"}]]}`, dataDir)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if _, err := os.Stat(filepath.Join(tc.dir, "host-local")); tc.name == "host-local" && err != nil {
				b.Skipf("no host-local binary (%v); set MULTINET_HOST_LOCAL", err)
			}
			list, err := libcni.ConfListFromBytes([]byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bench-%s","plugins":[{"type":%q,"ipam":%s}]}`,
				tc.name, map[string]string{"multinet-ipam": "multinet-ipam", "host-local": "host-local"}[tc.name], tc.ipam)))
			if err != nil {
				b.Fatal(err)
			}
			cni := libcni.NewCNIConfigWithCacheDir([]string{tc.dir}, b.TempDir(), nil)
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				r := rt(fmt.Sprintf("%s-%d", tc.name, i), "net1", pod, nil)
				start := time.Now()
				if _, err := cni.AddNetworkList(ctx, list, r); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				b.StopTimer()
				if err := cni.DelNetworkList(ctx, list, r); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
		})
	}
}

// cachedPod is Pods answering from memory, as multinetd's node-local pod
// cache does for a pod whose ADD it is serving (no request).
type cachedPod struct{ pod *corev1.Pod }

func (c cachedPod) Get(context.Context, string, string, string) (*corev1.Pod, error) {
	return c.pod, nil
}
