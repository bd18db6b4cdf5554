// Tests of the Helm chart deploy/helm/multinet (generated from deploy/ by
// this command, make helm; docs/decisions/helm.md), with Helm's own Go
// packages: what `helm template` renders, with the default values and with
// each value the chart documents, and `helm lint`. In the hack/tools module
// so that Helm's dependencies stay out of the product's go.mod.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/internal/render/helmchart"
	"github.com/multinet/multinet/internal/render/manifests"
)

const (
	chartDir  = "../../../deploy/helm/multinet"
	namespace = "multinet-system"
	// kubeVersion is the cluster version the chart is rendered for (Chart.yaml's kubeVersion admits it).
	kubeVersion = "v1.34.0"
)

// chartPath is the chart render loads.
var chartPath = chartDir

// render is `helm template multinet deploy/helm/multinet -n ns --include-crds --set sets...`.
func render(t *testing.T, ns string, sets ...string) (string, error) {
	t.Helper()
	chrt, err := loader.Load(chartPath)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = "multinet"
	install.Namespace = ns
	install.KubeVersion = kv
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		t.Fatalf("release is a %T", rel)
	}
	return r.Manifest, nil
}

func mustRender(t *testing.T, sets ...string) string {
	t.Helper()
	out, err := render(t, namespace, sets...)
	if err != nil {
		t.Fatalf("helm template --set %v: %v", sets, err)
	}
	return out
}

// hashed are the names kustomize's configMapGenerator and the chart end
// with a content hash (10 characters) of.
var hashed = regexp.MustCompile(`\b(multinetd-config|deviceplugin-config|dra-driver-config|multinet-nad-trust)-[a-z0-9]{10}\b`)

type objects map[string]map[string]any

var clusterScoped = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// parse splits a multi-document manifest into objects by
// "kind namespace/name", the generated ConfigMaps' hashes replaced by HASH.
func parse(t *testing.T, manifest string) objects {
	t.Helper()
	objs := objects{}
	manifest = hashed.ReplaceAllString(manifest, "$1-HASH")
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(manifest, -1) {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("parsing %q: %v", doc, err)
		}
		if o == nil {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		if clusterScoped[fmt.Sprint(o["kind"])] {
			// kustomize before v0.21.2 gives them the namespace.
			delete(md, "namespace")
		}
		key := fmt.Sprintf("%s %v/%v", o["kind"], md["namespace"], md["name"])
		if _, dup := objs[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		objs[key] = o
	}
	return objs
}

func kustomize(t *testing.T, overlay string) objects {
	t.Helper()
	b, err := manifests.Render(filepath.Join("..", "..", "..", "deploy", "overlays", overlay), nil)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, string(b))
}

func keys(o objects) []string {
	var ks []string
	for k := range o {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestChartMatchesKustomize: with the default values the chart renders
// exactly the objects of deploy/overlays/default, and with
// node.distribution=<d> those of deploy/overlays/<d>: same objects, same
// fields (the generated ConfigMaps' hash suffixes aside).
func TestChartMatchesKustomize(t *testing.T) {
	for _, d := range append([]string{"default"}, helmchart.Distributions...) {
		t.Run(d, func(t *testing.T) {
			var sets []string
			if d != "default" {
				sets = append(sets, "node.distribution="+d)
			}
			got, want := parse(t, mustRender(t, sets...)), kustomize(t, d)
			if d != "default" {
				// The distributions' multinetd.yaml differ from the base's
				// in their comments too: compare what they configure.
				configData(t, got)
				configData(t, want)
			}
			if diff := cmp.Diff(keys(want), keys(got)); diff != "" {
				t.Fatalf("objects (-kustomize +helm):\n%s", diff)
			}
			for k, w := range want {
				if diff := cmp.Diff(w, got[k]); diff != "" {
					t.Errorf("%s (-kustomize +helm):\n%s", k, diff)
				}
			}
		})
	}
}

// configData replaces each ConfigMap's data by the parsed YAML of its values.
func configData(t *testing.T, objs objects) {
	t.Helper()
	for k, o := range objs {
		data, _ := o["data"].(map[string]any)
		if o["kind"] != "ConfigMap" || data == nil {
			continue
		}
		for key, v := range data {
			var parsed any
			if err := yaml.Unmarshal([]byte(fmt.Sprint(v)), &parsed); err != nil {
				t.Fatalf("%s %s: %v", k, key, err)
			}
			data[key] = parsed
		}
	}
}

// TestChartUpToDate: the committed chart is what deploy/ generates (make helm).
func TestChartUpToDate(t *testing.T) {
	files, err := helmchart.Generate(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if stale := helmchart.Diff(chartDir, files); len(stale) > 0 {
		t.Fatalf("deploy/helm/multinet is stale, run make helm: %s", strings.Join(stale, ", "))
	}
}

// TestChartLint is `helm lint --strict`: no message at all, with the
// default values and with the documented non-default ones.
func TestChartLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, sets := range [][]string{nil, {"node.distribution=k3s", "undeclaredCapabilities=multus", "namespaceIsolation.enabled=false"}} {
		vals := map[string]any{}
		for _, s := range sets {
			if err := strvals.ParseInto(s, vals); err != nil {
				t.Fatal(err)
			}
		}
		res := lint.RunAll(chartDir, vals, namespace, lint.WithKubeVersion(kv))
		for _, m := range res.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint --set %v: %s", sets, m)
			}
		}
		if len(res.Messages) == 0 && res.HighestSeverity != support.UnknownSev {
			t.Errorf("helm lint: highest severity %d", res.HighestSeverity)
		}
	}
}

func object(t *testing.T, objs objects, key string) map[string]any {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("no %s in %v", key, keys(objs))
	}
	return o
}

// field walks o along path (map keys; "name=x" picks the list element named x).
func field(t *testing.T, o any, path ...string) any {
	t.Helper()
	for _, p := range path {
		switch v := o.(type) {
		case map[string]any:
			o = v[p]
		case []any:
			n, ok := strings.CutPrefix(p, "name=")
			if !ok {
				t.Fatalf("%s: a list, want name=...", p)
			}
			o = nil
			for _, e := range v {
				if m, ok := e.(map[string]any); ok && m["name"] == n {
					o = m
				}
			}
		default:
			t.Fatalf("%v: no %s", path, p)
		}
	}
	return o
}

func dump(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

const (
	multinetd = "DaemonSet multinet-system/multinetd"
	webhook   = "Deployment multinet-system/multinet-webhook"
)

// TestChartValues: each documented value changes what it says, and only that.
func TestChartValues(t *testing.T) {
	t.Run("images", func(t *testing.T) {
		objs := parse(t, mustRender(t, "images.multinetd.repository=registry.example/multinet/multinetd", "images.multinetd.tag=v1.2.3",
			"images.webhook.repository=registry.example/multinet/webhook", "images.webhook.digest=sha256:"+strings.Repeat("a", 64),
			"imagePullPolicy=Always"))
		for _, c := range []struct{ key, list, name, want string }{
			{multinetd, "containers", "multinetd", "registry.example/multinet/multinetd:v1.2.3"},
			{multinetd, "initContainers", "install-cni", "registry.example/multinet/multinetd:v1.2.3"},
			{webhook, "containers", "webhook", "registry.example/multinet/webhook@sha256:" + strings.Repeat("a", 64)},
			{"Deployment multinet-system/multinet-ipam-cleanup", "containers", "cleanup", "registry.example/multinet/webhook@sha256:" + strings.Repeat("a", 64)},
			{"DaemonSet multinet-system/multinet-dra-driver", "containers", "dra-driver", "multinet/dra-driver:latest"},
		} {
			c2 := field(t, object(t, objs, c.key), "spec", "template", "spec", c.list, "name="+c.name)
			if got := field(t, c2, "image"); got != c.want {
				t.Errorf("%s %s: image %v, want %s", c.key, c.name, got, c.want)
			}
			if got := field(t, c2, "imagePullPolicy"); got != "Always" {
				t.Errorf("%s %s: imagePullPolicy %v, want Always", c.key, c.name, got)
			}
		}
	})
	t.Run("node layout", func(t *testing.T) {
		objs := parse(t, mustRender(t, "node.distribution=k3s", "node.cniBinDirs={/node/bin,/node/bin2}", "node.runtimeEndpoint=unix:///host/run/x.sock"))
		spec := field(t, object(t, objs, multinetd), "spec", "template", "spec")
		ic := field(t, spec, "initContainers", "name=install-cni")
		if got := dump(field(t, ic, "args")); !strings.Contains(got, "--cni-bin-dir=/node/bin\n") || !strings.Contains(got, "--cni-conf-dir=/var/lib/rancher/k3s/agent/etc/cni/net.d\n") {
			t.Errorf("install-cni args:\n%s", got)
		}
		if got := field(t, spec, "volumes", "name=cni-bin", "hostPath", "path"); got != "/node/bin" {
			t.Errorf("cni-bin volume %v", got)
		}
		cfg := multinetdConfig(t, objs)
		for _, want := range []string{"\ncniBinDirs: [/node/bin, /node/bin2]\n", "\ncniConfDir: /var/lib/rancher/k3s/agent/etc/cni/net.d\n", "\nruntimeEndpoint: unix:///host/run/x.sock\n"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("multinetd.yaml has no %q", want)
			}
		}
		if _, err := render(t, namespace, "node.distribution=minikube"); err == nil || !strings.Contains(err.Error(), `node.distribution "minikube": want one of generic, k3s, openshift, rke2, talos`) {
			t.Errorf("node.distribution=minikube: %v, want the presets named", err)
		}
	})
	t.Run("namespace isolation and undeclared capabilities", func(t *testing.T) {
		objs := parse(t, mustRender(t, "namespaceIsolation.enabled=false", "namespaceIsolation.globalNamespaces={default,shared}", "undeclaredCapabilities=multus"))
		args := dump(field(t, object(t, objs, webhook), "spec", "template", "spec", "containers", "name=webhook", "args"))
		if strings.Contains(args, "--namespace-isolation\n") || !strings.Contains(args, "--global-namespaces=default,shared\n") || !strings.Contains(args, "--undeclared-capabilities=multus\n") {
			t.Errorf("webhook args:\n%s", args)
		}
		cfg := multinetdConfig(t, objs)
		for _, want := range []string{"\nnamespaceIsolation: false\n", "\nglobalNamespaces: [default, shared]\n", "\nundeclaredCapabilities: multus\n"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("multinetd.yaml has no %q:\n%s", want, cfg)
			}
		}
	})
	t.Run("a changed config renames its ConfigMap", func(t *testing.T) {
		name := func(out string) string {
			return regexp.MustCompile(`multinetd-config-[a-z0-9]{10}`).FindString(out)
		}
		def, changed := mustRender(t), mustRender(t, "node.distribution=rke2")
		if name(def) == "" || name(def) == name(changed) {
			t.Errorf("multinetd-config names %q and %q: want the hash to change with the content", name(def), name(changed))
		}
		if n := strings.Count(changed, name(changed)); n != 2 {
			t.Errorf("%s named %d times, want 2 (the ConfigMap, the DaemonSet's volume)", name(changed), n)
		}
	})
	t.Run("resources and priority classes", func(t *testing.T) {
		objs := parse(t, mustRender(t, "multinetd.resources.requests.cpu=250m", "webhook.priorityClassName=high", "ipamCleanup.resources.limits.memory=1Gi"))
		if got := field(t, object(t, objs, multinetd), "spec", "template", "spec", "containers", "name=multinetd", "resources", "requests", "cpu"); got != "250m" {
			t.Errorf("multinetd cpu request %v", got)
		}
		if got := field(t, object(t, objs, webhook), "spec", "template", "spec", "priorityClassName"); got != "high" {
			t.Errorf("webhook priorityClassName %v", got)
		}
		if got := field(t, object(t, objs, "Deployment multinet-system/multinet-ipam-cleanup"), "spec", "template", "spec", "containers", "name=cleanup", "resources", "limits", "memory"); got != "1Gi" {
			t.Errorf("ipam-cleanup memory limit %v", got)
		}
	})
	t.Run("namespace", func(t *testing.T) {
		out, err := render(t, "cni-system", "namespace.create=false")
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.Index(out, namespace); i >= 0 {
			t.Errorf("rendered into cni-system, still names %s: %s", namespace, out[max(0, i-300):i+50])
		}
		objs := parse(t, out)
		if _, ok := objs["Namespace <nil>/cni-system"]; ok {
			t.Errorf("namespace.create=false renders the Namespace")
		}
		sub := field(t, object(t, objs, "ClusterRoleBinding <nil>/multinet:multinetd"), "subjects")
		if !strings.Contains(dump(sub), "namespace: cni-system\n") {
			t.Errorf("ClusterRoleBinding subjects:\n%s", dump(sub))
		}
		with := parse(t, mustRender(t))
		if _, ok := with["Namespace <nil>/multinet-system"]; !ok {
			t.Errorf("the default renders no Namespace")
		}
	})
}

func multinetdConfig(t *testing.T, objs objects) string {
	t.Helper()
	cfg, _ := field(t, object(t, objs, "ConfigMap multinet-system/multinetd-config-HASH"), "data", "multinetd.yaml").(string)
	return cfg
}

// TestChartMonitoring: the ServiceMonitors/PodMonitors and Grafana
// dashboards of deploy/observability become templates that render nothing
// by default and, with monitoring.monitors.enabled and
// monitoring.dashboard.enabled, the monitors in the release namespace with
// the extra labels and the dashboards verbatim in a labelled ConfigMap
// (other kinds there, such as PrometheusRules, are not the chart's). Made-up
// files in testdata/observability, so that the test does not depend on
// which monitors deploy/observability holds.
func TestChartMonitoring(t *testing.T) {
	files, err := helmchart.GenerateWith(filepath.Join("..", "..", ".."), filepath.Join("testdata", "observability"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "multinet")
	if err := helmchart.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	renderDir := func(ns string, sets ...string) string {
		t.Helper()
		old := chartPath
		chartPath = dir
		defer func() { chartPath = old }()
		out, err := render(t, ns, sets...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := renderDir(namespace); strings.Contains(out, "kind: PodMonitor") || strings.Contains(out, "multinet-dashboards") {
		t.Errorf("monitoring is off by default, but rendered")
	}
	objs := parse(t, renderDir("cni-system", "monitoring.monitors.enabled=true", "monitoring.monitors.labels.release=prom",
		"monitoring.dashboard.enabled=true", "monitoring.dashboard.namespace=grafana"))
	pm := object(t, objs, "PodMonitor cni-system/multinet-webhook")
	if got := dump(field(t, pm, "metadata", "labels")); got != "app.kubernetes.io/name: multinet-webhook\napp.kubernetes.io/part-of: multinet\nrelease: prom\n" {
		t.Errorf("PodMonitor labels:\n%s", got)
	}
	if got := dump(field(t, pm, "spec", "namespaceSelector")); got != "matchNames:\n- cni-system\n" {
		t.Errorf("PodMonitor namespaceSelector:\n%s", got)
	}
	for k := range objs {
		if strings.HasPrefix(k, "PrometheusRule ") {
			t.Errorf("%s rendered: not the chart's", k)
		}
	}
	cm := object(t, objs, "ConfigMap grafana/multinet-dashboards")
	want, err := os.ReadFile(filepath.Join("testdata", "observability", "multinet.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := field(t, cm, "data", "multinet.json"); got != string(want) {
		t.Errorf("dashboard:\n%v\nwant it verbatim:\n%s", got, want)
	}
	if got := field(t, cm, "metadata", "labels", "grafana_dashboard"); got != "1" {
		t.Errorf("dashboard ConfigMap label grafana_dashboard %v, want \"1\"", got)
	}
}

// TestChartShippedMonitoring: the chart's monitors and dashboard are
// deploy/observability's: with monitoring on, every PodMonitor/ServiceMonitor
// there is rendered in the release namespace and the dashboard ConfigMap
// holds every dashboard JSON verbatim.
func TestChartShippedMonitoring(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "deploy", "observability")
	files, err := helmchart.GenerateWith(filepath.Join("..", "..", ".."), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["templates/monitors.yaml"]; !ok {
		t.Fatalf("no monitors in %s", dir)
	}
	objs := parse(t, mustRender(t, "monitoring.monitors.enabled=true", "monitoring.dashboard.enabled=true"))
	yamls, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	monitors := 0
	for _, f := range yamls {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for k, o := range parse(t, string(b)) {
			if o["kind"] != "PodMonitor" && o["kind"] != "ServiceMonitor" {
				continue
			}
			monitors++
			got := object(t, objs, k)
			if diff := cmp.Diff(o["spec"], got["spec"]); diff != "" {
				t.Errorf("%s (-%s +chart):\n%s", k, f, diff)
			}
		}
	}
	if monitors == 0 {
		t.Fatalf("no PodMonitor or ServiceMonitor in %s", dir)
	}
	jsons, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	cm := object(t, objs, "ConfigMap multinet-system/multinet-dashboards")
	for _, f := range jsons {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := field(t, cm, "data", filepath.Base(f)); got != strings.TrimRight(string(b), "\n")+"\n" {
			t.Errorf("dashboard %s in the chart differs from the file", filepath.Base(f))
		}
	}
}

// TestLocalPostRenderer: the chart, post-rendered for the local cluster by
// hack/helm/plugins/multinet-local (MULTINET_DEPLOY=helm), is
// deploy/overlays/local: the same objects and fields (hack/cluster-deployed.sh
// applies the CRDs and the namespace itself; the hash suffixes aside), so
// that the e2e suite on a cluster brought up from the chart runs what it runs
// on one brought up with kustomize.
func TestLocalPostRenderer(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatalf("the post-renderer needs jq (make packages): %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sets := []string{"namespace.create=false", "imagePullPolicy=Never"}
	for _, i := range [][2]string{{"multinetd", "multinetd"}, {"webhook", "webhook"}, {"deviceplugin", "deviceplugin"}, {"draDriver", "dra-driver"}} {
		sets = append(sets, "images."+i[0]+".repository=localhost/multinet/"+i[1], "images."+i[0]+".tag=dev")
	}
	var noCRDs []string
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(mustRender(t, sets...), -1) {
		if !strings.Contains(doc, "\nkind: CustomResourceDefinition\n") {
			noCRDs = append(noCRDs, doc)
		}
	}
	kustomizeBin := filepath.Join(t.TempDir(), "manifests")
	if out, err := exec.Command("go", "build", "-o", kustomizeBin, "../manifests").CombinedOutput(); err != nil {
		t.Fatalf("go build ../manifests: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "helm", "plugins", "multinet-local", "post-render.sh"))
	cmd.Env = append(os.Environ(), "MULTINET_ROOT="+root, "CLUSTER_DIR=/cluster", "KUSTOMIZE="+kustomizeBin+" -overlay")
	cmd.Stdin = strings.NewReader(strings.Join(noCRDs, "\n---\n"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("post-render.sh: %v", err)
	}
	got := parse(t, string(out))
	b, err := manifests.Render(filepath.Join(root, "deploy", "overlays", "local"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := parse(t, strings.ReplaceAll(string(b), "/work/main/_output/cluster", "/cluster"))
	for k, o := range want {
		if o["kind"] == "CustomResourceDefinition" || o["kind"] == "Namespace" {
			delete(want, k)
		}
	}
	if diff := cmp.Diff(keys(want), keys(got)); diff != "" {
		t.Fatalf("objects (-kustomize local +chart post-rendered):\n%s", diff)
	}
	for k, w := range want {
		if diff := cmp.Diff(w, got[k]); diff != "" {
			t.Errorf("%s (-kustomize local +chart post-rendered):\n%s", k, diff)
		}
	}
}
