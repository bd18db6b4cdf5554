package observability

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// DashboardUID is the dashboard's uid: links and provisioning name it.
const DashboardUID = "multinet-overview"

// Query is one PromQL expression of a panel and its legend.
type Query struct {
	Expr   string
	Legend string
}

// Panel is one time-series panel: its title, the component whose metrics
// its queries read (one of the component constants), its unit (Grafana's
// unit ids: s, ops, short) and its queries. Queries filter by the node
// variable ($node) and rate over $__rate_interval.
type Panel struct {
	Title       string
	Description string
	Component   string
	Unit        string
	Queries     []Query
}

const (
	nodeSel = `node=~"$node"`
	rateWin = `[$__rate_interval]`
	// cleanupSel selects multinet-ipam-cleanup's series of the
	// multinet_ipam_reconcile_* names multinetd serves too (its PodMonitor
	// sets the job from the pods' app.kubernetes.io/name).
	cleanupSel = `job="` + IPAMCleanup + `"`
)

// quantiles returns p50/p90/p99 queries of histogram h (its base name),
// by the given labels, filtered by sel.
func quantiles(h, sel, by, legend string) []Query {
	var qs []Query
	for _, q := range []struct{ q, name string }{{"0.5", "p50"}, {"0.9", "p90"}, {"0.99", "p99"}} {
		qs = append(qs, Query{
			Expr:   fmt.Sprintf(`histogram_quantile(%s, sum by (le, %s) (rate(%s_bucket{%s}%s)))`, q.q, by, h, sel, rateWin),
			Legend: q.name + " " + legend,
		})
	}
	return qs
}

// Panels are the dashboard's panels, top to bottom.
var Panels = []Panel{
	{
		Title:       "CNI latency (ADD, DEL, CHECK) by percentile",
		Description: "multinetd's handler time per CNI command, without the wait for a slot (multinet_cni_operation_duration_seconds).",
		Component:   Multinetd, Unit: "s",
		Queries: quantiles("multinet_cni_operation_duration_seconds", nodeSel+`, command=~"ADD|DEL|CHECK"`, "command", "{{command}}"),
	},
	{
		Title:       "CNI operations by command and result",
		Description: "Operations answered per second, by CNI command and CNI error code (0: success).",
		Component:   Multinetd, Unit: "ops",
		Queries: []Query{{
			Expr:   `sum by (command, code) (rate(multinet_cni_operations_total{` + nodeSel + `}` + rateWin + `))`,
			Legend: "{{command}} code {{code}}",
		}},
	},
	{
		Title:       "CNI failures by reason",
		Description: "Failed operations per second by command and CNI error code (7: invalid network config, 11: try again later, 999: internal; docs/operations.md), per node.",
		Component:   Multinetd, Unit: "ops",
		Queries: []Query{{
			Expr:   `sum by (node, command, code) (rate(multinet_cni_operations_total{` + nodeSel + `, code!="0"}` + rateWin + `))`,
			Legend: "{{node}} {{command}} code {{code}}",
		}},
	},
	{
		Title:       "Slot wait by percentile",
		Description: "Time a CNI operation waited for a concurrency slot (multinet_cni_operation_queued_seconds), and the operations in flight (queued or running).",
		Component:   Multinetd, Unit: "s",
		Queries: append(quantiles("multinet_cni_operation_queued_seconds", nodeSel, "command", "{{command}}"),
			Query{Expr: `sum by (node) (multinet_cni_operations_in_flight{` + nodeSel + `})`, Legend: "in flight {{node}}"}),
	},
	{
		Title:       "network-status PATCH: pending and retries",
		Description: "Pod sandboxes whose network-status annotation the API server has not accepted yet, and the background PATCH retries by result.",
		Component:   Multinetd, Unit: "short",
		Queries: []Query{
			{Expr: `sum by (node) (multinet_network_status_pending{` + nodeSel + `})`, Legend: "pending {{node}}"},
			{Expr: `sum by (result) (rate(multinet_network_status_retries_total{` + nodeSel + `}` + rateWin + `))`, Legend: "retries {{result}}"},
		},
	},
	{
		Title:       "Hot-plug by result",
		Description: "Hot-plugs of running pods' networks per second, by result (succeeded, failed, refused).",
		Component:   Multinetd, Unit: "ops",
		Queries: []Query{{
			Expr:   `sum by (result) (rate(multinet_hotplug_operations_total{` + nodeSel + `}` + rateWin + `))`,
			Legend: "{{result}}",
		}},
	},
	{
		Title:       "multinet-ipam allocations and conflicts",
		Description: "multinet-ipam operations per second by command and result (ok or the CNI error code; 11 on ADD: pool exhausted or crowded), and IPAllocation creates that found their address taken by another node.",
		Component:   Multinetd, Unit: "ops",
		Queries: []Query{
			{Expr: `sum by (command, result) (rate(multinet_ipam_operations_total{` + nodeSel + `}` + rateWin + `))`, Legend: "{{command}} {{result}}"},
			{Expr: `sum by (node) (rate(multinet_ipam_conflicts_total{` + nodeSel + `}` + rateWin + `))`, Legend: "conflicts {{node}}"},
		},
	},
	{
		Title:       "multinet-ipam latency by percentile",
		Description: "Time multinetd spent on a multinet-ipam operation, API requests included.",
		Component:   Multinetd, Unit: "s",
		Queries: quantiles("multinet_ipam_operation_duration_seconds", nodeSel, "command", "{{command}}"),
	},
	{
		Title:       "Device allocations",
		Description: "Devices of multinet's pools requested by the pods of each node (kube-state-metrics), and the devices the kubelet counts unhealthy (capacity - allocatable).",
		Component:   KubeStateMetrics, Unit: "short",
		Queries: []Query{
			{Expr: `sum by (node, resource) (kube_pod_container_resource_requests{resource=~"` + DeviceResourceRegex + `", ` + nodeSel + `})`, Legend: "allocated {{node}} {{resource}}"},
			{Expr: `sum by (node, resource) (kube_node_status_capacity{resource=~"` + DeviceResourceRegex + `", ` + nodeSel + `}) - sum by (node, resource) (kube_node_status_allocatable{resource=~"` + DeviceResourceRegex + `", ` + nodeSel + `})`, Legend: "unhealthy {{node}} {{resource}}"},
		},
	},
	{
		Title:       "Device plugin: devices by health",
		Description: "Devices multinet-deviceplugin advertises to the kubelet, per node and resourceName, by health (Unhealthy: the kubelet does not allocate them).",
		Component:   DevicePlugin, Unit: "short",
		Queries: []Query{{
			Expr:   `sum by (node, resource, health) (multinet_deviceplugin_devices{` + nodeSel + `})`,
			Legend: "{{node}} {{resource}} {{health}}",
		}},
	},
	{
		Title:       "Device plugin: Allocate calls and ListAndWatch updates",
		Description: "The kubelet's Allocate calls per second, per node and resourceName, by gRPC status code (OK; InvalidArgument: a device not in the pool), and the device lists sent over ListAndWatch (one per change of health or membership).",
		Component:   DevicePlugin, Unit: "ops",
		Queries: []Query{
			{Expr: `sum by (node, resource, code) (rate(multinet_deviceplugin_allocations_total{` + nodeSel + `}` + rateWin + `))`, Legend: "Allocate {{node}} {{resource}} {{code}}"},
			{Expr: `sum by (node, resource) (rate(multinet_deviceplugin_list_and_watch_updates_total{` + nodeSel + `}` + rateWin + `))`, Legend: "ListAndWatch {{node}} {{resource}}"},
		},
	},
	{
		Title:       "Device plugin: Allocate latency by percentile",
		Description: "Time multinet-deviceplugin spent on one Allocate call, by resourceName.",
		Component:   DevicePlugin, Unit: "s",
		Queries: quantiles("multinet_deviceplugin_allocate_duration_seconds", nodeSel, "resource", "{{resource}}"),
	},
	{
		Title:       "DRA driver: devices by health and prepared claims",
		Description: "Devices multinet-dra-driver publishes in the node's ResourceSlices, per node and resourceName, by health (Unhealthy: published with a NoSchedule taint), and the ResourceClaims prepared on each node.",
		Component:   DRADriver, Unit: "short",
		Queries: []Query{
			{Expr: `sum by (node, resource, health) (multinet_dra_devices{` + nodeSel + `})`, Legend: "{{node}} {{resource}} {{health}}"},
			{Expr: `sum by (node) (multinet_dra_prepared_claims{` + nodeSel + `})`, Legend: "prepared claims {{node}}"},
		},
	},
	{
		Title:       "DRA driver: prepare latency by percentile",
		Description: "Time multinet-dra-driver spent on one NodePrepareResources or NodeUnprepareResources call of the kubelet.",
		Component:   DRADriver, Unit: "s",
		Queries: quantiles("multinet_dra_operation_duration_seconds", nodeSel, "operation", "{{operation}}"),
	},
	{
		Title:       "DRA driver: claims by result and ResourceSlice publishes",
		Description: "ResourceClaims prepared and unprepared per second by result (error: the kubelet retries, the pod waits; docs/operations.md MultinetDRAPrepareFailures), and ResourceSlice publications by result.",
		Component:   DRADriver, Unit: "ops",
		Queries: []Query{
			{Expr: `sum by (node, operation, result) (rate(multinet_dra_claims_total{` + nodeSel + `}` + rateWin + `))`, Legend: "{{node}} {{operation}} {{result}}"},
			{Expr: `sum by (node, result) (rate(multinet_dra_resourceslice_publishes_total{` + nodeSel + `}` + rateWin + `))`, Legend: "publishes {{node}} {{result}}"},
		},
	},
	{
		Title:       "multinet-ipam-cleanup: releases and failures",
		Description: "IPAllocations multinet-ipam-cleanup released per second by reason (pod-gone, claim-gone), examined, and left because their owner could not be checked or their release failed.",
		Component:   IPAMCleanup, Unit: "ops",
		Queries: []Query{
			{Expr: `sum by (reason) (rate(multinet_ipam_released_total{` + cleanupSel + `}` + rateWin + `))`, Legend: "released {{reason}}"},
			{Expr: `sum (rate(multinet_ipam_reconcile_checked_total{` + cleanupSel + `}` + rateWin + `))`, Legend: "examined"},
			{Expr: `sum (rate(multinet_ipam_reconcile_failed_total{` + cleanupSel + `}` + rateWin + `))`, Legend: "failed"},
		},
	},
	{
		Title:       "multinet-ipam-cleanup: time since the last successful pass",
		Description: "Seconds since multinet-ipam-cleanup's last pass over every node's IPAllocations ended without an error (a pass runs every --interval, 5 min ±50% as shipped; docs/operations.md MultinetIPAMCleanupNotSucceeding).",
		Component:   IPAMCleanup, Unit: "s",
		Queries: []Query{{
			Expr:   `time() - max (multinet_ipam_reconcile_last_success_timestamp_seconds{` + cleanupSel + `} > 0)`,
			Legend: "since the last success",
		}},
	},
	{
		Title:       "Admission decisions",
		Description: "The webhook's decisions per second by handler and result (allowed, patched, denied, errored).",
		Component:   Webhook, Unit: "ops",
		Queries: []Query{{
			Expr:   `sum by (handler, result) (rate(multinet_webhook_admission_decisions_total` + rateWin + `))`,
			Legend: "{{handler}} {{result}}",
		}},
	},
}

// Dashboard builds the Grafana dashboard of Panels, with a Prometheus data
// source variable and a multi-value node variable (the node label the
// PodMonitors add). Errors: a builder refused a value.
func Dashboard() (dashboard.Dashboard, error) {
	ds := common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}
	b := dashboard.NewDashboardBuilder("multinet").
		Uid(DashboardUID).
		Tags([]string{"multinet", "cni"}).
		Description("multinet: CNI operations, slot waits, network-status PATCHes, hot-plug, multinet-ipam, devices (device plugin, DRA driver), multinet-ipam-cleanup, admission. Generated by deploy/observability (go run ./gen); runbooks in docs/operations.md.").
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("node").
			Label("Node").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr("label_values(multinet_cni_operations_total, node)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).IncludeAll(true).AllValue(".*"))
	for i, p := range Panels {
		tp := timeseries.NewPanelBuilder().
			Title(p.Title).
			Description(p.Description).
			Datasource(ds).
			Unit(p.Unit).
			Min(0).
			Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)).
			Height(8).Span(12).
			GridPos(dashboard.GridPos{H: 8, W: 12, X: uint32(12 * (i % 2)), Y: uint32(8 * (i / 2))})
		for j, q := range p.Queries {
			tp.WithTarget(prometheus.NewDataqueryBuilder().
				Datasource(ds).
				Expr(q.Expr).
				LegendFormat(q.Legend).
				RefId(string(rune('A' + j))))
		}
		b.WithPanel(tp)
	}
	return b.Build()
}

func ptr[T any](v T) *T { return &v }
