package observability

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"sigs.k8s.io/yaml"
)

// loadRules reads the shipped rules.yaml as Prometheus does (rulefmt, with
// its validation of names, expressions and templates: promtool check rules).
func loadRules(t *testing.T) map[string]rulefmt.Rule {
	t.Helper()
	rgs, errs := rulefmt.ParseFile(RulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), promslog.NewNopLogger())
	if len(errs) > 0 {
		t.Fatalf("%s: %v", RulesFile, errs)
	}
	out := map[string]rulefmt.Rule{}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r
		}
	}
	return out
}

// alertCase is made-up series (promqltest load syntax, one sample a
// minute from time 0) and what an alert does on them at the end.
type alertCase struct {
	name   string
	series string
	// fire are the labels (besides alertname and severity) of the alerts
	// that must fire at the end; none: the alert must stay quiet.
	fire []map[string]string
}

// alertCases are, for every alert, series it must fire on and healthy
// series it must stay quiet on.
var alertCases = map[string][]alertCase{
	"MultinetCNIAddFailureRatio": {
		{name: "a third of the ADDs fail", series: `
multinet_cni_operations_total{command="ADD", code="0", node="n1"} 0+10x60
multinet_cni_operations_total{command="ADD", code="7", node="n1"} 0+5x60
multinet_cni_operations_total{command="ADD", code="0", node="n2"} 0+10x60`,
			fire: []map[string]string{{"node": "n1"}}},
		{name: "one ADD in a hundred fails", series: `
multinet_cni_operations_total{command="ADD", code="0", node="n1"} 0+100x60
multinet_cni_operations_total{command="ADD", code="11", node="n1"} 0+1x60`},
	},
	"MultinetCNIDelFailures": {
		{name: "DELs fail", series: `
multinet_cni_operations_total{command="DEL", code="0", node="n1"} 0+10x60
multinet_cni_operations_total{command="DEL", code="999", node="n1"} 0+1x60`,
			fire: []map[string]string{{"node": "n1"}}},
		{name: "stale sandbox teardowns fail", series: `
multinet_cni_operations_total{command="DEL", code="0", node="n2"} 0+10x60
multinet_stale_sandboxes_total{result="failed", node="n2"} 0+1x60`,
			fire: []map[string]string{{"node": "n2"}}},
		{name: "old failures only", series: `
multinet_cni_operations_total{command="DEL", code="0", node="n1"} 0+10x60
multinet_cni_operations_total{command="DEL", code="999", node="n1"} 3+0x60
multinet_stale_sandboxes_total{result="failed", node="n1"} 2+0x60
multinet_stale_sandboxes_total{result="reaped", node="n1"} 0+1x60`},
	},
	"MultinetNetworkStatusBacklog": {
		{name: "a backlog that does not drain", series: `
multinet_network_status_pending{node="n1"} 2+0x60
multinet_network_status_pending{node="n2"} 0+0x60`,
			fire: []map[string]string{{"node": "n1"}}},
		{name: "a backlog that drains", series: `
multinet_network_status_pending{node="n1"} 0+0x20 3 3 3 0+0x37`},
	},
	"MultinetCNISlotSaturation": {
		{name: "operations wait about 2 s", series: `
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="0.016"} 0+0x60
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="0.512"} 0+0x60
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="2.048"} 0+10x60
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="+Inf"} 0+10x60`,
			fire: []map[string]string{{"node": "n1"}}},
		{name: "operations barely wait", series: `
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="0.016"} 0+10x60
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="0.512"} 0+10x60
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="2.048"} 0+10x60
multinet_cni_operation_queued_seconds_bucket{command="ADD", node="n1", le="+Inf"} 0+10x60`},
	},
	"MultinetdNotReady": {
		{name: "a multinetd pod unavailable", series: `
kube_daemonset_status_number_unavailable{namespace="multinet-system", daemonset="multinetd"} 1+0x60
kube_daemonset_status_number_unavailable{namespace="kube-system", daemonset="kube-proxy"} 0+0x60`,
			fire: []map[string]string{{"namespace": "multinet-system", "daemonset": "multinetd"}}},
		{name: "a multinetd not scraped", series: `
up{job="multinetd", namespace="multinet-system", pod="multinetd-x1"} 0+0x60
up{job="multinetd", namespace="multinet-system", pod="multinetd-x2"} 1+0x60`,
			fire: []map[string]string{{"namespace": "multinet-system", "pod": "multinetd-x1"}}},
		{name: "every multinetd up", series: `
kube_daemonset_status_number_unavailable{namespace="multinet-system", daemonset="multinetd"} 0+0x60
up{job="multinetd", namespace="multinet-system", pod="multinetd-x1"} 1+0x60
up{job="other", namespace="multinet-system", pod="other"} 0+0x60`},
	},
	"MultinetDevicePoolUnhealthy": {
		{name: "the device plugin reports two devices of a pool unhealthy", series: `
multinet_deviceplugin_devices{node="n1", resource="multinet.io/netdev", health="Healthy"} 2+0x60
multinet_deviceplugin_devices{node="n1", resource="multinet.io/netdev", health="Unhealthy"} 2+0x60
multinet_deviceplugin_devices{node="n2", resource="multinet.io/netdev", health="Unhealthy"} 0+0x60`,
			fire: []map[string]string{{"node": "n1", "resource": "multinet.io/netdev"}}},
		{name: "the DRA driver publishes a device tainted", series: `
multinet_dra_devices{node="n2", resource="multinet.io/netdev-dra", health="Healthy"} 1+0x60
multinet_dra_devices{node="n2", resource="multinet.io/netdev-dra", health="Unhealthy"} 1+0x60`,
			fire: []map[string]string{{"node": "n2", "resource": "multinet.io/netdev-dra"}}},
		{name: "every device healthy, or unhealthy only briefly", series: `
multinet_deviceplugin_devices{node="n1", resource="multinet.io/netdev", health="Healthy"} 4+0x60
multinet_deviceplugin_devices{node="n1", resource="multinet.io/netdev", health="Unhealthy"} 0+0x60
multinet_dra_devices{node="n1", resource="multinet.io/netdev-dra", health="Unhealthy"} 0+0x50 1 1 1 0 0 0 0 0 0 0`},
	},
	"MultinetDRAPrepareFailures": {
		{name: "prepares keep failing", series: `
multinet_dra_claims_total{node="n1", operation="NodePrepareResources", result="ok"} 0+1x60
multinet_dra_claims_total{node="n1", operation="NodePrepareResources", result="error"} 0+2x60
multinet_dra_claims_total{node="n2", operation="NodePrepareResources", result="error"} 0+0x60`,
			fire: []map[string]string{{"node": "n1"}}},
		{name: "a device not back in the host yet: a few retried prepares, then success", series: `
multinet_dra_claims_total{node="n1", operation="NodePrepareResources", result="ok"} 0+1x60
multinet_dra_claims_total{node="n1", operation="NodePrepareResources", result="error"} 0+1x5 5+0x55
multinet_dra_claims_total{node="n1", operation="NodeUnprepareResources", result="error"} 0+1x60`},
	},
	"MultinetIPAMCleanupNotSucceeding": {
		{name: "passes stopped succeeding after the first", series: `
multinet_ipam_reconcile_last_success_timestamp_seconds{job="multinet-ipam-cleanup", namespace="multinet-system", pod="c-1"} 60+0x60
up{job="multinet-ipam-cleanup", namespace="multinet-system", pod="c-1"} 1+0x60`,
			fire: []map[string]string{{"namespace": "multinet-system"}}},
		{name: "its /metrics unreachable", series: `
up{job="multinet-ipam-cleanup", namespace="multinet-system", pod="c-1"} 0+0x60`,
			fire: []map[string]string{{"namespace": "multinet-system", "pod": "c-1"}}},
		{name: "a pass succeeds every 5 minutes, the first 5 minutes after the start", series: `
multinet_ipam_reconcile_last_success_timestamp_seconds{job="multinet-ipam-cleanup", namespace="multinet-system", pod="c-1"} 0 0 0 0 0 300+0x4 600+0x4 900+0x4 1200+0x4 1500+0x4 1800+0x4 2100+0x4 2400+0x4 2700+0x4 3000+0x4 3300+0x4 3600+0x4
up{job="multinet-ipam-cleanup", namespace="multinet-system", pod="c-1"} 1+0x60
multinet_ipam_reconcile_last_success_timestamp_seconds{job="multinetd", namespace="multinet-system", pod="d-1"} 0+0x60`},
	},
	"MultinetIPAMPoolExhausted": {
		{name: "ADDs answered try again later", series: `
multinet_ipam_operations_total{command="ADD", result="ok", node="n1"} 0+10x60
multinet_ipam_operations_total{command="ADD", result="11", node="n1"} 0+1x60
multinet_ipam_conflicts_total{node="n1"} 0+0x60`,
			fire: []map[string]string{{"node": "n1"}}},
		{name: "most creates conflict", series: `
multinet_ipam_operations_total{command="ADD", result="ok", node="n1"} 0+10x60
multinet_ipam_conflicts_total{node="n1"} 0+20x60`,
			fire: []map[string]string{{"node": "n1"}}},
		{name: "a conflict now and then", series: `
multinet_ipam_operations_total{command="ADD", result="ok", node="n1"} 0+10x60
multinet_ipam_operations_total{command="DEL", result="ok", node="n1"} 0+10x60
multinet_ipam_conflicts_total{node="n1"} 0+1x60`},
	},
}

// evalEnd is how long evalAlert runs the rule (every minute from 0).
const evalEnd = 60 * time.Minute

// evalAlert evaluates r over series as Prometheus's rule manager does (every
// minute, for: held) and returns the firing alerts at evalEnd.
func evalAlert(t *testing.T, r rulefmt.Rule, series string) []*rules.Alert {
	t.Helper()
	storage := promqltest.LoadedStorage(t, "load 1m\n"+strings.TrimSpace(series))
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
	if err != nil {
		t.Fatalf("alert %s: %v", r.Alert, err)
	}
	rule := rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
		labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, promslog.NewNopLogger())
	query := rules.EngineQueryFunc(engine, storage)
	start := time.Unix(0, 0).UTC()
	for ts := time.Duration(0); ts <= evalEnd; ts += time.Minute {
		if _, err := rule.Eval(context.Background(), 0, start.Add(ts), query, nil, 0); err != nil {
			t.Fatalf("alert %s at %v: %v", r.Alert, ts, err)
		}
	}
	var firing []*rules.Alert
	for _, a := range rule.ActiveAlerts() {
		if a.State == rules.StateFiring {
			firing = append(firing, a)
		}
	}
	return firing
}

// TestAlertRulesFireAndStayQuiet evaluates every shipped alert rule
// (rules.yaml, read with Prometheus's rulefmt) with Prometheus's rule
// engine over made-up series, as `promtool test rules` does: each alert
// fires, with the expected labels, on unhealthy series and stays quiet on
// healthy ones; every alert has both kinds of case; the annotations expand.
func TestAlertRulesFireAndStayQuiet(t *testing.T) {
	loaded := loadRules(t)
	for _, a := range Alerts {
		r, ok := loaded[a.Name]
		if !ok {
			t.Errorf("alert %s is not in %s: regenerate (go run ./gen)", a.Name, RulesFile)
			continue
		}
		cases := alertCases[a.Name]
		fires := slices.ContainsFunc(cases, func(c alertCase) bool { return len(c.fire) > 0 })
		quiet := slices.ContainsFunc(cases, func(c alertCase) bool { return len(c.fire) == 0 })
		if !fires || !quiet {
			t.Errorf("alert %s: needs a case it fires on and one it stays quiet on (fires %v, quiet %v)", a.Name, fires, quiet)
		}
		for _, c := range cases {
			t.Run(a.Name+"/"+c.name, func(t *testing.T) {
				got := evalAlert(t, r, c.series)
				var gotLabels []map[string]string
				for _, al := range got {
					m := al.Labels.Map()
					if m["alertname"] != a.Name || m["severity"] != a.Severity {
						t.Errorf("alert labels %v: want alertname %s, severity %s", m, a.Name, a.Severity)
					}
					delete(m, "alertname")
					delete(m, "severity")
					gotLabels = append(gotLabels, m)
					for k, v := range al.Annotations.Map() {
						if strings.Contains(v, "error expanding template") || strings.Contains(v, "<no value>") {
							t.Errorf("annotation %s: %q", k, v)
						}
					}
					if al.Annotations.Get("runbook_url") != a.RunbookURL() {
						t.Errorf("runbook_url %q, want %q", al.Annotations.Get("runbook_url"), a.RunbookURL())
					}
				}
				if !sameLabelSets(gotLabels, c.fire) {
					t.Errorf("firing at %v: %v, want %v", evalEnd, gotLabels, c.fire)
				}
			})
		}
	}
	for name := range alertCases {
		if _, ok := loaded[name]; !ok {
			t.Errorf("alertCases has %s, which is not a shipped alert", name)
		}
	}
}

func sameLabelSets(a, b []map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for i, y := range b {
			if !used[i] && len(x) == len(y) && mapsEqual(x, y) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func mapsEqual(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAlertRulesNameExportedMetrics checks that every metric and label each
// alert's expression names is served by the components it reads.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	fams := componentFamilies(t)
	for _, a := range Alerts {
		checkExported(t, fams, "alert "+a.Name, a.Expr, a.Components...)
	}
}

// TestPrometheusRuleMatchesRulesFile checks that the PrometheusRule carries
// exactly the groups of the plain rules file (one source, two forms).
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var plain struct {
		Groups []any `json:"groups"`
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	for file, into := range map[string]any{RulesFile: &plain, PrometheusRuleFile: &pr} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s: %s %s", PrometheusRuleFile, pr.APIVersion, pr.Kind)
	}
	a, _ := yaml.Marshal(plain.Groups)
	b, _ := yaml.Marshal(pr.Spec.Groups)
	if string(a) != string(b) || len(plain.Groups) == 0 {
		t.Errorf("%s's groups differ from %s's:\n%s\n---\n%s", PrometheusRuleFile, RulesFile, b, a)
	}
}

var headingRE = regexp.MustCompile(`(?m)^#{2,4} (\S+)\s*$`)

// TestRunbooksExist checks that every alert's runbook_url names a section
// of docs/operations.md ("### <alert name>").
func TestRunbooksExist(t *testing.T) {
	b, err := os.ReadFile("../../" + RunbookDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(string(b), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	for _, a := range Alerts {
		_, anchor, _ := strings.Cut(a.RunbookURL(), "#")
		if !anchors[anchor] {
			t.Errorf("alert %s: runbook_url %s: %s has no section %q", a.Name, a.RunbookURL(), RunbookDoc, "### "+a.Name)
		}
	}
}
