//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

// The local cluster is a complete cluster, with kube-proxy and
// cluster DNS, and multinet's components reach the API server the way they
// do on any cluster.

// podHTTPGet sends GET / over HTTP/1.0 to addr ("ip:port") from the pod,
// with busybox nc (the static busybox's wget crashes on a 200 answer), until
// the body's last line is want (Services take a moment to be programmed);
// it fails with the last answer otherwise.
func podHTTPGet(t *testing.T, ns, pod, addr, want string) {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	ctx := testContext(t, 90*time.Second)
	var out string
	var err error
	poll := wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		out, err = kubectl(ctx, "-n", ns, "exec", pod, "--", "sh", "-c",
			fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s %s`, host, port))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return err == nil && strings.HasPrefix(out, "HTTP/1.") && strings.TrimSpace(lines[len(lines)-1]) == want, nil
	})
	if poll != nil {
		t.Fatalf("in %s/%s: GET http://%s/ = %q (%v), want body %q", ns, pod, addr, out, err, want)
	}
}

// podResolve resolves name through cluster DNS with busybox nslookup in the
// pod (the pod's resolv.conf: the kube-dns Service and the search path) and
// returns the address of the answer, retrying until there is one. (The
// test image's static busybox wget and nc cannot resolve names (static
// glibc has no NSS), so names are resolved here and nc is given the
// address.)
func podResolve(t *testing.T, ns, pod, name string) string {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	var out, addr string
	poll := wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		out, _ = kubectl(ctx, "-n", ns, "exec", pod, "--", "nslookup", name)
		addr = nslookupAddress(out)
		return addr != "", nil
	})
	if poll != nil {
		t.Fatalf("in %s/%s: nslookup %s = %q, want an address", ns, pod, name, out)
	}
	return addr
}

// nslookupAddress returns the first address busybox nslookup printed after
// a "Name:" line (the lines before it are the server's own address).
func nslookupAddress(out string) string {
	named := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "Name:":
			named = true
		case named && len(f) == 2 && f[0] == "Address:":
			return f[1]
		}
	}
	return ""
}

// webPod is a pod on the default network and the secondary network blue
// that serves body over HTTP on port 8080, labelled app=<name>.
func webPod(ns, name, body string) *corev1.Pod {
	p := podSpec(ns, name, "blue")
	p.Labels = map[string]string{"app": name}
	p.Spec.Containers[0].Command = []string{"sh", "-c",
		"mkdir -p /tmp/www && echo " + body + " >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}
	return p
}

func createService(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	svc, err := testCluster.kube.CoreV1().Services(ns).Create(testContext(t, 30*time.Second), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s/%s: %v", ns, name, err)
	}
	return svc
}

// TestServicesAndClusterDNS: a pod with a secondary network resolves a
// Service's name (full, and short through the search path) and the kubernetes Service's through cluster DNS, and reaches the
// Service (kube-proxy); a pod resolves and reaches its own Service (hairpin
// through the default network).
func TestServicesAndClusterDNS(t *testing.T) {
	ns := newNamespace(t)
	bridgeNet(t, ns, "blue", "1.0.0", nil)
	body := "svc-" + randHex(4)
	web := runPod(t, webPod(ns, "web", body))
	client := runPod(t, podSpec(ns, "client", "blue"))
	checkStatusMatchesPod(t, web, []string{"eth0", "net1"})
	checkStatusMatchesPod(t, client, []string{"eth0", "net1"})
	svc := createService(t, ns, "web")
	fqdn := "web." + ns + ".svc.cluster.local"

	// (busybox's resolver applies the search path to names without a dot
	// only.)
	for _, name := range []string{fqdn, "web"} {
		if got := podResolve(t, ns, "client", name); got != svc.Spec.ClusterIP {
			t.Errorf("client resolves %s to %s, want the Service's ClusterIP %s", name, got, svc.Spec.ClusterIP)
		}
	}
	if got := podResolve(t, ns, "client", "kubernetes.default.svc.cluster.local"); got != testCluster.mustEnv(t, "FIRST_SERVICE_IP") {
		t.Errorf("kubernetes.default.svc.cluster.local resolves to %s, want %s", got, testCluster.mustEnv(t, "FIRST_SERVICE_IP"))
	}
	podHTTPGet(t, ns, "client", svc.Spec.ClusterIP+":80", body)
	// Hairpin: the Service's only endpoint is the pod asking.
	if got := podResolve(t, ns, "web", "web"); got != svc.Spec.ClusterIP {
		t.Errorf("web resolves web to %s, want %s", got, svc.Spec.ClusterIP)
	}
	podHTTPGet(t, ns, "web", svc.Spec.ClusterIP+":80", body)
}

// TestComponentsUseInClusterConfiguration: multinetd and the webhook reach
// the API server through the kubernetes Service, as on any cluster: their
// live objects override no KUBERNETES_SERVICE_* variable, the API server
// runs without --enable-aggregator-routing (it reaches the webhook through
// its Service's ClusterIP), and no forwarder stands in for kube-proxy.
func TestComponentsUseInClusterConfiguration(t *testing.T) {
	requireDeployed(t)
	ctx := testContext(t, 60*time.Second)
	ds, err := testCluster.kube.AppsV1().DaemonSets("multinet-system").Get(ctx, "multinetd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("DaemonSet multinetd: %v", err)
	}
	dep, err := testCluster.kube.AppsV1().Deployments("multinet-system").Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Deployment multinet-webhook: %v", err)
	}
	for _, spec := range []corev1.PodSpec{ds.Spec.Template.Spec, dep.Spec.Template.Spec} {
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "KUBERNETES_SERVICE_") {
					t.Errorf("container %s sets %s=%s: want in-cluster configuration", c.Name, e.Name, e.Value)
				}
			}
		}
	}
	if ds.Status.NumberReady < 1 || dep.Status.ReadyReplicas < 1 {
		t.Errorf("multinetd ready %d, webhook ready %d: want both ready", ds.Status.NumberReady, dep.Status.ReadyReplicas)
	}
	pidFile := filepath.Join(testCluster.mustEnv(t, "PID_DIR"), "kube-apiserver.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("kube-apiserver pid: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("kube-apiserver cmdline: %v", err)
	}
	if strings.Contains(string(cmdline), "enable-aggregator-routing") {
		t.Error("kube-apiserver runs with --enable-aggregator-routing: the webhook must be reached through its Service")
	}
	if _, err := os.Stat(filepath.Join(testCluster.mustEnv(t, "PID_DIR"), "apiserver-pod-proxy.pid")); err == nil {
		t.Error("apiserver-pod-proxy runs: pods must reach the API server through the kubernetes Service")
	}
	// The API server reaches the webhook through its Service's ClusterIP
	// (kube-proxy): a NAD whose config is not JSON is denied by it.
	ns := newNamespace(t)
	_, err = testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(ctx, &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion": "1.0.0", "name": `},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("creating a NAD with a broken config: %v, want the webhook to deny it", err)
	}
}
