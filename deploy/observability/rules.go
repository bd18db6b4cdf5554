package observability

import (
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RunbookDoc is the runbooks' document, relative to the repository root;
// each alert's runbook_url is RunbookDoc#<its name in lower case>, the
// anchor of its "### <name>" section.
const RunbookDoc = "docs/operations.md"

// Alert is one alert rule: its name, PromQL expression, pending duration,
// severity label, summary and description annotations, and the component
// whose metrics it reads (checked by the tests against the component's
// registered metric names).
type Alert struct {
	Name        string
	Components  []string
	Expr        string
	For         time.Duration
	Severity    string
	Summary     string
	Description string
}

// RunbookURL is the alert's runbook_url annotation.
func (a Alert) RunbookURL() string { return RunbookDoc + "#" + strings.ToLower(a.Name) }

// GroupName is the rule group of Alerts.
const GroupName = "multinet"

// Alerts are multinet's alert rules.
var Alerts = []Alert{
	{
		Name: "MultinetCNIAddFailureRatio", Components: []string{Multinetd},
		Expr: `sum by (node) (rate(multinet_cni_operations_total{command="ADD", code!="0"}[10m]))
  / sum by (node) (rate(multinet_cni_operations_total{command="ADD"}[10m])) > 0.05`,
		For: 10 * time.Minute, Severity: "warning",
		Summary:     "More than 5% of CNI ADDs fail on node {{ $labels.node }}.",
		Description: "{{ $value | humanizePercentage }} of the CNI ADDs multinetd answered on node {{ $labels.node }} over 10 minutes failed: pods there stay in ContainerCreating.",
	},
	{
		Name: "MultinetCNIDelFailures", Components: []string{Multinetd},
		Expr: `sum by (node) (increase(multinet_cni_operations_total{command="DEL", code!="0"}[15m])) > 0
or sum by (node) (increase(multinet_stale_sandboxes_total{result="failed"}[15m])) > 0`,
		For: 5 * time.Minute, Severity: "warning",
		Summary:     "CNI DELs or stale-sandbox teardowns fail on node {{ $labels.node }}: addresses and interfaces may leak.",
		Description: "multinetd on node {{ $labels.node }} failed a CNI DEL or a teardown of a sandbox the runtime no longer lists in the last 15 minutes; what a failed DEL held (multinet-ipam addresses, host interfaces, devices) stays held until a retry succeeds.",
	},
	{
		Name: "MultinetNetworkStatusBacklog", Components: []string{Multinetd},
		Expr: `max by (node) (multinet_network_status_pending) > 0`,
		For:  15 * time.Minute, Severity: "warning",
		Summary:     "network-status PATCHes have been pending for 15 minutes on node {{ $labels.node }}.",
		Description: "{{ $value }} pod sandboxes on node {{ $labels.node }} have a network-status annotation the API server has not accepted for 15 minutes: clients reading the annotation see stale or no network status.",
	},
	{
		Name: "MultinetCNISlotSaturation", Components: []string{Multinetd},
		Expr: `histogram_quantile(0.9, sum by (node, le) (rate(multinet_cni_operation_queued_seconds_bucket[5m]))) > 0.5`,
		For:  10 * time.Minute, Severity: "warning",
		Summary:     "CNI operations wait for a slot on node {{ $labels.node }} (p90 {{ $value | humanizeDuration }}).",
		Description: "The 90th percentile of the time CNI operations waited for a concurrency slot on node {{ $labels.node }} has been above 0.5 s for 10 minutes: the node's multinetd is saturated.",
	},
	{
		Name: "MultinetdNotReady", Components: []string{KubeStateMetrics, Prometheus},
		Expr: `sum by (namespace, daemonset) (kube_daemonset_status_number_unavailable{daemonset="multinetd"}) > 0
or sum by (namespace, pod) (up{job="multinetd"}) == 0`,
		For: 10 * time.Minute, Severity: "critical",
		Summary:     "A multinetd is not Ready or not scraped ({{ $labels.namespace }} {{ $labels.daemonset }}{{ $labels.pod }}).",
		Description: "A multinetd pod has been unavailable (kube-state-metrics) or its /metrics unreachable (up == 0) for 10 minutes: pods on its node get no secondary networks, and their CNI DELs wait.",
	},
	{
		Name: "MultinetDevicePoolUnhealthy", Components: []string{DevicePlugin, DRADriver},
		Expr: `sum by (node, resource) (multinet_deviceplugin_devices{health="Unhealthy"}) > 0
or sum by (node, resource) (multinet_dra_devices{health="Unhealthy"}) > 0`,
		For: 10 * time.Minute, Severity: "warning",
		Summary:     "{{ $value }} devices of pool {{ $labels.resource }} are unhealthy on node {{ $labels.node }}.",
		Description: "multinet-deviceplugin (Device Plugin API) or multinet-dra-driver (ResourceSlices, with a NoSchedule taint) has reported {{ $value }} devices of {{ $labels.resource }} on node {{ $labels.node }} unhealthy for 10 minutes: pods requesting them stay Pending once the healthy ones are used.",
	},
	{
		Name: "MultinetDRAPrepareFailures", Components: []string{DRADriver},
		Expr: `sum by (node) (rate(multinet_dra_claims_total{operation="NodePrepareResources", result="error"}[10m])) > 0`,
		For:  15 * time.Minute, Severity: "warning",
		Summary:     "multinet-dra-driver keeps failing to prepare ResourceClaims on node {{ $labels.node }}.",
		Description: "multinet-dra-driver on node {{ $labels.node }} has answered NodePrepareResources with errors for 15 minutes ({{ $value | humanize }} claims/s): the kubelet retries, and the pods of those claims wait in ContainerCreating.",
	},
	{
		Name: "MultinetIPAMCleanupNotSucceeding", Components: []string{IPAMCleanup, Prometheus},
		Expr: `time() - max by (namespace) (multinet_ipam_reconcile_last_success_timestamp_seconds{job="multinet-ipam-cleanup"}) > 1800
or sum by (namespace, pod) (up{job="multinet-ipam-cleanup"}) == 0`,
		For: 15 * time.Minute, Severity: "warning",
		Summary:     "multinet-ipam-cleanup has not completed a pass for 45 minutes ({{ $labels.namespace }}{{ $labels.pod }}).",
		Description: "multinet-ipam-cleanup has not ended a pass over every node's IPAllocations without an error for 45 minutes, or its /metrics is unreachable: addresses of dead nodes' pods, of pods deleted without a CNI DEL and of deleted IPAMClaims stay allocated, and pools fill up.",
	},
	{
		Name: "MultinetIPAMPoolExhausted", Components: []string{Multinetd},
		Expr: `sum by (node) (increase(multinet_ipam_operations_total{command="ADD", result="11"}[10m])) > 0
or sum by (node) (rate(multinet_ipam_conflicts_total[10m])) / sum by (node) (rate(multinet_ipam_operations_total{command="ADD"}[10m])) > 0.5`,
		For: 5 * time.Minute, Severity: "warning",
		Summary:     "multinet-ipam pools are exhausted or nearly on node {{ $labels.node }}.",
		Description: "multinet-ipam on node {{ $labels.node }} answered ADDs with code 11 (no free address, too many conflicts, or a quota reached), or its IPAllocation creates often find their address taken: a pool is full or nearly full.",
	},
}

// RuleGroups is the plain Prometheus rules file of Alerts (rules.yaml), in
// the operator's types, whose JSON/YAML form is the rules file's.
func RuleGroups() []monitoringv1.RuleGroup {
	g := monitoringv1.RuleGroup{Name: GroupName}
	for _, a := range Alerts {
		d := monitoringv1.Duration(model.Duration(a.For).String())
		g.Rules = append(g.Rules, monitoringv1.Rule{
			Alert:  a.Name,
			Expr:   intstr.FromString(a.Expr),
			For:    &d,
			Labels: map[string]string{"severity": a.Severity},
			Annotations: map[string]string{
				"summary":     a.Summary,
				"description": a.Description,
				"runbook_url": a.RunbookURL(),
			},
		})
	}
	return []monitoringv1.RuleGroup{g}
}

// PrometheusRule is RuleGroups as a monitoring.coreos.com/v1 PrometheusRule
// in Namespace.
func PrometheusRule() *monitoringv1.PrometheusRule {
	return &monitoringv1.PrometheusRule{
		TypeMeta: metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.PrometheusRuleKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: "multinet", Namespace: Namespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "multinet"},
		},
		Spec: monitoringv1.PrometheusRuleSpec{Groups: RuleGroups()},
	}
}
