//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/yaml"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// webhookBinary is the multinet-webhook hack/cluster-cni-multinet.sh built.
func webhookBinary(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "_output", "bin", "multinet-webhook"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("multinet-webhook binary: %v (built by hack/cluster-cni-multinet.sh up)", err)
	}
	return bin
}

// TestWebhookNamespaceIsolation: a second webhook process with
// --namespace-isolation, whose own configurations send it only the pods of
// namespaces carrying this test's label, denies a cross-namespace selection
// there (spec §7.4) and admits one of the pod's own namespace. The same
// cross-namespace selection from an unlabelled namespace is denied by the
// cluster's own webhook too: deploy/ and the host-process bootstrap
// (hack/cluster-devices.sh) run it with --namespace-isolation
// --global-namespaces=default (isolation_test.go tests the deployed policy
// in full). Its process, configurations and certificate Secret are removed
// at the end, so other tests never meet it.
func TestWebhookNamespaceIsolation(t *testing.T) {
	env := devicesEnv(t)
	isolated, open, other := newNamespace(t), newNamespace(t), newNamespace(t)
	createNAD(t, other, "net-x", map[string]any{"cniVersion": "1.0.0", "name": "net-x", "type": "bridge", "bridge": "mnebad"}, nil)

	id := randHex(4)
	label := "multinet.io/e2e-isolation"
	name := "multinet-e2e-isolation-" + id
	secret := name + "-certs"
	port, probe := freePort(t), freePort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	flags := []string{
		"--url", url, "--namespace", env["WEBHOOK_NAMESPACE"],
		"--mutating-webhook-configuration", name, "--validating-webhook-configuration", name,
	}

	// The configurations the flags give, each webhook restricted to the
	// labelled namespaces; the process only keeps their caBundle current
	// (no --manage-webhook-configurations, which would undo the selector).
	out, err := exec.Command(webhookBinary(t), append(flags, "--print-webhook-configurations")...).Output()
	if err != nil {
		t.Fatalf("multinet-webhook --print-webhook-configurations: %v", err)
	}
	docs := strings.Split(string(out), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("--print-webhook-configurations printed %d documents, want 2:\n%s", len(docs), out)
	}
	var mwc admv1.MutatingWebhookConfiguration
	var vwc admv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal([]byte(docs[0]), &mwc); err != nil {
		t.Fatalf("mutating configuration: %v", err)
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &vwc); err != nil {
		t.Fatalf("validating configuration: %v", err)
	}
	only := func(s *metav1.LabelSelector) *metav1.LabelSelector {
		s = s.DeepCopy()
		if s == nil {
			s = &metav1.LabelSelector{}
		}
		s.MatchLabels = map[string]string{label: id}
		return s
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].NamespaceSelector = only(mwc.Webhooks[i].NamespaceSelector)
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].NamespaceSelector = only(vwc.Webhooks[i].NamespaceSelector)
	}
	ctx := testContext(t, 120*time.Second)
	adm := testCluster.kube.AdmissionregistrationV1()
	if _, err := adm.MutatingWebhookConfigurations().Create(ctx, &mwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := adm.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete MutatingWebhookConfiguration %s: %v", name, err)
		}
		if err := adm.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete ValidatingWebhookConfiguration %s: %v", name, err)
		}
		if err := testCluster.kube.CoreV1().Secrets(env["WEBHOOK_NAMESPACE"]).Delete(ctx, secret, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete Secret %s: %v", secret, err)
		}
	})
	if _, err := adm.ValidatingWebhookConfigurations().Create(ctx, &vwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	// Its certificate Secret, empty, as an install ships it: the webhook's
	// identity may fill it but create no Secret.
	if _, err := testCluster.kube.CoreV1().Secrets(env["WEBHOOK_NAMESPACE"]).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Secret %s: %v", secret, err)
	}

	logPath := filepath.Join(testCluster.mustEnv(t, "LOG_DIR"), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(webhookBinary(t), append(flags,
		"--kubeconfig", env["WEBHOOK_KUBECONFIG"], "--bind-address", "127.0.0.1", "--port", fmt.Sprint(port),
		"--probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probe), "--cert-secret", secret,
		"--namespace-isolation", "-v=2")...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start multinet-webhook: %v", err)
	}
	t.Cleanup(func() { // before the configurations are deleted (cleanups run last-in first-out)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probe))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		m, err1 := adm.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		v, err2 := adm.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		return err1 == nil && err2 == nil && len(m.Webhooks[0].ClientConfig.CABundle) > 0 && len(v.Webhooks[0].ClientConfig.CABundle) > 0, nil
	})
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("the isolation webhook is not ready with its caBundle published: %v\n%s", err, b)
	}

	ns, err := testCluster.kube.CoreV1().Namespaces().Get(ctx, isolated, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels[label] = id
	if _, err := testCluster.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label namespace %s: %v", isolated, err)
	}

	sel := other + "/net-x"
	_, err = testCluster.kube.CoreV1().Pods(isolated).Create(ctx, podSpec(isolated, "cross", sel), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	assertDenied(t, err, "namespace isolation", `"`+other+`"`)
	// The same pod selecting a NAD of its own namespace passes both webhooks.
	// (Retried: the webhooks see the new NAD through their informers.)
	createNAD(t, isolated, "own", map[string]any{"cniVersion": "1.0.0", "name": "own", "type": "bridge", "bridge": "mnebad"}, nil)
	var ownErr error
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		_, ownErr = testCluster.kube.CoreV1().Pods(isolated).Create(ctx, podSpec(isolated, "own", "own"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return ownErr == nil, nil
	})
	if ownErr != nil {
		t.Errorf("pod selecting its own namespace's NAD under isolation: %v", ownErr)
	}
	// Elsewhere the cluster's webhook, isolating as shipped, denies the same
	// selection.
	_, err = testCluster.kube.CoreV1().Pods(open).Create(ctx, podSpec(open, "cross", sel), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	assertDenied(t, err, "namespace isolation", `"`+other+`"`, `pod in namespace "`+open+`"`)
}

// webhookTarget is one running multinet-webhook process as a client reaches
// it directly (not through the API server).
type webhookTarget struct {
	base   string       // https://host:port of its admission server
	probes string       // http://host:port of /healthz and /readyz
	client *http.Client // trusts the cluster's caBundle, verifies the name the API server verifies
	pid    int          // its host PID
	// alive reports whether that same process still runs (for a pod: the
	// same pod, no container restart).
	alive func(t *testing.T) bool
}

// webhookOf returns the cluster's webhook: deployed, the first running
// replica, reached at its pod IP (the local pod network is the bridge the
// cluster made) and verified as multinet-webhook.multinet-system.svc, the
// name the API server checks when it routes to the Service's endpoints;
// as a host process, the url and probe address of hack/cluster-devices.sh.
func webhookOf(t *testing.T) *webhookTarget {
	t.Helper()
	const configName = "multinet-webhook"
	if !testCluster.deployed {
		env := devicesEnv(t)
		pid := componentPID(t, "multinet-webhook")
		return &webhookTarget{
			base: env["WEBHOOK_URL"], probes: env["WEBHOOK_PROBE_URL"],
			client: webhookClient(t, configName, ""), pid: pid,
			alive: func(t *testing.T) bool { return componentPID(t, "multinet-webhook") == pid && pidAlive(pid) },
		}
	}
	p := runningPods(t, "multinet-webhook")[0]
	pid := containerPID(t, p)
	return &webhookTarget{
		base:   "https://" + net.JoinHostPort(p.Status.PodIP, "9443"),
		probes: "http://" + net.JoinHostPort(p.Status.PodIP, "8081"),
		client: webhookClient(t, configName, "multinet-webhook."+systemNamespace+".svc"),
		pid:    pid,
		alive: func(t *testing.T) bool {
			now, err := testCluster.kube.CoreV1().Pods(systemNamespace).Get(testContext(t, 20*time.Second), p.Name, metav1.GetOptions{})
			return err == nil && now.UID == p.UID && now.DeletionTimestamp == nil && len(now.Status.ContainerStatuses) == 1 &&
				now.Status.ContainerStatuses[0].RestartCount == p.Status.ContainerStatuses[0].RestartCount && pidAlive(pid)
		},
	}
}

// webhookClient is an HTTPS client trusting the caBundle the cluster's
// webhook configuration carries; serverName, when set, is the name it
// verifies instead of the URL's host.
func webhookClient(t *testing.T, configName, serverName string) *http.Client {
	t.Helper()
	m, err := testCluster.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(testContext(t, 20*time.Second), configName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("webhook configuration %s: %v", configName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.Webhooks[0].ClientConfig.CABundle) {
		t.Fatalf("webhook configuration %s: no usable caBundle", configName)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12,
	}}}
}

// review returns an AdmissionReview (JSON) of a pod CREATE in ns selecting
// networks.
func review(t *testing.T, uid, ns, networks string) []byte {
	t.Helper()
	pod, err := json.Marshal(podSpec(ns, "p", networks))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(uid),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: pod},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWebhookSurvivesMalformedRequests: the cluster's webhook, sent garbage
// and mangled AdmissionReviews on every path (besides the unit fuzz target
// of the decoding, internal/webhook FuzzAdmissionReview), answers each request,
// keeps running in the same process, stays ready, and still decides a valid
// review correctly; a pod created through the API server afterwards still
// gets its resources injected.
func TestWebhookSurvivesMalformedRequests(t *testing.T) {
	env := devicesEnv(t)
	w := webhookOf(t)
	client := w.client
	ns := newNamespace(t)
	valid := review(t, "u-valid", ns, "gone")

	bodies := map[string][]byte{
		"empty":          nil,
		"not-json":       []byte("this is not json"),
		"null":           []byte("null"),
		"no-request":     []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
		"wrong-kind":     []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}`),
		"v1beta1":        []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x","object":{}}}`),
		"object-string":  []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","object":"garbage"}}`),
		"object-array":   []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","object":[1,2,3]}}`),
		"annotation-num": bytes.Replace(valid, []byte(`"k8s.v1.cni.cncf.io/networks":"gone"`), []byte(`"k8s.v1.cni.cncf.io/networks":42`), 1),
		"truncated":      valid[:len(valid)/2],
		"deep-nesting":   []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)),
		// 250 KB: about the most annotations a pod may carry (256 KiB).
		"huge-selection": review(t, "u-huge", ns, strings.TrimSuffix(strings.Repeat("gone,", 50000), ",")),
	}
	rng := rand.New(rand.NewPCG(5, 5))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	bodies["random-64KiB"] = random
	for i := 0; i < 100; i++ { // mangled copies of a valid review
		b := bytes.Clone(valid)
		for j := 0; j < 1+rng.IntN(8); j++ {
			b[rng.IntN(len(b))] = byte(rng.UintN(256))
		}
		bodies[fmt.Sprintf("mangled-%03d", i)] = b
	}

	base := w.base
	for _, path := range []string{"/mutate-pods", "/validate-pods", "/validate-nads"} {
		answered := 0
		for name, body := range bodies {
			resp, err := client.Post(base+path, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("POST %s (%s): %v", path, name, err)
				continue
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("POST %s (%s): HTTP %d", path, name, resp.StatusCode)
			}
			answered++
		}
		t.Logf("%s answered %d malformed requests", path, answered)
	}
	// Garbage below HTTP: a TLS handshake that never completes, raw bytes.
	for _, junk := range [][]byte{random[:4096], []byte("GET / HTTP/1.1\r\n\r\n")} {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "https://"), 5*time.Second)
		if err != nil {
			t.Fatalf("dial webhook: %v", err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(junk)
		_, _ = io.Copy(io.Discard, conn)
		conn.Close()
	}

	if !w.alive(t) {
		t.Fatalf("multinet-webhook (pid %d at %s) did not survive", w.pid, w.base)
	}
	assertRSSBelow(t, "multinet-webhook", w.pid, 256<<20)
	resp, err := http.Get(w.probes + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook /readyz after the garbage: %v %v", resp, err)
	}
	resp.Body.Close()

	// A valid review still gets the right answer: denied, naming the NAD.
	resp, err = client.Post(base+"/mutate-pods", "application/json", bytes.NewReader(valid))
	if err != nil {
		t.Fatalf("valid review: %v", err)
	}
	var out admissionv1.AdmissionReview
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || out.Response == nil || out.Response.UID != "u-valid" || out.Response.Allowed ||
		out.Response.Result == nil || !strings.Contains(out.Response.Result.Message, ns+"/gone") {
		t.Errorf("valid review after the garbage: %+v (%v), want denied naming %s/gone", out.Response, err, ns)
	}
	// And the API server's path through it still injects resources.
	vhost := env["VHOST_RESOURCE"]
	vhostNet(t, ns, "vh", vhost)
	waitInjected(t, podSpec(ns, "after", "vh,vh"), vhost, 2)
}

func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// assertRSSBelow fails when the process's resident memory exceeds limit
// bytes (garbage must not make a component balloon).
func assertRSSBelow(t *testing.T, name string, pid int, limit int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("%s VmRSS %q: %v", name, l, err)
			}
			t.Logf("%s resident memory: %d MiB", name, kb>>10)
			if kb<<10 > limit {
				t.Errorf("%s resident memory %d MiB, want below %d MiB", name, kb>>10, limit>>20)
			}
			return
		}
	}
	t.Fatalf("%s: no VmRSS in /proc/%d/status", name, pid)
}

// TestDevicePluginSurvivesMalformedRequests: Allocate with unknown,
// repeated or no device IDs and GetPreferredAllocation with nonsense sizes
// and IDs get errors or lenient answers, raw garbage on the gRPC socket is
// dropped, and the plugin keeps running and serving kubelet: both pools stay
// allocatable and it still answers.
func TestDevicePluginSurvivesMalformedRequests(t *testing.T) {
	netdev, devs := netdevPool(t)
	pid := componentPID(t, "multinet-deviceplugin")
	c := pluginClient(t, netdev)
	ctx := testContext(t, 60*time.Second)

	for name, req := range map[string]*pluginapi.AllocateRequest{
		"unknown":   {ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"no-such-device"}}}},
		"repeated":  {ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{devs[0], devs[0]}}}},
		"no-ids":    {ContainerRequests: []*pluginapi.ContainerAllocateRequest{{}}},
		"traversal": {ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"../../etc/passwd"}}}},
		"nul":       {ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"mnv\x00"}}}},
	} {
		_, err := c.Allocate(ctx, req)
		if grpcstatus.Code(err) != codes.InvalidArgument {
			t.Errorf("Allocate %s: %v, want InvalidArgument", name, err)
		}
	}
	for _, req := range []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"x", "y"}, AllocationSize: -3},
		{AvailableDeviceIDs: devs, MustIncludeDeviceIDs: []string{"zzz", devs[0]}, AllocationSize: 1},
		{AvailableDeviceIDs: nil, AllocationSize: 1 << 30},
	} {
		_, _ = c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{req}})
	}
	for _, junk := range [][]byte{[]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\ngarbage garbage"), bytes.Repeat([]byte{0xff}, 4096)} {
		conn, err := net.DialTimeout("unix", pluginSocket(t, netdev), 5*time.Second)
		if err != nil {
			t.Fatalf("dial plugin socket: %v", err)
		}
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = conn.Write(junk)
		_, _ = io.Copy(io.Discard, conn)
		conn.Close()
	}

	if got := componentPID(t, "multinet-deviceplugin"); got != pid || !pidAlive(got) {
		t.Fatalf("multinet-deviceplugin pid %d → %d: it did not survive", pid, got)
	}
	// An absurd allocation_size once made it allocate 16 GiB.
	assertRSSBelow(t, "multinet-deviceplugin", pid, 256<<20)
	if _, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		t.Errorf("GetDevicePluginOptions after the garbage: %v", err)
	}
	health := watchHealth(t, c)
	waitHealth(t, health, devs[0], pluginapi.Healthy, 5*time.Second)
	alloc, _ := nodeResource(t, corev1.ResourceName(netdev))
	if alloc != int64(len(devs)) {
		t.Errorf("allocatable %s = %d after the garbage, want %d", netdev, alloc, len(devs))
	}
}
