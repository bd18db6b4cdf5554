package observability

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/internal/testing/testskip"
)

// monitoringAPI is the Prometheus Operator's API package whose types
// monitors.go and rules.go use; its CRDs are generated from it.
const monitoringAPI = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

// operatorCRDs generates the Prometheus Operator's PodMonitor and
// PrometheusRule CRDs from its API types (the module proxy serves the API
// module, not the operator's repository with its CRD YAML) with
// controller-gen, as the operator does, into a directory of their own.
func operatorCRDs(t *testing.T) string {
	t.Helper()
	all := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "tool", "controller-gen", "crd", "paths="+monitoringAPI, "output:crd:dir="+all)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen crd paths=%s: %v\n%s", monitoringAPI, err, out)
	}
	dir := t.TempDir()
	for _, f := range []string{"monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		b, err := os.ReadFile(filepath.Join(all, f))
		if err != nil {
			t.Fatalf("controller-gen made no %s: %v", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMonitorsValidAgainstOperatorCRDs creates the shipped PodMonitors
// (podmonitors.yaml) and PrometheusRule (prometheusrule.yaml) on a real
// kube-apiserver that has the Prometheus Operator's CRDs: the API server
// validates them against the CRDs' OpenAPI schemas (and CEL rules) and
// refuses an unknown or mistyped field (strict field validation).
func TestMonitorsValidAgainstOperatorCRDs(t *testing.T) {
	if _, _, err := apiservertest.Binaries(); err != nil && os.Getenv(apiservertest.RequireEnv) != "1" {
		testskip.Skip(t, "needs a real API server: %v (set %s=1 to fail instead)", err, apiservertest.RequireEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv, err := apiservertest.Start(ctx, apiservertest.Options{CRDDir: operatorCRDs(t)})
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	defer srv.Stop()
	kc := kubernetes.NewForConfigOrDie(srv.Config())
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(srv.Config())
	resources := map[string]string{"PodMonitor": "podmonitors", "PrometheusRule": "prometheusrules"}
	created := map[string]int{}
	for _, file := range []string{PodMonitorsFile, PrometheusRuleFile} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				break
			}
			if len(u.Object) == 0 {
				continue
			}
			gvr := schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: resources[u.GetKind()]}
			_, err := dc.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, &u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			if err != nil {
				t.Errorf("%s: %s %s: %v", file, u.GetKind(), u.GetName(), err)
				continue
			}
			created[u.GetKind()]++
		}
	}
	if created["PodMonitor"] != len(PodMonitors()) || created["PrometheusRule"] != 1 {
		t.Errorf("created %v, want %d PodMonitors and 1 PrometheusRule", created, len(PodMonitors()))
	}
	// The API server refuses what the schema does not allow: the check is real.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
		"metadata": map[string]any{"name": "bad", "namespace": Namespace},
		"spec":     map[string]any{"selector": map[string]any{}, "podMetricsEndpoints": []any{map[string]any{"portNumber": "nine"}}},
	}}
	if _, err := dc.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}).
		Namespace(Namespace).Create(ctx, bad, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err == nil {
		t.Errorf("a PodMonitor with portNumber \"nine\" was accepted: the CRD does not validate")
	}
}

// TestPodMonitorsSelectShippedPods checks that each PodMonitor selects the
// pods of its component as deploy/base labels them and scrapes a port
// they serve /metrics on: a named container port whose number is the one
// of the container's --metrics-address (or the webhook's
// --probe-bind-address).
func TestPodMonitorsSelectShippedPods(t *testing.T) {
	base := map[string]string{
		Multinetd:    "../base/multinetd-daemonset.yaml",
		Webhook:      "../base/webhook-deployment.yaml",
		DevicePlugin: "../base/deviceplugin-daemonset.yaml",
		DRADriver:    "../base/dra-driver-daemonset.yaml",
		IPAMCleanup:  "../base/ipam-cleanup.yaml",
	}
	for _, pm := range PodMonitors() {
		file, ok := base[pm.Name]
		if !ok {
			t.Errorf("PodMonitor %s: no component of that name", pm.Name)
			continue
		}
		podLabels, spec := workloadPod(t, file)
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(podLabels)) {
			t.Errorf("PodMonitor %s: selector %v does not match the pods of %s (%v)", pm.Name, sel, file, podLabels)
		}
		if podLabels[pm.Spec.JobLabel] != pm.Name {
			t.Errorf("PodMonitor %s: job label %s is %q on the pods, the rules expect job=%q", pm.Name, pm.Spec.JobLabel, podLabels[pm.Spec.JobLabel], pm.Name)
		}
		if ep := pm.Spec.PodMetricsEndpoints[0]; ep.Port != nil && !servesOnPort(spec, *ep.Port) {
			t.Errorf("PodMonitor %s: port %q is not a container port of %s whose number its --metrics-address or --probe-bind-address serves", pm.Name, *ep.Port, file)
		}
	}
}

// workloadPod returns the pod template's labels and spec of the DaemonSet
// or Deployment in file (a multi-document YAML file).
func workloadPod(t *testing.T, file string) (map[string]string, corev1.PodSpec) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
					Spec     corev1.PodSpec    `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("%s: no DaemonSet or Deployment: %v", file, err)
		}
		if obj.Kind == "DaemonSet" || obj.Kind == "Deployment" {
			return obj.Spec.Template.Metadata.Labels, obj.Spec.Template.Spec
		}
	}
}

// servesOnPort reports whether a container of spec has a container port
// named port whose number ends the address of its --metrics-address or
// --probe-bind-address argument.
func servesOnPort(spec corev1.PodSpec, port string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name != port {
				continue
			}
			for _, a := range c.Args {
				for _, flag := range []string{"--metrics-address=", "--probe-bind-address="} {
					if addr, ok := strings.CutPrefix(a, flag); ok && strings.HasSuffix(addr, fmt.Sprintf(":%d", p.ContainerPort)) {
						return true
					}
				}
			}
		}
	}
	return false
}
