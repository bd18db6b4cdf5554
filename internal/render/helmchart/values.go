package helmchart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// layout is a node layout: multinetd.yaml's CNI dirs and runtime endpoint.
type layout struct {
	CNIConfDir      string   `json:"cniConfDir"`
	CNIBinDirs      []string `json:"cniBinDirs"`
	RuntimeEndpoint string   `json:"runtimeEndpoint"`
}

type componentValues struct {
	Resources         any    `json:"resources"`
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

type imageValues struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	Digest     string `json:"digest"`
}

// values are the chart's defaults, taken from the overlay.
type values struct {
	Images          map[string]*imageValues
	ImagePullPolicy string
	NamespaceLabels any
	Node            struct {
		generic layout
		presets map[string]layout
	}
	NamespaceIsolation bool
	GlobalNamespaces   []string
	Components         map[string]*componentValues
	Monitors           bool
	Dashboards         bool
}

func (v *values) image(key, repo, tag string) error {
	if v.Images == nil {
		v.Images = map[string]*imageValues{}
	}
	if have := v.Images[key]; have != nil && (have.Repository != repo || have.Tag != tag) {
		return fmt.Errorf("image %s: both %s:%s and %s:%s", key, have.Repository, have.Tag, repo, tag)
	}
	v.Images[key] = &imageValues{Repository: repo, Tag: tag}
	return nil
}

func (v *values) setOnce(field *string, value, what string) error {
	if *field != "" && *field != value {
		return fmt.Errorf("%s: both %s and %s", what, *field, value)
	}
	*field = value
	return nil
}

func (v *values) component(key string, c *componentValues) {
	if v.Components == nil {
		v.Components = map[string]*componentValues{}
	}
	v.Components[key] = c
}

// readLayout reads a multinetd.yaml's node layout.
func readLayout(file string) (layout, error) {
	var l layout
	b, err := os.ReadFile(file)
	if err != nil {
		return l, err
	}
	if err := yaml.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("%s: %w", file, err)
	}
	if l.CNIConfDir == "" || len(l.CNIBinDirs) == 0 || l.RuntimeEndpoint == "" {
		return l, fmt.Errorf("%s: want cniConfDir, cniBinDirs and runtimeEndpoint", file)
	}
	return l, nil
}

// layouts reads the base's node layout and each distribution's.
func (g *gen) layouts(root string) error {
	var err error
	if g.values.Node.generic, err = readLayout(filepath.Join(root, "deploy/base/multinetd.yaml")); err != nil {
		return err
	}
	g.values.Node.presets = map[string]layout{"generic": g.values.Node.generic}
	for _, d := range Distributions {
		if g.values.Node.presets[d], err = readLayout(filepath.Join(root, "deploy/overlays", d, "multinetd.yaml")); err != nil {
			return err
		}
	}
	return nil
}

// multinetdConfig templates multinetd.yaml: the node layout, namespace
// isolation and undeclaredCapabilities (appended when not refuse).
func (g *gen) multinetdConfig(content string) (string, error) {
	var cfg struct {
		NamespaceIsolation     bool     `json:"namespaceIsolation"`
		GlobalNamespaces       []string `json:"globalNamespaces"`
		UndeclaredCapabilities string   `json:"undeclaredCapabilities"`
	}
	if err := yaml.Unmarshal([]byte(content), &cfg); err != nil {
		return "", fmt.Errorf("multinetd.yaml: %w", err)
	}
	if cfg.UndeclaredCapabilities != "" {
		return "", fmt.Errorf("multinetd.yaml: the base sets undeclaredCapabilities; the chart sets it from its value")
	}
	g.values.NamespaceIsolation, g.values.GlobalNamespaces = cfg.NamespaceIsolation, cfg.GlobalNamespaces
	l := g.values.Node.generic
	for _, r := range [][2]string{
		{"cniConfDir: " + l.CNIConfDir, `cniConfDir: {{ include "multinet.cniConfDir" . }}`},
		{"cniBinDirs: [" + strings.Join(l.CNIBinDirs, ", ") + "]", `cniBinDirs: [{{ include "multinet.cniBinDirs" . }}]`},
		{"runtimeEndpoint: " + l.RuntimeEndpoint, `runtimeEndpoint: {{ include "multinet.runtimeEndpoint" . }}`},
		{fmt.Sprintf("namespaceIsolation: %t", cfg.NamespaceIsolation), `namespaceIsolation: {{ .Values.namespaceIsolation.enabled }}`},
		{"globalNamespaces: [" + strings.Join(cfg.GlobalNamespaces, ", ") + "]", `globalNamespaces: [{{ join ", " .Values.namespaceIsolation.globalNamespaces }}]`},
	} {
		var err error
		if content, err = replaceLine(content, r[0], r[1]); err != nil {
			return "", fmt.Errorf("multinetd.yaml: %w", err)
		}
	}
	if !strings.HasSuffix(content, "\n") {
		return "", fmt.Errorf("multinetd.yaml: no final newline")
	}
	return content + `{{- if ne .Values.undeclaredCapabilities "refuse" }}` + "\nundeclaredCapabilities: {{ .Values.undeclaredCapabilities }}{{- end }}\n", nil
}

// replaceLine replaces the one line old of s (already escaped) by new.
func replaceLine(s, old, new string) (string, error) {
	ls := strings.Split(s, "\n")
	n := 0
	for i, l := range ls {
		if l == old {
			ls[i] = new
			n++
		}
	}
	if n != 1 {
		return "", fmt.Errorf("want one line %q, found %d", old, n)
	}
	return strings.Join(ls, "\n"), nil
}

// finish writes the helpers, the configs' defines, values.yaml and Chart.yaml.
func (g *gen) finish() error {
	var cfgs strings.Builder
	cfgs.WriteString(generatedHeader("{{- /*") + "*/ -}}\n")
	for _, c := range generatedConfigMaps {
		content := escape(g.configs[c.name].content)
		if c.name == "multinetd-config" {
			var err error
			if content, err = g.multinetdConfig(content); err != nil {
				return err
			}
		}
		content = strings.ReplaceAll(content, Namespace, "{{ .Release.Namespace }}")
		fmt.Fprintf(&cfgs, "{{- define %q -}}\n%s{{ end }}\n", configDefine(c.name), content)
	}
	g.files["templates/_configs.tpl"] = []byte(cfgs.String())
	presets, err := json.Marshal(g.values.Node.presets)
	if err != nil {
		return err
	}
	g.files["templates/_helpers.tpl"] = []byte(strings.ReplaceAll(helpers, "PRESETS", string(presets)))
	v, err := g.valuesYAML()
	if err != nil {
		return err
	}
	g.files["values.yaml"] = v
	g.files["Chart.yaml"] = []byte(generatedHeader("#") + chartYAML)
	return nil
}

const chartYAML = `apiVersion: v2
name: multinet
description: multinet, a Kubernetes multi-network CNI meta-plugin (NetworkAttachmentDefinitions, multinetd, admission webhook, multinet-ipam, DRA driver, device plugin)
type: application
version: ` + Version + `
appVersion: latest
kubeVersion: ">=1.30.0-0"
home: https://github.com/multinet/multinet
`

const helpers = `{{- /* Generated by hack/tools/helmchart (make helm) from deploy/; do not edit. */ -}}

{{- /* An image of .Values.images: repository@digest, else repository:tag. */ -}}
{{- define "multinet.image" -}}
{{ .repository }}{{ if .digest }}@{{ .digest }}{{ else }}:{{ .tag }}{{ end }}
{{- end }}

{{- /* The node layout preset of .Values.node.distribution (JSON), from
deploy/base/multinetd.yaml (generic) and deploy/overlays/<distribution>. */ -}}
{{- define "multinet.preset" -}}
{{- $presets := fromJson ` + "`PRESETS`" + ` -}}
{{- $p := index $presets .Values.node.distribution -}}
{{- if not $p -}}
{{- fail (printf "node.distribution %q: want one of %s" .Values.node.distribution (keys $presets | sortAlpha | join ", ")) -}}
{{- end -}}
{{- toJson $p -}}
{{- end }}

{{- define "multinet.cniConfDir" -}}
{{ .Values.node.cniConfDir | default (get (fromJson (include "multinet.preset" .)) "cniConfDir") }}
{{- end }}

{{- define "multinet.cniBinDirs" -}}
{{ .Values.node.cniBinDirs | default (get (fromJson (include "multinet.preset" .)) "cniBinDirs") | join ", " }}
{{- end }}

{{- /* The dir multinet-install copies the plugins into: the first of cniBinDirs. */ -}}
{{- define "multinet.cniBinDir" -}}
{{ .Values.node.cniBinDirs | default (get (fromJson (include "multinet.preset" .)) "cniBinDirs") | first }}
{{- end }}

{{- define "multinet.runtimeEndpoint" -}}
{{ .Values.node.runtimeEndpoint | default (get (fromJson (include "multinet.preset" .)) "runtimeEndpoint") }}
{{- end }}
`

// valuesYAML writes values.yaml with the overlay's values as defaults.
func (g *gen) valuesYAML() ([]byte, error) {
	v := g.values
	var b strings.Builder
	b.WriteString(generatedHeader("#"))
	b.WriteString("# Every default is deploy/overlays/default's: with them, `helm template -n multinet-system`\n" +
		"# renders the objects `kubectl kustomize deploy/overlays/default` does (docs/install.md \"Helm\").\n\n")
	b.WriteString("# multinet's images: <repository>@<digest> when digest is set, else <repository>:<tag>.\nimages:\n")
	for _, k := range []string{"multinetd", "webhook", "deviceplugin", "draDriver"} {
		i := v.Images[k]
		if i == nil {
			return nil, fmt.Errorf("no image %s in the overlay", k)
		}
		fmt.Fprintf(&b, "  %s:\n    repository: %s\n    tag: %q\n    digest: \"\"\n", k, i.Repository, i.Tag)
	}
	fmt.Fprintf(&b, "imagePullPolicy: %s\n\n", v.ImagePullPolicy)
	labels, err := yaml.Marshal(v.NamespaceLabels)
	if err != nil {
		return nil, err
	}
	b.WriteString("# The release namespace (helm install -n <namespace>) is created by the chart with the\n" +
		"# Pod Security labels multinetd needs (privileged); false: it exists already, labelled:\n" +
		indent("# ", string(labels)) +
		"namespace:\n  create: true\n\n")
	b.WriteString("# The node layout: multinetd's CNI conf and bin dirs and container runtime socket (seen\n" +
		"# through the node's root at /host). distribution picks a preset (docs/install.md\n" +
		"# \"Distributions\"): " + strings.Join(append([]string{"generic"}, Distributions...), ", ") + ". A non-empty cniConfDir,\n" +
		"# cniBinDirs or runtimeEndpoint overrides the preset's; multinet-install copies the plugins\n" +
		"# into the first of cniBinDirs.\nnode:\n  distribution: generic\n  cniConfDir: \"\"\n  cniBinDirs: []\n  runtimeEndpoint: \"\"\n\n")
	gn, err := json.Marshal(v.GlobalNamespaces)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "# Namespace isolation (multi-net spec §7.4), in multinetd and the webhook: a pod may select\n"+
		"# the NetworkAttachmentDefinitions of its own namespace and of globalNamespaces only.\n"+
		"namespaceIsolation:\n  enabled: %t\n  globalNamespaces: %s\n\n", v.NamespaceIsolation, gn)
	b.WriteString("# A pod asking a NAD for a capability (mac, ips, ...) no plugin of it declares: refuse (the\n" +
		"# spec's rule) or multus (handed over as Multus does, with a Warning Event), in multinetd and\n" +
		"# the webhook (docs/migrating-from-multus.md).\nundeclaredCapabilities: refuse\n\n")
	b.WriteString("# Each component's container resources and its pod's priority class (deploy/README.md).\n")
	for _, c := range components {
		cv := v.Components[c.key]
		r, err := yaml.Marshal(map[string]any{"resources": cv.Resources})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s:\n%s", c.key, indent("  ", string(r)))
		if cv.PriorityClassName != "" {
			fmt.Fprintf(&b, "  priorityClassName: %s\n", cv.PriorityClassName)
		}
	}
	b.WriteString(g.monitoringValues())
	return []byte(b.String()), nil
}

func indent(prefix, s string) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range ls {
		ls[i] = prefix + ls[i]
	}
	return strings.Join(ls, "\n") + "\n"
}
