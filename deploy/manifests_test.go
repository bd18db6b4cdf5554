// Package deploy_test renders the kustomize overlays of deploy/ in process
// (sigs.k8s.io/kustomize/api, what `kubectl apply -k` runs) and checks what
// the install depends on: the DaemonSets' probes, priority, mounts and update
// strategy, least-privilege RBAC, the webhook configurations against
// registration.Render, and the generated files being current.
package deploy_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	dpconfig "github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/node/daemon"
	"github.com/multinet/multinet/internal/webhook/registration"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

var update = flag.Bool("update", false, "rewrite deploy/base/webhook-configurations.yaml from registration.Render")

// objects is a rendered overlay, by "Kind/name".
type objects map[string][]byte

func render(t *testing.T, dir string) objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := objects{}
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		key := r.GetKind() + "/" + r.GetName()
		if _, dup := out[key]; dup {
			t.Errorf("%s: %s twice", dir, key)
		}
		out[key] = b
	}
	return out
}

// get decodes the object key ("Kind/name"; ConfigMaps by name prefix, as
// their names carry a content hash) into into.
func (o objects) get(t *testing.T, key string, into any) {
	t.Helper()
	b, ok := o[key]
	if !ok && strings.HasPrefix(key, "ConfigMap/") {
		for k, v := range o {
			if strings.HasPrefix(k, key+"-") {
				b, ok = v, true
			}
		}
	}
	if !ok {
		t.Fatalf("%s not rendered; have %v", key, o.keys())
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// configFile writes the key of ConfigMap name (hash suffix ignored) into a
// temporary file, as the pod sees it mounted, and returns its path.
func (o objects) configFile(t *testing.T, name, key string) string {
	t.Helper()
	var cm corev1.ConfigMap
	o.get(t, "ConfigMap/"+name, &cm)
	p := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(p, []byte(cm.Data[key]), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (o objects) keys() []string {
	var ks []string
	for k := range o {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

var overlays = append([]string{"overlays/default", "overlays/local"}, distributionOverlays()...)

// eachOverlay runs f as a subtest per overlay with its rendered objects.
func eachOverlay(t *testing.T, f func(t *testing.T, dir string, o objects)) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) { f(t, dir, render(t, dir)) })
	}
}

func TestOverlaysRender(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		for _, want := range []string{
			"Namespace/multinet-system",
			"CustomResourceDefinition/network-attachment-definitions.k8s.cni.cncf.io",
			"CustomResourceDefinition/ipamclaims.k8s.cni.cncf.io",
			"CustomResourceDefinition/multi-networkpolicies.k8s.cni.cncf.io",
			"CustomResourceDefinition/ipallocations.ipam.multinet.io",
			"ServiceAccount/multinetd", "ServiceAccount/multinet-webhook", "ServiceAccount/multinet-deviceplugin",
			"ClusterRole/multinet:multinetd", "ClusterRoleBinding/multinet:multinetd",
			"ClusterRole/multinet:webhook", "ClusterRoleBinding/multinet:webhook",
			"Role/multinet:webhook", "RoleBinding/multinet:webhook",
			"DaemonSet/multinetd", "DaemonSet/multinet-deviceplugin",
			"Deployment/multinet-webhook", "Service/multinet-webhook",
			"MutatingWebhookConfiguration/multinet-webhook", "ValidatingWebhookConfiguration/multinet-webhook",
		} {
			if _, ok := o[want]; !ok {
				t.Errorf("%s missing; rendered %v", want, o.keys())
			}
		}
		for key, b := range o {
			var meta struct {
				Metadata struct {
					Namespace string
					Labels    map[string]string
				}
			}
			if err := yaml.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			if meta.Metadata.Labels["app.kubernetes.io/part-of"] != "multinet" {
				t.Errorf("%s lacks the part-of label (kubectl delete -l app.kubernetes.io/part-of=multinet)", key)
			}
			if strings.HasPrefix(key, "CustomResourceDefinition/") && meta.Metadata.Labels["app.kubernetes.io/component"] != "crds" {
				t.Errorf("%s lacks app.kubernetes.io/component=crds (uninstall keeping NADs selects on it)", key)
			}
			if ns := meta.Metadata.Namespace; ns != "" && ns != "multinet-system" {
				t.Errorf("%s in namespace %q", key, ns)
			}
		}
	})
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// multinetdCPURequestFloorMilli is the smallest CPU request (millicores)
// deploy/README.md "CPU for multinetd" allows multinetd.
const multinetdCPURequestFloorMilli = 100

func TestMultinetdDaemonSet(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		var ds appsv1.DaemonSet
		o.get(t, "DaemonSet/multinetd", &ds)
		spec := ds.Spec.Template.Spec
		if !spec.HostPID {
			t.Error("multinetd needs hostPID: delegates chrooted into the node's root read the node's /proc by their own PID")
		}
		if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" || spec.ServiceAccountName != "multinetd" {
			t.Errorf("hostNetwork %v, priorityClassName %q, serviceAccount %q", spec.HostNetwork, spec.PriorityClassName, spec.ServiceAccountName)
		}
		if s := ds.Spec.UpdateStrategy; s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil || s.RollingUpdate.MaxUnavailable.String() != "1" {
			t.Errorf("updateStrategy = %+v, want RollingUpdate maxUnavailable 1", s)
		}
		if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool { return tl.Operator == corev1.TolerationOpExists && tl.Key == "" }) {
			t.Error("multinetd must tolerate every taint: it is the node's CNI")
		}

		c := container(t, spec, "multinetd")
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			t.Error("multinetd must be privileged (netns, links, delegates)")
		}
		for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Host != "127.0.0.1" || probe.HTTPGet.Port.IntValue() != 9390 {
				t.Errorf("probe %s = %+v, want httpGet 127.0.0.1:9390%s", path, probe, path)
			}
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("resources = %+v, want cpu/memory requests and a memory limit", c.Resources)
		}
		// deploy/README.md "CPU for multinetd": the request sets the
		// container's CPU weight; a CPU limit would throttle pod start-up.
		if got := c.Resources.Requests.Cpu().MilliValue(); got < multinetdCPURequestFloorMilli {
			t.Errorf("multinetd CPU request %dm, want at least %dm (deploy/README.md \"CPU for multinetd\")", got, multinetdCPURequestFloorMilli)
		}
		if l, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			t.Errorf("multinetd CPU limit %s: want none (CFS quota throttles the CNI on the pod-start path)", l.String())
		}
		// docs/decisions/daemon-resources.md "GOMAXPROCS=1".
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMAXPROCS" && e.Value == "1" }) {
			t.Error("multinetd's GOMAXPROCS: want 1 (docs/decisions/daemon-resources.md)")
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}) {
			t.Error("NODE_NAME must come from the downward API (spec.nodeName)")
		}

		// The configuration the daemon loads, with the container's mounts.
		cfg, err := daemon.LoadConfig(o.configFile(t, "multinetd-config", "multinetd.yaml"))
		if err != nil {
			t.Fatalf("multinetd.yaml does not load: %v", err)
		}
		// cniConfDir unset (overlays/local): each node's runtime's, asked
		// at start, reached at its own path or through nodeRoot.
		confFromRuntime := cfg.CNIConfDir == ""
		if confFromRuntime && (cfg.RuntimeEndpoint == "" || dir != "overlays/local") {
			t.Errorf("cniConfDir unset with runtimeEndpoint %q: only the local overlay takes it from the runtime", cfg.RuntimeEndpoint)
		}
		t.Setenv("NODE_NAME", "node-a")
		if err := cfg.Complete(); err != nil {
			t.Fatalf("multinetd.yaml is not a valid configuration: %v", err)
		}
		mounts := mountsByPath(t, spec, c)
		if !strings.HasPrefix(cfg.MetricsAddress, "127.0.0.1:9390") {
			t.Errorf("metricsAddress %q, want 127.0.0.1:9390 (probed by the kubelet)", cfg.MetricsAddress)
		}
		mustMount := map[string]string{
			"socketPath dir": filepath.Dir(cfg.SocketPath), "cniConfDir": cfg.CNIConfDir, "stateDir": cfg.StateDir,
			"devInfoRoot": cfg.DevInfoRoot, "podResourcesSocket dir": filepath.Dir(cfg.PodResourcesSocket),
		}
		if confFromRuntime {
			delete(mustMount, "cniConfDir")
		}
		for what, p := range mustMount {
			m, ok := mounts[p]
			if !ok {
				t.Errorf("%s %s is not a mount of the container", what, p)
				continue
			}
			if m.hostPath != p {
				t.Errorf("%s: host path %s mounted at %s; they must be the same path", what, m.hostPath, p)
			}
		}
		// Delegates run chrooted into the node's root (docs/decisions/deploy.md
		// "How delegates run"): "/" mounted read-write at nodeRoot, with
		// HostToContainer so that pod netns mounts made later are visible.
		if root, ok := mounts[cfg.NodeRoot]; !ok || root.hostPath != "/" || root.readOnly || root.propagation != corev1.MountPropagationHostToContainer {
			t.Errorf("nodeRoot %s: mount %+v, want the host's / read-write with HostToContainer", cfg.NodeRoot, root)
		}
		if cfg.DelegateCgroup != "/" {
			t.Errorf("delegateCgroup %q, want / (delegates outside the container's cgroup)", cfg.DelegateCgroup)
		}
		if f := cfg.DefaultNetwork.File; f != "" {
			if m, ok := mounts[filepath.Dir(f)]; !ok || m.hostPath != filepath.Dir(f) {
				t.Errorf("defaultNetwork.file %s: its dir is not mounted at the same path", f)
			}
		}
		netns := 0
		for p, m := range mounts {
			if strings.HasSuffix(p, "/netns") {
				netns++
				if m.propagation != corev1.MountPropagationHostToContainer {
					t.Errorf("netns mount %s: propagation %q, want HostToContainer", p, m.propagation)
				}
			}
			if p == cfg.NodeRoot {
				continue
			}
			if m.hostPath != "" && m.hostPath != p {
				t.Errorf("host path %s mounted at %s: mount host paths at the same path", m.hostPath, p)
			}
			if strings.HasSuffix(m.hostPath, ".sock") || m.hostPath == "/" || m.hostPath == "/var/lib/kubelet" {
				t.Errorf("host path %s: mount only the directories the daemon needs (a socket's dir, not the socket)", m.hostPath)
			}
		}
		if netns != 1 {
			t.Errorf("%d netns mounts, want 1", netns)
		}

		install := container(t, spec, "install-cni")
		if install.Image != c.Image || len(install.Command) == 0 || !strings.HasSuffix(install.Command[0], "multinet-install") {
			t.Errorf("init container: image %s command %q, want multinet-install from %s", install.Image, install.Command, c.Image)
		}
		// cniBinDirs unset (overlays/local): each node's runtime's, asked at
		// start; the installer's dir must then be the runtime's on the node.
		binDir := argValue(install.Args, "--cni-bin-dir")
		if len(cfg.CNIBinDirs) > 0 && !slices.Contains(cfg.CNIBinDirs, binDir) {
			t.Errorf("installer --cni-bin-dir %q not among the daemon's cniBinDirs %q", binDir, cfg.CNIBinDirs)
		}
		if len(cfg.CNIBinDirs) == 0 && (cfg.RuntimeEndpoint == "" || dir != "overlays/local") {
			t.Errorf("cniBinDirs unset with runtimeEndpoint %q: only the local overlay takes them from the runtime", cfg.RuntimeEndpoint)
		}
		if !confFromRuntime && argValue(install.Args, "--cni-conf-dir") != cfg.CNIConfDir {
			t.Errorf("installer --cni-conf-dir %q, daemon cniConfDir %q", argValue(install.Args, "--cni-conf-dir"), cfg.CNIConfDir)
		}
	})
}

type mountInfo struct {
	hostPath    string
	readOnly    bool
	propagation corev1.MountPropagationMode
}

// mountsByPath maps c's mount paths to their volumes' host paths.
func mountsByPath(t *testing.T, spec corev1.PodSpec, c corev1.Container) map[string]mountInfo {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	out := map[string]mountInfo{}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Errorf("mount %s: no volume %q", m.MountPath, m.Name)
			continue
		}
		mi := mountInfo{readOnly: m.ReadOnly}
		if m.MountPropagation != nil {
			mi.propagation = *m.MountPropagation
		}
		if v.HostPath != nil {
			mi.hostPath = v.HostPath.Path
		}
		out[m.MountPath] = mi
	}
	return out
}

func argValue(args []string, flagName string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flagName+"="); ok {
			return v
		}
	}
	return ""
}

func TestWebhookAndDevicePlugin(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		var d appsv1.Deployment
		o.get(t, "Deployment/multinet-webhook", &d)
		spec := d.Spec.Template.Spec
		c := container(t, spec, "webhook")
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
			t.Errorf("webhook pod securityContext %+v, want non-root 65532", sc)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("webhook readiness probe %+v", c.ReadinessProbe)
		}
		if slices.Contains(c.Args, "--manage-webhook-configurations") {
			t.Error("the configurations are applied from deploy/; the webhook's RBAC does not allow it to create them")
		}
		// Both overlays: two replicas in the pod network behind the Service,
		// kept available by the PodDisruptionBudget (the local API server
		// routes to the Service's endpoints itself).
		_, hasPDB := o["PodDisruptionBudget/multinet-webhook"]
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || !hasPDB || spec.HostNetwork {
			t.Errorf("replicas %v, PDB %v, hostNetwork %v: want 2 replicas in the pod network and a PodDisruptionBudget", d.Spec.Replicas, hasPDB, spec.HostNetwork)
		}
		var pdb struct {
			Spec struct {
				MinAvailable int `json:"minAvailable"`
			}
		}
		if err := yaml.Unmarshal(o["PodDisruptionBudget/multinet-webhook"], &pdb); err != nil || pdb.Spec.MinAvailable != 1 {
			t.Errorf("PDB minAvailable %d (%v), want 1", pdb.Spec.MinAvailable, err)
		}
		if _, ok := o["Service/multinet-webhook"]; !ok {
			t.Error("no Service multinet-webhook")
		}
		if dir == "overlays/local" {
			for _, p := range append(append([]corev1.Container{}, spec.Containers...), spec.InitContainers...) {
				if p.ImagePullPolicy != corev1.PullNever || !strings.HasPrefix(p.Image, "localhost/multinet/") {
					t.Errorf("local container %s: image %s pull %s, want localhost/multinet/* and Never", p.Name, p.Image, p.ImagePullPolicy)
				}
			}
		}

		var dp appsv1.DaemonSet
		o.get(t, "DaemonSet/multinet-deviceplugin", &dp)
		dps := dp.Spec.Template.Spec
		if dps.AutomountServiceAccountToken == nil || *dps.AutomountServiceAccountToken {
			t.Error("the device plugin never calls the API server: automountServiceAccountToken must be false")
		}
		if dps.PriorityClassName != "system-node-critical" {
			t.Errorf("device plugin priorityClassName %q", dps.PriorityClassName)
		}
		cfg, err := dpconfig.Load(o.configFile(t, "deviceplugin-config", "deviceplugin.yaml"))
		if err != nil {
			t.Fatalf("deviceplugin.yaml does not load: %v", err)
		}
		mounts := mountsByPath(t, dps, container(t, dps, "deviceplugin"))
		if _, ok := mounts["/var/lib/kubelet/device-plugins"]; !ok {
			t.Error("the device plugin needs kubelet's device-plugins dir")
		}
		for _, p := range cfg.Pools {
			var dir string
			switch {
			case p.VhostUser != nil:
				dir = p.VhostUser.Dir
			case p.Memif != nil:
				dir = p.Memif.Dir
			default:
				continue
			}
			if m, ok := mounts[dir]; !ok || m.hostPath != dir {
				t.Errorf("pool %s: slot dir %s is not mounted at its host path", p.ResourceName, dir)
			}
		}
	})
}

// rules returns the rules of a ClusterRole or Role.
func rules(t *testing.T, o objects, key string) []rbacv1.PolicyRule {
	t.Helper()
	var r rbacv1.ClusterRole
	o.get(t, key, &r)
	return r.Rules
}

// allows reports whether rules grant verb on group/resource (name "" = any
// object), following RBAC's matching (including "*").
func allows(rules []rbacv1.PolicyRule, verb, group, resource, name string) bool {
	match := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if match(r.Verbs, verb) && match(r.APIGroups, group) && match(r.Resources, resource) &&
			(len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name))) {
			return true
		}
	}
	return false
}

func TestRBACLeastPrivilege(t *testing.T) {
	o := render(t, "overlays/default")
	d := rules(t, o, "ClusterRole/multinet:multinetd")
	for _, want := range [][3]string{
		{"list", "", "pods"}, {"watch", "", "pods"}, {"get", "", "pods"}, {"patch", "", "pods/status"},
		{"create", "", "events"}, {"patch", "", "events"},
		{"list", "k8s.cni.cncf.io", "network-attachment-definitions"}, {"watch", "k8s.cni.cncf.io", "network-attachment-definitions"},
		{"list", "k8s.cni.cncf.io", "ipamclaims"}, {"watch", "k8s.cni.cncf.io", "ipamclaims"},
		{"update", "k8s.cni.cncf.io", "ipamclaims/status"},
		{"get", "ipam.multinet.io", "ipallocations"}, {"list", "ipam.multinet.io", "ipallocations"},
		{"watch", "ipam.multinet.io", "ipallocations"}, {"create", "ipam.multinet.io", "ipallocations"},
		{"delete", "ipam.multinet.io", "ipallocations"},
	} {
		if !allows(d, want[0], want[1], want[2], "") {
			t.Errorf("multinetd cannot %s %s.%s", want[0], want[2], want[1])
		}
	}
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		if allows(d, verb, "", "secrets", "x") {
			t.Errorf("multinetd may %s secrets", verb)
		}
	}
	for _, deny := range [][3]string{
		{"patch", "", "pods"}, {"update", "", "pods"}, {"delete", "", "pods"},
		{"create", "k8s.cni.cncf.io", "network-attachment-definitions"}, {"update", "k8s.cni.cncf.io", "network-attachment-definitions"},
		{"delete", "k8s.cni.cncf.io", "network-attachment-definitions"}, {"get", "", "nodes"}, {"get", "", "configmaps"},
		// multinet-ipam writes a claim's status only, and never changes an allocation.
		{"update", "k8s.cni.cncf.io", "ipamclaims"}, {"patch", "k8s.cni.cncf.io", "ipamclaims"},
		{"delete", "k8s.cni.cncf.io", "ipamclaims"}, {"patch", "k8s.cni.cncf.io", "ipamclaims/status"},
		{"update", "ipam.multinet.io", "ipallocations"}, {"patch", "ipam.multinet.io", "ipallocations"},
		{"deletecollection", "ipam.multinet.io", "ipallocations"},
	} {
		if allows(d, deny[0], deny[1], deny[2], "x") {
			t.Errorf("multinetd may %s %s.%s", deny[0], deny[2], deny[1])
		}
	}

	w := rules(t, o, "ClusterRole/multinet:webhook")
	if !allows(w, "list", "k8s.cni.cncf.io", "network-attachment-definitions", "") || allows(w, "update", "k8s.cni.cncf.io", "network-attachment-definitions", "x") {
		t.Error("webhook: NADs must be read-only")
	}
	for _, kind := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		if !allows(w, "update", "admissionregistration.k8s.io", kind, "multinet-webhook") {
			t.Errorf("webhook cannot update its %s (caBundle)", kind)
		}
		if allows(w, "update", "admissionregistration.k8s.io", kind, "someone-elses") || allows(w, "delete", "admissionregistration.k8s.io", kind, "multinet-webhook") {
			t.Errorf("webhook may change %s other than its own caBundle", kind)
		}
	}
	if allows(w, "get", "", "secrets", "x") || allows(w, "get", "", "pods", "x") || allows(w, "watch", "", "pods", "") {
		t.Error("webhook: no cluster-wide secrets, no pod get or watch")
	}
	// The IPAMClaim status webhook lists a namespace's pods of one node.
	if !allows(w, "list", "", "pods", "") {
		t.Error("webhook cannot list pods (IPAMClaim status writes of multinetd)")
	}
	ws := rules(t, o, "Role/multinet:webhook")
	if !allows(ws, "get", "", "secrets", "multinet-webhook-certs") || !allows(ws, "update", "", "secrets", "multinet-webhook-certs") {
		t.Error("webhook cannot manage its certificate Secret")
	}
	// The install ships the Secret (TestWebhookCertSecretShipped): the
	// webhook creates none, of any name.
	if allows(ws, "create", "", "secrets", "") || allows(ws, "create", "", "secrets", "multinet-webhook-certs") {
		t.Error("webhook may create Secrets")
	}
	if allows(ws, "get", "", "secrets", "other") || allows(ws, "list", "", "secrets", "") || allows(ws, "watch", "", "secrets", "") {
		t.Error("webhook may read Secrets other than its own")
	}

	// Every binding names its own ServiceAccount in multinet-system, and
	// the device plugin has none.
	for key, b := range o {
		if !strings.HasSuffix(strings.SplitN(key, "/", 2)[0], "Binding") {
			continue
		}
		var rb rbacv1.ClusterRoleBinding
		if err := yaml.Unmarshal(b, &rb); err != nil {
			t.Fatal(err)
		}
		for _, s := range rb.Subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != "multinet-system" || s.Name == "multinet-deviceplugin" {
				t.Errorf("%s: subject %+v", key, s)
			}
		}
	}
}

// webhookOptions are the options main derives from the Deployment's flags
// (deploy/base/webhook-deployment.yaml); a url clientConfig when url is set.
func webhookOptions(url string) registration.Options {
	return registration.Options{
		MutatingName: "multinet-webhook", ValidatingName: "multinet-webhook",
		ServiceNamespace: "multinet-system", ServiceName: "multinet-webhook", ServicePort: 443,
		URL:               url,
		ExcludeNamespaces: []string{"kube-system", "multinet-system"},
		TimeoutSeconds:    registration.DefaultTimeoutSeconds,
	}
}

// printed is what `multinet-webhook --print-webhook-configurations` writes.
func printed(t *testing.T, o registration.Options) []byte {
	t.Helper()
	mwc, vwc, err := registration.Render(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, obj := range []any{mwc, vwc} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	return []byte(strings.Join(parts, "---\n"))
}

func TestWebhookConfigurationsCurrent(t *testing.T) {
	const file = "base/webhook-configurations.yaml"
	want := printed(t, webhookOptions(""))
	if *update {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is not what the webhook renders; regenerate it:\n  go run ./cmd/multinet-webhook --print-webhook-configurations --namespace multinet-system > deploy/%s\n(or go test ./deploy -run TestWebhookConfigurationsCurrent -update)", file, file)
	}

	// Rendered overlays: the same webhooks, both calling the Service.
	const url = ""
	for _, dir := range []string{"overlays/default", "overlays/local"} {
		o := render(t, dir)
		mwc, vwc, err := registration.Render(webhookOptions(url), nil)
		if err != nil {
			t.Fatal(err)
		}
		var gotM admv1.MutatingWebhookConfiguration
		var gotV admv1.ValidatingWebhookConfiguration
		o.get(t, "MutatingWebhookConfiguration/multinet-webhook", &gotM)
		o.get(t, "ValidatingWebhookConfiguration/multinet-webhook", &gotV)
		if !equality.Semantic.DeepEqual(gotM.Webhooks, mwc.Webhooks) {
			t.Errorf("%s: mutating webhooks differ from registration.Render(url=%q):\n%s", dir, url, diffYAML(gotM.Webhooks, mwc.Webhooks))
		}
		if !equality.Semantic.DeepEqual(gotV.Webhooks, vwc.Webhooks) {
			t.Errorf("%s: validating webhooks differ from registration.Render(url=%q):\n%s", dir, url, diffYAML(gotV.Webhooks, vwc.Webhooks))
		}
	}
}

func diffYAML(got, want any) string {
	g, _ := yaml.Marshal(got)
	w, _ := yaml.Marshal(want)
	return fmt.Sprintf("got:\n%s\nwant:\n%s", g, w)
}

// TestInClusterConfiguration: in every overlay, every container reaches the
// API server as on any cluster, through the kubernetes Service with
// in-cluster configuration: none overrides KUBERNETES_SERVICE_HOST or
// KUBERNETES_SERVICE_PORT (the local cluster runs kube-proxy).
func TestInClusterConfiguration(t *testing.T) {
	for _, dir := range []string{"overlays/default", "overlays/local"} {
		o := render(t, dir)
		n := 0
		for _, key := range o.keys() {
			if !strings.HasPrefix(key, "DaemonSet/") && !strings.HasPrefix(key, "Deployment/") {
				continue
			}
			var w appsv1.Deployment // the pod template is what matters; a DaemonSet's decodes into the same fields
			if err := yaml.Unmarshal(o[key], &w); err != nil {
				t.Fatalf("%s: %s: %v", dir, key, err)
			}
			spec := w.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container{}, spec.Containers...), spec.InitContainers...) {
				n++
				for _, e := range c.Env {
					if e.Name == "KUBERNETES_SERVICE_HOST" || e.Name == "KUBERNETES_SERVICE_PORT" {
						t.Errorf("%s: %s container %s sets %s=%s: want in-cluster configuration", dir, key, c.Name, e.Name, e.Value)
					}
				}
			}
		}
		if n < 4 {
			t.Errorf("%s: checked %d containers, want the multinetd, webhook and device plugin ones", dir, n)
		}
	}
}

// shippedGlobalNamespaces is the documented list of namespaces whose NADs
// every pod may select under the shipped namespace isolation
// (docs/install.md "Namespace isolation").
var shippedGlobalNamespaces = []string{"default"}

// webhookIsolation parses the webhook container's isolation flags as the
// binary's flag package does (-x, --x, -x=v, --x=v, "--x v"): whether
// --namespace-isolation is on, and --global-namespaces split on commas.
func webhookIsolation(t *testing.T, args []string) (bool, []string) {
	t.Helper()
	fs := flag.NewFlagSet("multinet-webhook", flag.ContinueOnError)
	on := fs.Bool("namespace-isolation", false, "")
	globals := fs.String("global-namespaces", "", "")
	var ours []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		switch name {
		case "namespace-isolation":
			ours = append(ours, args[i])
		case "global-namespaces":
			ours = append(ours, args[i])
			if !hasValue && i+1 < len(args) {
				i++
				ours = append(ours, args[i])
			}
		}
	}
	if err := fs.Parse(ours); err != nil {
		t.Fatalf("webhook args %q: %v", ours, err)
	}
	var list []string
	for _, ns := range strings.Split(*globals, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			list = append(list, ns)
		}
	}
	return *on, list
}

// TestNamespaceIsolationOn: every overlay ships namespace isolation (spec
// §7.4) on in both places that enforce it, multinetd (namespaceIsolation,
// globalNamespaces in its configuration) and the webhook
// (--namespace-isolation, --global-namespaces), with the same global
// namespaces, the documented ones; otherwise any pod could select any
// namespace's NAD or replace its primary network, or pass admission and
// then fail at ADD. docs/install.md shows the shipped list.
func TestNamespaceIsolationOn(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		cfg, err := daemon.LoadConfig(o.configFile(t, "multinetd-config", "multinetd.yaml"))
		if err != nil {
			t.Fatalf("multinetd.yaml does not load: %v", err)
		}
		if !cfg.NamespaceIsolation {
			t.Error("multinetd.yaml: namespaceIsolation is off; want true (spec §7.4)")
		}
		if !slices.Equal(cfg.GlobalNamespaces, shippedGlobalNamespaces) {
			t.Errorf("multinetd.yaml: globalNamespaces %q, want the documented %q", cfg.GlobalNamespaces, shippedGlobalNamespaces)
		}

		var d appsv1.Deployment
		o.get(t, "Deployment/multinet-webhook", &d)
		on, globals := webhookIsolation(t, container(t, d.Spec.Template.Spec, "webhook").Args)
		if !on {
			t.Error("webhook: --namespace-isolation is not set; want it on (spec §7.4)")
		}
		if !slices.Equal(globals, cfg.GlobalNamespaces) {
			t.Errorf("webhook --global-namespaces %q, multinetd globalNamespaces %q: want the same list", globals, cfg.GlobalNamespaces)
		}
	})

	doc, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("globalNamespaces: [%s]", strings.Join(shippedGlobalNamespaces, ", "))
	if !strings.Contains(string(doc), want) || !strings.Contains(string(doc), "--global-namespaces="+strings.Join(shippedGlobalNamespaces, ",")) {
		t.Errorf("docs/install.md does not show the shipped list (%q and --global-namespaces=%s)", want, strings.Join(shippedGlobalNamespaces, ","))
	}
}

// shippedSystemNamespaces are the namespaces whose pods never get
// multinetd's defaultNetworks as shipped: Multus's kube-system, and
// multinet-system, where the webhook's pods (not hostNetwork) must not
// depend on an operator's extra networks (docs/decisions/attach.md).
var shippedSystemNamespaces = []string{"kube-system", "multinet-system"}

// TestSystemNamespaces: every overlay ships systemNamespaces with
// kube-system and multinet-system and no defaultNetworks, so that adding
// defaultNetworks to the shipped configuration never reaches multinet's own
// pods, and the webhook's --system-namespaces is the same list (one verdict
// at admission and at ADD, docs/validation.md).
func TestSystemNamespaces(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		cfg, err := daemon.LoadConfig(o.configFile(t, "multinetd-config", "multinetd.yaml"))
		if err != nil {
			t.Fatalf("multinetd.yaml does not load: %v", err)
		}
		if !slices.Equal(cfg.SystemNamespaces, shippedSystemNamespaces) {
			t.Errorf("multinetd.yaml: systemNamespaces %q, want %q", cfg.SystemNamespaces, shippedSystemNamespaces)
		}
		if len(cfg.DefaultNetworks) != 0 {
			t.Errorf("multinetd.yaml: defaultNetworks %q, want none as shipped", cfg.DefaultNetworks)
		}
		var d appsv1.Deployment
		o.get(t, "Deployment/multinet-webhook", &d)
		if got := webhookListFlag(t, container(t, d.Spec.Template.Spec, "webhook").Args, "system-namespaces"); !slices.Equal(got, cfg.SystemNamespaces) {
			t.Errorf("webhook --system-namespaces %q, multinetd systemNamespaces %q: want the same list", got, cfg.SystemNamespaces)
		}
		cfg.NodeName = "node"
		if err := cfg.Complete(); err != nil {
			t.Errorf("multinetd.yaml: %v", err)
		}
	})
}

// TestUndeclaredCapabilitiesShipped: every overlay ships the spec's rule
// for a key no plugin of the NAD declares (§4.1.2.1.3.2, §4.1.2.1.4.2) in
// multinetd (undeclaredCapabilities) and in the webhook
// (--undeclared-capabilities): "multus" is an operator's migration choice
// (docs/migrating-from-multus.md), never a default.
func TestUndeclaredCapabilitiesShipped(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		cfg, err := daemon.LoadConfig(o.configFile(t, "multinetd-config", "multinetd.yaml"))
		if err != nil {
			t.Fatalf("multinetd.yaml does not load: %v", err)
		}
		if u, err := podnetworks.ParseUndeclaredCapabilities(cfg.UndeclaredCapabilities); err != nil || u != podnetworks.RefuseUndeclared {
			t.Errorf("multinetd.yaml: undeclaredCapabilities %q (%v), want the default, refuse", cfg.UndeclaredCapabilities, err)
		}
		var d appsv1.Deployment
		o.get(t, "Deployment/multinet-webhook", &d)
		got := strings.Join(webhookListFlag(t, container(t, d.Spec.Template.Spec, "webhook").Args, "undeclared-capabilities"), ",")
		if u, err := podnetworks.ParseUndeclaredCapabilities(got); err != nil || u != podnetworks.RefuseUndeclared {
			t.Errorf("webhook --undeclared-capabilities %q (%v), want the default, refuse", got, err)
		}
	})
}

// webhookListFlag returns the comma-separated list of the webhook's flag
// --name (-name, --name=v or "--name v"), nil when it is not given.
func webhookListFlag(t *testing.T, args []string, name string) []string {
	t.Helper()
	for i := 0; i < len(args); i++ {
		flagName, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if flagName != name {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		var list []string
		for _, ns := range strings.Split(value, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				list = append(list, ns)
			}
		}
		return list
	}
	return nil
}
