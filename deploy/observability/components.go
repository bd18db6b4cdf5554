package observability

// Components whose metrics the dashboard and the rules read.
const (
	// Multinetd is the node daemon (and the multinet-ipam it serves):
	// daemon.MetricCollectors.
	Multinetd = "multinetd"
	// Webhook is the admission webhook: server.RegisterMetrics.
	Webhook = "multinet-webhook"
	// DevicePlugin is the device plugin: deviceplugin.MetricCollectors.
	DevicePlugin = "multinet-deviceplugin"
	// DRADriver is the DRA driver: dra.MetricCollectors.
	DRADriver = "multinet-dra-driver"
	// IPAMCleanup is multinet-ipam-cleanup: ipamd.CleanupMetricCollectors.
	// multinetd serves the same multinet_ipam_reconcile_* names for its own
	// node's passes: queries about the cleanup select job="multinet-ipam-cleanup".
	IPAMCleanup = "multinet-ipam-cleanup"
	// KubeStateMetrics is kube-state-metrics, which an operator runs beside
	// Prometheus: the pods' device requests and the multinetd DaemonSet's
	// readiness come from it.
	KubeStateMetrics = "kube-state-metrics"
	// Prometheus is Prometheus itself (up).
	Prometheus = "prometheus"
)

// DeviceResourceRegex matches the extended resources of the shipped device
// pools (multinet.io/...) as kube-state-metrics names them in its resource
// label ("multinet.io/netdev" becomes "multinet_io_netdev"). An operator
// whose pools use another domain changes it here and regenerates.
const DeviceResourceRegex = "multinet_io_.+"

// Namespace is the namespace the shipped manifests install into.
const Namespace = "multinet-system"
