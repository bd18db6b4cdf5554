// Package helmchart generates multinet's Helm chart (deploy/helm/multinet)
// from the kustomize overlay deploy/overlays/default, so that the chart and
// the kustomize install are one source of truth (docs/decisions/helm.md):
// every object of the overlay becomes a template, with the values-driven
// fields (images, the release namespace, the node layout, namespace
// isolation, undeclaredCapabilities, resources, priority classes) replaced
// by template expressions whose defaults are the overlay's own values. The
// distribution overlays (deploy/overlays/k3s, ...) become the presets of
// node.distribution, and the monitors and dashboards of
// deploy/observability/ become optional templates. make helm writes it;
// make verify fails when the committed chart differs.
package helmchart

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/internal/render/manifests"
)

// Version is the chart's version (Chart.yaml). Raise it with every change
// of the chart's values or templates that a release ships.
const Version = "0.1.0"

// Namespace is the namespace deploy/base installs into; in the chart it is
// the release's namespace.
const Namespace = "multinet-system"

// Distributions are the overlays of deploy/overlays whose node layout
// (multinetd.yaml's cniConfDir, cniBinDirs, runtimeEndpoint) becomes a
// preset of the value node.distribution.
var Distributions = []string{"k3s", "rke2", "openshift", "talos"}

// Generated ConfigMaps: kustomize appends a hash of the content to their
// names; the chart appends the first 10 hex digits of the content's SHA-256,
// so that a changed configuration rolls the workloads that mount it.
var generatedConfigMaps = []struct{ name, key string }{
	{"multinetd-config", "multinetd.yaml"},
	{"deviceplugin-config", "deviceplugin.yaml"},
	{"dra-driver-config", "dra-driver.yaml"},
	{"multinet-nad-trust", "nad-trust.yaml"},
}

// component is a workload whose image, resources and priority class are values.
type component struct {
	key       string // values key
	kind      string
	name      string // object name
	container string
	image     string // images key
}

var components = []component{
	{"multinetd", "DaemonSet", "multinetd", "multinetd", "multinetd"},
	{"webhook", "Deployment", "multinet-webhook", "webhook", "webhook"},
	{"deviceplugin", "DaemonSet", "multinet-deviceplugin", "deviceplugin", "deviceplugin"},
	{"draDriver", "DaemonSet", "multinet-dra-driver", "dra-driver", "draDriver"},
	{"ipamCleanup", "Deployment", "multinet-ipam-cleanup", "cleanup", "webhook"},
}

// imageKeys maps deploy/'s image names (multinet/<name>) to values keys.
var imageKeys = map[string]string{"multinetd": "multinetd", "webhook": "webhook", "deviceplugin": "deviceplugin", "dra-driver": "draDriver"}

// Generate renders the chart from the repository at root: the overlay
// deploy/overlays/default, the distribution overlays and
// deploy/observability (optional). It returns the chart's files by path
// relative to the chart directory.
func Generate(root string) (map[string][]byte, error) {
	return GenerateWith(root, filepath.Join(root, "deploy/observability"))
}

// GenerateWith is Generate with the monitors and dashboards of
// observabilityDir.
func GenerateWith(root, observabilityDir string) (map[string][]byte, error) {
	out, err := manifests.Render(filepath.Join(root, "deploy/overlays/default"), nil)
	if err != nil {
		return nil, err
	}
	objs, err := splitObjects(out)
	if err != nil {
		return nil, err
	}
	g := &gen{files: map[string][]byte{}, values: &values{}}
	if err := g.layouts(root); err != nil {
		return nil, err
	}
	if err := g.objects(objs); err != nil {
		return nil, err
	}
	if err := g.observability(observabilityDir); err != nil {
		return nil, err
	}
	if err := g.finish(); err != nil {
		return nil, err
	}
	return g.files, nil
}

// Write writes files under dir, removing the templates and CRDs a previous
// generation wrote that are no longer generated.
func Write(dir string, files map[string][]byte) error {
	for _, sub := range []string{"templates", "crds"} {
		old, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, p := range old {
			rel, _ := filepath.Rel(dir, p)
			if _, ok := files[rel]; !ok {
				if err := os.Remove(p); err != nil {
					return err
				}
			}
		}
	}
	for rel, b := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Diff lists the files under dir that differ from files, are missing, or
// are generated files (templates/, crds/) no longer generated.
func Diff(dir string, files map[string][]byte) []string {
	var stale []string
	for rel, b := range files {
		have, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || !bytes.Equal(have, b) {
			stale = append(stale, rel)
		}
	}
	for _, sub := range []string{"templates", "crds"} {
		old, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, p := range old {
			rel, _ := filepath.Rel(dir, p)
			if _, ok := files[rel]; !ok {
				stale = append(stale, rel+" (no longer generated)")
			}
		}
	}
	sort.Strings(stale)
	return stale
}

type object = map[string]any

func splitObjects(b []byte) ([]object, error) {
	var objs []object
	for i, doc := range strings.Split(string(b), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// gen holds the chart being generated.
type gen struct {
	files  map[string][]byte
	values *values
	// tokens: placeholder -> replacement, given the column of the key the
	// placeholder is the value of.
	tokens []token
	// configs: generated ConfigMap base name -> its original kustomize name
	// and content (the define's body).
	configs map[string]*config
	seen    map[string]bool
}

type config struct {
	fullName string
	key      string
	content  string
}

// A token is a placeholder in the marshaled YAML; its replacement is
// computed from the column of the key whose value it is (in a line
// "<indent>[- ]key: TOKEN").
type token struct {
	block bool // replaces ": TOKEN" by ":" + the result; else TOKEN only
	f     func(col int) string
}

// inline returns a placeholder for (part of) a scalar, replaced by {{ expr }}.
func (g *gen) inline(expr string) string {
	return g.add(token{f: func(int) string { return "{{ " + expr + " }}" }})
}

// block returns a placeholder for a whole value: f returns what follows the
// key's colon.
func (g *gen) block(f func(col int) string) string {
	return g.add(token{block: true, f: f})
}

func (g *gen) add(t token) string {
	g.tokens = append(g.tokens, t)
	return fmt.Sprintf("__HELMCHART_%d__", len(g.tokens)-1)
}

var tokenRE = regexp.MustCompile(`(: )?__HELMCHART_(\d+)__`)

// toYAML is a block value rendered with toYaml.
func (g *gen) toYAML(expr string) string {
	return g.block(func(col int) string {
		return fmt.Sprintf("{{- toYaml %s | nindent %d }}", expr, col+2)
	})
}

// lines is a block value of list lines (each "- item" or a template
// action), indented at the key's column.
func (g *gen) lines(ls []string) string {
	return g.block(func(col int) string {
		var b strings.Builder
		for _, l := range ls {
			b.WriteString("\n" + strings.Repeat(" ", col) + l)
		}
		return b.String()
	})
}

// substitute replaces the placeholders in marshaled YAML.
func (g *gen) substitute(text string) string {
	ls := strings.Split(text, "\n")
	for i, l := range ls {
		col := len(l) - len(strings.TrimLeft(l, " -"))
		ls[i] = tokenRE.ReplaceAllStringFunc(l, func(m string) string {
			sm := tokenRE.FindStringSubmatch(m)
			var n int
			fmt.Sscanf(sm[2], "%d", &n)
			t := g.tokens[n]
			if t.block {
				return ":" + t.f(col)
			}
			return sm[1] + t.f(col)
		})
	}
	return strings.Join(ls, "\n")
}

// escape makes literal text safe in a Go template.
func escape(s string) string {
	return strings.ReplaceAll(s, "{{", `{{ "{{" }}`)
}

func (g *gen) objects(objs []object) error {
	g.configs = map[string]*config{}
	g.seen = map[string]bool{}
	// Generated ConfigMaps first: other objects name them.
	for _, o := range objs {
		if kind(o) != "ConfigMap" {
			continue
		}
		for _, c := range generatedConfigMaps {
			if n := name(o); strings.HasPrefix(n, c.name+"-") && len(n) == len(c.name)+11 {
				data, _ := o["data"].(map[string]any)
				s, ok := data[c.key].(string)
				if !ok || len(data) != 1 {
					return fmt.Errorf("ConfigMap %s: want one key %s", n, c.key)
				}
				g.configs[c.name] = &config{fullName: n, key: c.key, content: s}
			}
		}
	}
	for _, c := range generatedConfigMaps {
		if g.configs[c.name] == nil {
			return fmt.Errorf("the overlay generates no ConfigMap %s", c.name)
		}
	}
	for _, o := range objs {
		if err := g.object(o); err != nil {
			return fmt.Errorf("%s %s: %w", kind(o), name(o), err)
		}
	}
	for _, c := range components {
		if !g.seen[c.key] {
			return fmt.Errorf("%s %s (values %s) is not in the overlay", c.kind, c.name, c.key)
		}
	}
	return nil
}

func kind(o object) string { s, _ := o["kind"].(string); return s }
func name(o object) string {
	m, _ := o["metadata"].(map[string]any)
	s, _ := m["name"].(string)
	return s
}

// clusterScoped are kinds kustomize may give a namespace that the chart
// must not (Helm would reject a cluster-scoped object with one).
var clusterScoped = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

var fileNameRE = regexp.MustCompile(`[^a-z0-9.-]+`)

func (g *gen) object(o object) error {
	k, n := kind(o), name(o)
	if k == "CustomResourceDefinition" {
		// crds/: Helm installs them before the templates and never
		// upgrades or deletes them (the NADs they hold outlive the chart).
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), Namespace) || strings.Contains(string(b), "{{") {
			return fmt.Errorf("a CRD cannot be templated (crds/), but it names %s or has {{", Namespace)
		}
		g.files["crds/"+n+".yaml"] = append([]byte(generatedHeader("#")), b...)
		return nil
	}
	if clusterScoped[k] {
		// kustomize before v0.21.2 set a namespace on these.
		delete(o["metadata"].(map[string]any), "namespace")
	}
	wrapIf, fileName := "", n
	switch k {
	case "ConfigMap":
		for base, c := range g.configs {
			if c.fullName == n {
				fileName = base
				o["metadata"].(map[string]any)["name"] = g.inline(configName(base))
				o["data"] = map[string]any{c.key: g.block(func(col int) string {
					return fmt.Sprintf(" |\n%s{{- include %q . | nindent %d }}", strings.Repeat(" ", col+2), configDefine(base), col+2)
				})}
			}
		}
	case "Namespace":
		if n != Namespace {
			return fmt.Errorf("want the namespace %s", Namespace)
		}
		wrapIf, fileName = ".Values.namespace.create", "release"
		g.values.NamespaceLabels = o["metadata"].(map[string]any)["labels"]
	case "DaemonSet", "Deployment":
		if err := g.workload(o); err != nil {
			return err
		}
	}
	b, err := yaml.Marshal(o)
	if err != nil {
		return err
	}
	text := escape(string(b))
	text = g.substitute(text)
	text = g.names(text)
	body := strings.TrimRight(text, "\n") + "\n"
	header := generatedHeader("#")
	if wrapIf != "" {
		// a template comment: a template rendering nothing is left out
		header = generatedHeader("{{- /*") + "*/}}\n"
		body = "{{- if " + wrapIf + " }}\n" + body + "{{- end }}\n"
	}
	file := fmt.Sprintf("templates/%s-%s.yaml", strings.ToLower(k), fileNameRE.ReplaceAllString(strings.ToLower(fileName), "-"))
	if _, dup := g.files[file]; dup {
		return fmt.Errorf("two objects would be %s", file)
	}
	g.files[file] = []byte(header + body)
	return nil
}

// names replaces the namespace and the generated ConfigMaps' names in
// template text.
func (g *gen) names(text string) string {
	for base, c := range g.configs {
		text = strings.ReplaceAll(text, c.fullName, "{{ "+configName(base)+" }}")
	}
	return strings.ReplaceAll(text, Namespace, "{{ .Release.Namespace }}")
}

func configDefine(base string) string { return "multinet.config." + base }

func configName(base string) string {
	return fmt.Sprintf(`printf "%s-%%s" (include %q . | sha256sum | trunc 10)`, base, configDefine(base))
}

func generatedHeader(comment string) string {
	return comment + " Generated by hack/tools/helmchart (make helm) from deploy/; do not edit.\n"
}
