// Package coredns_test checks hack/coredns/coredns.yaml, the local cluster's
// CoreDNS (hack/lib/coredns.sh applies it): rendered as deploy_coredns
// renders it, every document decodes strictly into its API type, and what
// the deployment relies on holds (the DNS Service IP, port 53 as nonroot
// without capabilities, probes on the ports the Corefile serves, the
// locally imported image, the API access the kubernetes plugin needs).
package coredns_test

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const (
	dnsIP  = "10.96.0.10"
	domain = "cluster.local"
	image  = "localhost/multinet/coredns:v1.15.0"
)

// render fills in the placeholders as render_coredns_manifest does (sed)
// and returns the documents by "Kind/name".
func render(t *testing.T) map[string][]byte {
	t.Helper()
	raw, err := os.ReadFile("coredns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("@DNS_SERVICE_IP@", dnsIP, "@CLUSTER_DOMAIN@", domain, "@COREDNS_IMAGE@", image).Replace(string(raw))
	if left := regexp.MustCompile(`@[A-Z_]+@`).FindAllString(s, -1); len(left) > 0 {
		t.Fatalf("placeholders render_coredns_manifest does not fill in: %q", left)
	}
	docs := map[string][]byte{}
	for _, d := range regexp.MustCompile(`(?m)^---$`).Split(s, -1) {
		var meta struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal([]byte(d), &meta); err != nil {
			t.Fatalf("document %q: %v", d, err)
		}
		if meta.Kind == "" {
			continue
		}
		key := meta.Kind + "/" + meta.Metadata.Name
		if _, dup := docs[key]; dup {
			t.Errorf("%s twice", key)
		}
		namespaced := meta.Kind != "ClusterRole" && meta.Kind != "ClusterRoleBinding"
		if namespaced && meta.Metadata.Namespace != "kube-system" {
			t.Errorf("%s: namespace %q, want kube-system", key, meta.Metadata.Namespace)
		}
		docs[key] = []byte(d)
	}
	return docs
}

func get(t *testing.T, docs map[string][]byte, key string, into any) {
	t.Helper()
	b, ok := docs[key]
	if !ok {
		t.Fatalf("%s missing", key)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

func TestManifest(t *testing.T) {
	docs := render(t)
	want := []string{"ServiceAccount/coredns", "ClusterRole/system:coredns", "ClusterRoleBinding/system:coredns",
		"ConfigMap/coredns", "Deployment/coredns", "Service/kube-dns"}
	for _, k := range want {
		if _, ok := docs[k]; !ok {
			t.Errorf("%s missing", k)
		}
	}
	if len(docs) != len(want) {
		t.Errorf("%d objects, want %d: %v", len(docs), len(want), docs)
	}

	var sa corev1.ServiceAccount
	get(t, docs, "ServiceAccount/coredns", &sa)

	var role rbacv1.ClusterRole
	get(t, docs, "ClusterRole/system:coredns", &role)
	allowed := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, gr := range [][2]string{{"", "services"}, {"", "pods"}, {"", "namespaces"}, {"discovery.k8s.io", "endpointslices"}} {
		for _, verb := range []string{"list", "watch"} {
			if !allowed(gr[0], gr[1], verb) {
				t.Errorf("ClusterRole does not allow %s %s (group %q)", verb, gr[1], gr[0])
			}
		}
	}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v != "list" && v != "watch" {
				t.Errorf("ClusterRole rule %+v: verb %s, want list and watch only", r, v)
			}
		}
	}
	var binding rbacv1.ClusterRoleBinding
	get(t, docs, "ClusterRoleBinding/system:coredns", &binding)
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0] != (rbacv1.Subject{Kind: "ServiceAccount", Name: "coredns", Namespace: "kube-system"}) {
		t.Errorf("ClusterRoleBinding = %+v", binding)
	}

	var cm corev1.ConfigMap
	get(t, docs, "ConfigMap/coredns", &cm)
	corefile := cm.Data["Corefile"]
	for _, line := range []string{
		".:53 {", "errors", "health :8080 {", "ready :8181",
		"kubernetes " + domain + " in-addr.arpa ip6.arpa {", "pods insecure", "fallthrough in-addr.arpa ip6.arpa",
		"prometheus :9153", "forward . /etc/resolv.conf", "cache 30", "loop", "reload", "loadbalance",
	} {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(line) + `\s*$`).MatchString(corefile) {
			t.Errorf("Corefile has no line %q:\n%s", line, corefile)
		}
	}
	if strings.Count(corefile, "{") != strings.Count(corefile, "}") {
		t.Errorf("Corefile braces unbalanced:\n%s", corefile)
	}

	var dep appsv1.Deployment
	get(t, docs, "Deployment/coredns", &dep)
	checkDeployment(t, &dep, &sa)

	var svc corev1.Service
	get(t, docs, "Service/kube-dns", &svc)
	if svc.Spec.ClusterIP != dnsIP {
		t.Errorf("kube-dns clusterIP = %q, want %s", svc.Spec.ClusterIP, dnsIP)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("kube-dns selector %s=%s does not select the coredns pods (%v)", k, v, dep.Spec.Template.Labels)
		}
	}
	type port struct {
		port  int32
		proto corev1.Protocol
	}
	var ports []port
	for _, p := range svc.Spec.Ports {
		ports = append(ports, port{p.Port, p.Protocol})
		if p.TargetPort != intstr.FromInt32(p.Port) {
			t.Errorf("kube-dns port %s: targetPort %v, want %d", p.Name, p.TargetPort.String(), p.Port)
		}
	}
	if want := []port{{53, corev1.ProtocolUDP}, {53, corev1.ProtocolTCP}, {9153, corev1.ProtocolTCP}}; !slices.Equal(ports, want) {
		t.Errorf("kube-dns ports = %v, want %v", ports, want)
	}
}

func checkDeployment(t *testing.T, dep *appsv1.Deployment, sa *corev1.ServiceAccount) {
	t.Helper()
	spec := dep.Spec.Template.Spec
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", dep.Spec.Replicas)
	}
	if dep.Spec.Template.Labels["k8s-app"] != "kube-dns" || dep.Spec.Selector.MatchLabels["k8s-app"] != "kube-dns" {
		t.Errorf("labels %v, selector %v: want k8s-app=kube-dns", dep.Spec.Template.Labels, dep.Spec.Selector)
	}
	if spec.ServiceAccountName != sa.Name || spec.PriorityClassName != "system-cluster-critical" || spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("serviceAccountName %q, priorityClassName %q, dnsPolicy %q", spec.ServiceAccountName, spec.PriorityClassName, spec.DNSPolicy)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Fatalf("pod securityContext %+v: want runAsNonRoot, runAsUser 65532 (the image's nonroot user)", psc)
	}
	// Binding port 53 as nonroot without capabilities needs the sysctl.
	if !slices.Contains(psc.Sysctls, corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}) {
		t.Errorf("sysctls = %v, want net.ipv4.ip_unprivileged_port_start=0", psc.Sysctls)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != image || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %q pull policy %q, want %s, Never (imported into containerd, no registry)", c.Image, c.ImagePullPolicy, image)
	}
	if !slices.Equal(c.Args, []string{"-conf", "/etc/coredns/Corefile"}) {
		t.Errorf("args = %q", c.Args)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.MountPath == "/etc/coredns" && m.ReadOnly)
	}
	if !mounted {
		t.Errorf("volumeMounts %v: want the ConfigMap read-only at /etc/coredns", c.VolumeMounts)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
		*sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		len(sc.Capabilities.Add) != 0 || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, all capabilities dropped", sc)
	}
	probe := func(name string, p *corev1.Probe, path string, port int32) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromInt32(port) {
			t.Errorf("%s probe %+v: want GET %s on %d", name, p, path, port)
		}
	}
	probe("liveness", c.LivenessProbe, "/health", 8080)
	probe("readiness", c.ReadinessProbe, "/ready", 8181)
	if r := c.Resources; r.Requests.Cpu().String() != "50m" || r.Requests.Memory().String() != "70Mi" || r.Limits.Memory().String() != "170Mi" {
		t.Errorf("resources = %v", r)
	}
	var ports bytes.Buffer
	for _, p := range c.Ports {
		ports.WriteString(p.Name + "/" + string(p.Protocol) + " ")
	}
	if got := ports.String(); got != "dns/UDP dns-tcp/TCP metrics/TCP " {
		t.Errorf("container ports = %s", got)
	}
}
