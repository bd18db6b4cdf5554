package helmchart

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// monitorKinds are the Prometheus Operator kinds the chart takes from
// deploy/observability; other objects there (PrometheusRules, ...) are not
// the chart's.
var monitorKinds = map[string]bool{"ServiceMonitor": true, "PodMonitor": true}

// observability templates the ServiceMonitors and PodMonitors of dir's
// *.yaml files behind monitoring.monitors.enabled and its Grafana
// dashboards (*.json) into the ConfigMap multinet-dashboards behind
// monitoring.dashboard.enabled. A missing dir adds neither.
func (g *gen) observability(dir string) error {
	yamls, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	jsons, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	sort.Strings(yamls)
	sort.Strings(jsons)
	var monitors strings.Builder
	for _, f := range yamls {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		objs, err := splitObjects([]byte(strings.ReplaceAll("\n"+string(b), "\n---", "\n---\n")))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if !monitorKinds[kind(o)] {
				continue
			}
			md, _ := o["metadata"].(map[string]any)
			labels, _ := md["labels"].(map[string]any)
			if labels == nil {
				labels = map[string]any{}
			}
			labels["app.kubernetes.io/part-of"] = "multinet"
			lj, err := yamlJSON(labels)
			if err != nil {
				return err
			}
			md["labels"] = g.toYAML(fmt.Sprintf("(merge (dict) .Values.monitoring.monitors.labels (fromJson `%s`))", lj))
			md["namespace"] = Namespace
			out, err := yaml.Marshal(o)
			if err != nil {
				return err
			}
			monitors.WriteString("---\n" + g.names(g.substitute(escape(string(out)))))
		}
	}
	if monitors.Len() > 0 {
		g.values.Monitors = true
		g.files["templates/monitors.yaml"] = []byte(generatedHeader("{{- /*") + "*/}}\n" +
			"{{- if .Values.monitoring.monitors.enabled }}\n" + monitors.String() + "{{- end }}\n")
	}
	if len(jsons) == 0 {
		return nil
	}
	g.values.Dashboards = true
	var defs, cm strings.Builder
	defs.WriteString(generatedHeader("{{- /*") + "*/ -}}\n")
	cm.WriteString(generatedHeader("{{- /*") + "*/}}\n" + `{{- if .Values.monitoring.dashboard.enabled }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: multinet-dashboards
  namespace: {{ .Values.monitoring.dashboard.namespace | default .Release.Namespace }}
  labels:
    app.kubernetes.io/part-of: multinet
    {{- with .Values.monitoring.dashboard.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
data:
`)
	for _, f := range jsons {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		base := filepath.Base(f)
		fmt.Fprintf(&defs, "{{- define %q -}}\n%s{{ end }}\n", "multinet.dashboard."+base, escape(strings.TrimRight(string(b), "\n")+"\n"))
		fmt.Fprintf(&cm, "  %s: |\n    {{- include %q . | nindent 4 }}\n", base, "multinet.dashboard."+base)
	}
	cm.WriteString("{{- end }}\n")
	g.files["templates/_dashboards.tpl"] = []byte(defs.String())
	g.files["templates/configmap-multinet-dashboards.yaml"] = []byte(cm.String())
	return nil
}

func yamlJSON(v any) (string, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	j, err := yaml.YAMLToJSON(b)
	return string(j), err
}

// monitoringValues is the monitoring section of values.yaml.
func (g *gen) monitoringValues() string {
	var b strings.Builder
	if !g.values.Monitors && !g.values.Dashboards {
		return ""
	}
	b.WriteString("\n# Observability (deploy/observability), off by default.\nmonitoring:\n")
	if g.values.Monitors {
		b.WriteString("  # The Prometheus Operator's ServiceMonitors/PodMonitors of every component (needs its\n" +
			"  # CRDs); labels are added to each, e.g. the release label a Prometheus selects on.\n" +
			"  monitors:\n    enabled: false\n    labels: {}\n")
	}
	if g.values.Dashboards {
		b.WriteString("  # The Grafana dashboards in a ConfigMap, labelled for Grafana's dashboard sidecar;\n" +
			"  # namespace: the one the sidecar watches (default: the release's).\n" +
			"  dashboard:\n    enabled: false\n    namespace: \"\"\n    labels:\n      grafana_dashboard: \"1\"\n")
	}
	return b.String()
}
