// Package observability is the one source of multinet's Grafana dashboard,
// Prometheus alert rules and Prometheus Operator PodMonitors
// (docs/operations.md). `go run ./gen` (make observability) writes them next
// to this file:
//
//	dashboard.json       the Grafana dashboard (Dashboard)
//	rules.yaml           the alert rules as a plain Prometheus rules file (RuleGroups)
//	prometheusrule.yaml  the same rules as a monitoring.coreos.com/v1 PrometheusRule
//	podmonitors.yaml     a monitoring.coreos.com/v1 PodMonitor per component with /metrics
//
// It is a module of its own (replace github.com/multinet/multinet => ../..):
// the Grafana Foundation SDK, Prometheus (promtool, the PromQL parser) and the
// Prometheus Operator's API types are tools and test dependencies, not
// dependencies of the shipped binaries. Its tests check every PromQL
// expression against the metric names the components really register
// (daemon.MetricCollectors, server.RegisterMetrics), run `promtool test
// rules` and `promtool check rules`, and create the PodMonitors on a real
// kube-apiserver with the Prometheus Operator's CRD.
package observability
