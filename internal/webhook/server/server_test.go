package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/webhook"
	"github.com/multinet/multinet/internal/webhook/certs"
	"github.com/multinet/multinet/internal/webhook/registration"
	nadfake "github.com/multinet/multinet/pkg/client/clientset/versioned/fake"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

func TestMain(m *testing.M) {
	crlog.SetLogger(klog.NewKlogr())
	os.Exit(m.Run())
}

// nadClient returns the generated fake clientset holding nads, created
// through its NAD client: the fake's own seeding (NewSimpleClientset(objs))
// files objects under the guessed plural networkattachmentdefinitions, which
// the NAD client (network-attachment-definitions) never reads.
func nadClient(t *testing.T, nads ...*nadv1.NetworkAttachmentDefinition) *nadfake.Clientset {
	t.Helper()
	cs := nadfake.NewSimpleClientset()
	for _, n := range nads {
		if _, err := cs.K8sCniCncfIoV1().NetworkAttachmentDefinitions(n.Namespace).Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return cs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// httpsClient trusts only the PEM bundle.
func httpsClient(t *testing.T, bundle []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("no certificate in the CA bundle")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func waitFor(t *testing.T, what string, errc <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		select {
		case err := <-errc:
			t.Fatalf("Run returned while waiting for %s: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// review posts an AdmissionReview for req to path and returns the response.
func review(t *testing.T, c *http.Client, base, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := c.Post(base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("POST %s: status %d, no AdmissionReview response: %v", path, resp.StatusCode, err)
	}
	return out.Response
}

func reviewOf(t *testing.T, uid, ns string, kind metav1.GroupVersionKind, obj any) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: k8stypes.UID("uid-" + uid), Kind: kind, Namespace: ns, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func testPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

func TestRunSelfManagedTLS(t *testing.T) {
	port := freePort(t)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	// The certificate Secret as the install ships it: empty.
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "multinet-system", Name: "multinet-webhook-certs"}})
	nad := nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "net-a", Annotations: map[string]string{nadv1.ResourceNameAnnotation: "example.com/net-a"}},
	}
	cfg := Config{
		Kube: kube, NADClient: nadClient(t, &nad),
		Host: "127.0.0.1", Port: port,
		Namespace: "multinet-system", SecretName: "multinet-webhook-certs",
		CertSpec: certs.Spec{CAValidity: 24 * time.Hour, CertValidity: time.Hour, DNSNames: []string{"webhook.example"}},
		Registration: registration.Options{
			MutatingName: "multinet", ValidatingName: "multinet", URL: base,
			ServiceNamespace: "multinet-system", ServiceName: "multinet-webhook",
			ExcludeNamespaces: []string{"kube-system", "multinet-system"},
		},
		ManageConfigurations: true,
		Handlers:             webhook.Options{Policy: podnetworks.Policy{Isolation: selection.IsolationPolicy{Enabled: true}}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg) }()

	// The configurations are created with the CA bundle and the URL.
	var bundle []byte
	waitFor(t, "the MutatingWebhookConfiguration", errc, func() bool {
		mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "multinet", metav1.GetOptions{})
		if err != nil {
			return false
		}
		bundle = mwc.Webhooks[0].ClientConfig.CABundle
		return len(bundle) > 0
	})
	// Run creates the two configurations one after the other: wait for the
	// validating one as well, not only for the first.
	var vwc *admissionregv1.ValidatingWebhookConfiguration
	waitFor(t, "the ValidatingWebhookConfiguration", errc, func() bool {
		var err error
		vwc, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "multinet", metav1.GetOptions{})
		return err == nil && len(vwc.Webhooks) == 3 && bytes.Equal(vwc.Webhooks[1].ClientConfig.CABundle, bundle)
	})
	if len(vwc.Webhooks) != 3 || *vwc.Webhooks[1].ClientConfig.URL != base+webhook.ValidateNADsPath ||
		*vwc.Webhooks[2].ClientConfig.URL != base+webhook.ValidateIPAMClaimsPath ||
		!bytes.Equal(vwc.Webhooks[1].ClientConfig.CABundle, bundle) || !bytes.Equal(vwc.Webhooks[2].ClientConfig.CABundle, bundle) {
		t.Fatalf("validating configuration: %+v", vwc)
	}
	sec, err := kube.CoreV1().Secrets("multinet-system").Get(ctx, "multinet-webhook-certs", metav1.GetOptions{})
	if err != nil || !bytes.Equal(sec.Data[certs.CACertKey], bundle) {
		t.Fatalf("certificate Secret: %v", err)
	}

	// The serving certificate verifies for 127.0.0.1 (the URL's host) with
	// the published bundle as the only root.
	c := httpsClient(t, bundle)
	waitFor(t, "/readyz", errc, func() bool {
		resp, err := c.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	leaf, _ := certs.ParseCertificates(sec.Data[certs.TLSCertKey])
	if names := strings.Join(leaf[0].DNSNames, ","); !strings.Contains(names, "webhook.example") ||
		!strings.Contains(names, "multinet-system.svc") {
		t.Errorf("serving certificate DNS names %s", names)
	}

	// Mutation over HTTPS.
	r := review(t, c, base, webhook.MutatePodsPath, reviewOf(t, "m", "ns1", podKind, testPod(map[string]string{nadv1.NetworksAnnotation: "net-a,net-a"})))
	if !r.Allowed || r.UID != "uid-m" || r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("mutate: %+v", r)
	}
	if p := string(r.Patch); !strings.Contains(p, `"example.com/net-a":"2"`) || !strings.Contains(p, "/spec/containers/0/resources") {
		t.Errorf("mutate patch %s", p)
	}
	// Missing NAD, malformed annotation, isolation, bad NAD config.
	r = review(t, c, base, webhook.MutatePodsPath, reviewOf(t, "m2", "ns1", podKind, testPod(map[string]string{nadv1.NetworksAnnotation: "gone"})))
	if r.Allowed || r.Result.Code != http.StatusForbidden || !strings.Contains(r.Result.Message, "NetworkAttachmentDefinition ns1/gone not found") {
		t.Errorf("missing NAD: %+v", r.Result)
	}
	r = review(t, c, base, webhook.ValidatePodsPath, reviewOf(t, "v", "ns1", podKind, testPod(map[string]string{nadv1.NetworksAnnotation: `[{"name":"net-a","interface":"a/b"}]`})))
	if r.Allowed || !strings.Contains(r.Result.Message, `field "interface"`) {
		t.Errorf("validate pod: %+v", r.Result)
	}
	r = review(t, c, base, webhook.ValidatePodsPath, reviewOf(t, "v2", "ns2", podKind, testPod(map[string]string{nadv1.NetworksAnnotation: "ns1/net-a"})))
	if r.Allowed || !strings.Contains(r.Result.Message, "§7.4") {
		t.Errorf("isolation: %+v", r.Result)
	}
	badNAD := nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "n"}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"9.9.9","type":"bridge"}`}}
	r = review(t, c, base, webhook.ValidateNADsPath, reviewOf(t, "n", "ns1", metav1.GroupVersionKind{Group: nadv1.GroupName, Version: "v1", Kind: nadv1.NetworkAttachmentDefinitionKind}, badNAD))
	if r.Allowed || !strings.Contains(r.Result.Message, "field cniVersion") {
		t.Errorf("validate NAD: %+v", r.Result)
	}
	// Garbage gets an AdmissionReview with an error, not a dropped connection.
	r = review(t, c, base, webhook.MutatePodsPath, []byte("{garbage"))
	if r.Allowed || r.Result.Code != http.StatusBadRequest {
		t.Errorf("garbage: %+v", r.Result)
	}

	// Metrics count the decisions.
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`multinet_webhook_admission_decisions_total{handler="mutate-pods",result="patched"} 1`,
		`multinet_webhook_admission_decisions_total{handler="mutate-pods",result="denied"} 1`,
		`multinet_webhook_admission_decisions_total{handler="validate-pods",result="denied"} 2`,
		`multinet_webhook_admission_decisions_total{handler="validate-nads",result="denied"} 1`,
		`multinet_webhook_serving_cert_expiry_timestamp_seconds`,
		`controller_runtime_webhook_requests_total{code="200",webhook="/mutate-pods"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if resp, err := c.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v", err)
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(70 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestRunCertFiles(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := certs.NewCA("file-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := certs.NewServing(ca, nil, []net.IP{net.ParseIP("127.0.0.1")}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": srv.CertPEM, "tls.key": srv.KeyPEM, "ca.crt": ca.CertPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	ropts := registration.Options{MutatingName: "m", ValidatingName: "v", URL: base}
	mwc, vwc, err := registration.Render(ropts, nil)
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset(mwc, vwc)
	cfg := Config{
		Kube: kube, NADClient: nadClient(t),
		Host: "127.0.0.1", Port: port, Namespace: "multinet-system",
		CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), CAFile: filepath.Join(dir, "ca.crt"),
		Registration: ropts,
		ProbeAddr:    fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		// Long enough for the checks below; the test waits it out.
		ShutdownDelay: 3 * time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg) }()

	// Only caBundle is set (not managed), from the CA file.
	waitFor(t, "caBundle", errc, func() bool {
		v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "v", metav1.GetOptions{})
		return err == nil && bytes.Equal(v.Webhooks[1].ClientConfig.CABundle, ca.CertPEM)
	})
	c := httpsClient(t, ca.CertPEM)
	waitFor(t, "/readyz on the probe address", errc, func() bool {
		resp, err := http.Get("http://" + cfg.ProbeAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	r := review(t, c, base, webhook.MutatePodsPath, reviewOf(t, "x", "ns1", podKind, testPod(nil)))
	if !r.Allowed || len(r.Patch) != 0 {
		t.Errorf("pod without selection: %+v", r)
	}
	if _, err := kube.CoreV1().Secrets("multinet-system").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "secrets" || a.GetVerb() == "create" {
			if a.GetVerb() != "list" {
				t.Errorf("file mode: unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
			}
		}
	}

	// Shutdown: /readyz fails at once, admission requests are still
	// answered during ShutdownDelay, then Run returns nil.
	cancel()
	waitFor(t, "/readyz failing with shutting-down", errc, func() bool {
		resp, err := http.Get("http://" + cfg.ProbeAddr + "/readyz?verbose")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusInternalServerError && strings.Contains(string(body), "shutting-down")
	})
	r = review(t, c, base, webhook.MutatePodsPath, reviewOf(t, "y", "ns1", podKind, testPod(nil)))
	if !r.Allowed || r.UID != "uid-y" {
		t.Errorf("admission while draining: %+v", r)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run after the shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its shutdown delay")
	}
}

func TestRunPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	cfg := Config{
		Kube:      fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}),
		NADClient: nadClient(t), Host: "127.0.0.1", Port: port, Namespace: "ns", SecretName: "s",
		CertSpec:     certs.Spec{CAValidity: time.Hour, CertValidity: time.Hour},
		Registration: registration.Options{MutatingName: "m", ValidatingName: "v", URL: fmt.Sprintf("https://127.0.0.1:%d", port)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "webhook server") {
		t.Fatalf("Run on a busy port: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run waited for the context instead of failing")
	}
}

// The webhook stops its parts in the reverse order of their start: the
// shutdown delay first (still serving, /readyz failing), the probe server,
// the webhook server draining its in-flight requests, the informers, the
// caBundle publisher and the serving certificate last.
func TestComponentsStopInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want []string
	}{
		{"cert files", func(c *Config) {
			c.CertFile, c.KeyFile, c.CAFile, c.ProbeAddr = "tls.crt", "tls.key", "ca.crt", "127.0.0.1:0"
		}, []string{"shutdown delay", "probe server", "webhook server", "informers", "caBundle publisher", "certificate watcher"}},
		{"self-managed", func(*Config) {}, []string{"shutdown delay", "webhook server", "informers", "certificate manager"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{
				Kube: fake.NewClientset(), NADClient: nadClient(t), Namespace: "ns", SecretName: "s",
				Registration: registration.Options{MutatingName: "m", ValidatingName: "v", URL: "https://127.0.0.1:9443"},
			}
			tc.cfg(&c)
			w, err := newInstance(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, comp := range w.components(context.Background()) {
				names = append(names, comp.Name)
			}
			slices.Reverse(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("stop order\n%q, want\n%q", names, tc.want)
			}
		})
	}
}

func TestCertSANs(t *testing.T) {
	c := Config{
		CertSpec:      certs.Spec{DNSNames: []string{"extra.example"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}},
		Registration:  registration.Options{URL: "https://127.0.0.1:9443", ServiceNamespace: "mn", ServiceName: "wh"},
		ClusterDomain: "k8s.local",
	}
	dns, ips, err := c.certSANs()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(dns, ","); got != "extra.example,wh,wh.mn,wh.mn.svc,wh.mn.svc.k8s.local" {
		t.Errorf("DNS SANs %s", got)
	}
	if len(ips) != 2 || !ips[0].Equal(net.ParseIP("10.0.0.1")) || !ips[1].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("IP SANs %v", ips)
	}
	c.Registration.URL = "https://webhook.example:8443"
	if dns, _, _ = c.certSANs(); !strings.Contains(strings.Join(dns, ","), "webhook.example") {
		t.Errorf("URL host not in SANs: %v", dns)
	}
	if _, _, err := (&Config{}).certSANs(); err == nil {
		t.Error("no SANs: no error")
	}
}
