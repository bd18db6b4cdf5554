package observability

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scrape addresses of the components, as deploy/base ships them.
const (
	// MultinetdMetricsPort is the port of multinetd's metricsAddress
	// (deploy/base/multinetd.yaml). multinetd runs on the host network and
	// ships metricsAddress 127.0.0.1:9390, reachable from the node only: the
	// PodMonitor scrapes the node's address and needs metricsAddress set to
	// it (docs/operations.md "Scraping multinetd").
	MultinetdMetricsPort = 9390
	// WebhookProbePort is the name of the webhook container's plain HTTP
	// port of /healthz, /readyz and /metrics (--probe-bind-address).
	WebhookProbePort = "probes"
	// MetricsPort is the name of the metrics container port of
	// multinet-deviceplugin (9391), multinet-dra-driver (9392) and
	// multinet-ipam-cleanup (9393), their --metrics-address. The device
	// plugin and the DRA driver run on the host network and ship
	// 127.0.0.1 as multinetd does (docs/operations.md "Scraping the node
	// components"); multinet-ipam-cleanup listens on its pod's network.
	MetricsPort = "metrics"
)

// nameLabel is the pods' label naming the component; the PodMonitors take
// the job label from it (job="multinetd", job="multinet-webhook"), as the
// rules expect.
const nameLabel = "app.kubernetes.io/name"

// PodMonitors are a monitoring.coreos.com/v1 PodMonitor per component, each
// serving /metrics: multinetd, the webhook, multinet-deviceplugin,
// multinet-dra-driver and multinet-ipam-cleanup. Every target gets a node
// label (the pod's node), the dashboard's node variable.
func PodMonitors() []*monitoringv1.PodMonitor {
	nodeLabel := []monitoringv1.RelabelConfig{{
		SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_node_name"},
		TargetLabel:  "node",
		Action:       "replace",
	}}
	port := int32(MultinetdMetricsPort)
	named := func(name string) monitoringv1.PodMetricsEndpoint {
		return monitoringv1.PodMetricsEndpoint{Port: &name, Path: "/metrics", Interval: "30s", RelabelConfigs: nodeLabel}
	}
	return []*monitoringv1.PodMonitor{
		podMonitor(Multinetd, monitoringv1.PodMetricsEndpoint{PortNumber: &port, Path: "/metrics", Interval: "30s", RelabelConfigs: nodeLabel}),
		podMonitor(Webhook, named(WebhookProbePort)),
		podMonitor(DevicePlugin, named(MetricsPort)),
		podMonitor(DRADriver, named(MetricsPort)),
		podMonitor(IPAMCleanup, named(MetricsPort)),
	}
}

func podMonitor(name string, ep monitoringv1.PodMetricsEndpoint) *monitoringv1.PodMonitor {
	return &monitoringv1.PodMonitor{
		TypeMeta: metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.PodMonitorsKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: Namespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "multinet"},
		},
		Spec: monitoringv1.PodMonitorSpec{
			JobLabel:            nameLabel,
			Selector:            metav1.LabelSelector{MatchLabels: map[string]string{nameLabel: name}},
			PodMetricsEndpoints: []monitoringv1.PodMetricsEndpoint{ep},
		},
	}
}
