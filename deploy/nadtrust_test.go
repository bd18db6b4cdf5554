package deploy_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/node/daemon"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// TestNADTrustShipped: every overlay ships the NAD trust policy
// (docs/nad-trust.md) as the ConfigMap multinet-nad-trust, equal to the
// policy the binaries apply without a file; multinetd's nadTrustPolicyFile
// and the webhook's --nad-trust-policy name the same file, mounted from that
// ConfigMap into both; both may read namespaces (their labels select the
// rule) and change none.
func TestNADTrustShipped(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		path := o.configFile(t, "multinet-nad-trust", "nad-trust.yaml")
		shipped, err := podnetworks.ReadNADTrustPolicy(path)
		if err != nil {
			t.Fatalf("ConfigMap multinet-nad-trust: %v", err)
		}
		if !reflect.DeepEqual(shipped.Rules, podnetworks.DefaultNADTrustPolicy().Rules) {
			t.Errorf("ConfigMap multinet-nad-trust differs from podnetworks.DefaultNADTrustPolicyYAML: %+v", shipped.Rules)
		}
		data, _ := os.ReadFile(path)
		if !strings.HasSuffix(string(data), podnetworks.DefaultNADTrustPolicyYAML) {
			t.Error("deploy/base/nad-trust.yaml does not end with podnetworks.DefaultNADTrustPolicyYAML")
		}

		cfg, err := daemon.LoadConfig(o.configFile(t, "multinetd-config", "multinetd.yaml"))
		if err != nil {
			t.Fatalf("multinetd.yaml does not load: %v", err)
		}
		const want = "/etc/multinet-nad-trust/nad-trust.yaml"
		if cfg.NADTrustPolicyFile != want {
			t.Errorf("multinetd.yaml: nadTrustPolicyFile %q, want %q", cfg.NADTrustPolicyFile, want)
		}
		var d appsv1.Deployment
		o.get(t, "Deployment/multinet-webhook", &d)
		if got := webhookListFlag(t, container(t, d.Spec.Template.Spec, "webhook").Args, "nad-trust-policy"); len(got) != 1 || got[0] != want {
			t.Errorf("webhook --nad-trust-policy %q, want %q", got, want)
		}
		var ds appsv1.DaemonSet
		o.get(t, "DaemonSet/multinetd", &ds)
		for what, spec := range map[string]corev1.PodSpec{"multinetd": ds.Spec.Template.Spec, "webhook": d.Spec.Template.Spec} {
			if !mountsConfigMap(spec, "multinet-nad-trust", "/etc/multinet-nad-trust") {
				t.Errorf("%s does not mount ConfigMap multinet-nad-trust at /etc/multinet-nad-trust", what)
			}
		}
	})

	o := render(t, "overlays/default")
	for _, role := range []string{"ClusterRole/multinet:multinetd", "ClusterRole/multinet:webhook"} {
		r := rules(t, o, role)
		if !allows(r, "get", "", "namespaces", "x") {
			t.Errorf("%s cannot get namespaces (NAD trust rules select them by label)", role)
		}
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			if allows(r, verb, "", "namespaces", "x") {
				t.Errorf("%s may %s namespaces: it could label its way past the NAD trust policy", role, verb)
			}
		}
	}
	if !allows(rules(t, o, "ClusterRole/multinet:multinetd"), "watch", "", "namespaces", "") {
		t.Error("multinetd cannot watch namespaces (its informer)")
	}
}

// mountsConfigMap reports whether spec has a volume of ConfigMap name
// (hash suffix allowed) mounted read-only at path in some container.
func mountsConfigMap(spec corev1.PodSpec, name, path string) bool {
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil || (v.ConfigMap.Name != name && !strings.HasPrefix(v.ConfigMap.Name, name+"-")) {
			continue
		}
		for _, c := range spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && m.MountPath == path && m.ReadOnly {
					return true
				}
			}
		}
	}
	return false
}
