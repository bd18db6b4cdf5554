package daemon

import (
	"errors"
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/ipam/ipamd"
	"github.com/multinet/multinet/internal/node/attach"
	"github.com/multinet/multinet/internal/node/hotplug"
	"github.com/multinet/multinet/internal/node/nadlookup"
	"github.com/multinet/multinet/internal/node/netstatus"
	"github.com/multinet/multinet/internal/node/policysync"
)

// metrics are multinetd's Prometheus metrics, in their own registry.
// They implement cniserver.Observer, attach.Observer,
// netstatus.Observer, attach.RecordObserver and hotplug.Observer.
type metrics struct {
	registry   *prometheus.Registry
	opDuration *prometheus.HistogramVec // command
	opTotal    *prometheus.CounterVec   // command, code
	queued     *prometheus.HistogramVec // command
	read       *prometheus.HistogramVec // command
	inFlight   prometheus.Gauge
	delegate   *prometheus.HistogramVec // command, plugin
	delegateEr *prometheus.CounterVec   // command, plugin, code
	nadLive    *prometheus.CounterVec   // result
	nadSync    *prometheus.HistogramVec // result
	stPending  prometheus.Gauge
	stRetries  *prometheus.CounterVec   // result
	corrupt    *prometheus.CounterVec   // operation, outcome
	reaped     *prometheus.CounterVec   // result
	hotPlugs   *prometheus.CounterVec   // result
	hotPlugDur *prometheus.HistogramVec // result
	recSynced  *prometheus.CounterVec   // result
	peerRef    *prometheus.CounterVec   // socket
	polSyncs   *prometheus.CounterVec   // result
	polLatency prometheus.Histogram
	polTables  prometheus.Gauge
	polRules   prometheus.Gauge
}

// latencyBuckets span 1 ms to about 65 s, in seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		opDuration: histogramVec("cni_operation_duration_seconds", latencyBuckets,
			"Time multinetd spent on a CNI operation (handler run time, without queueing), by CNI command.",
			"command"),
		opTotal: counterVec("cni_operations_total",
			"CNI operations answered, by command and CNI error code (0 = success).",
			"command", "code"),
		queued: histogramVec("cni_operation_queued_seconds", latencyBuckets,
			"Time a CNI operation waited for a concurrency slot, by command.",
			"command"),
		read: histogramVec("cni_request_read_seconds", prometheus.ExponentialBuckets(0.0001, 2, 17),
			"Time from accepting a CNI connection to its request read and decoded, by command (INVALID: not decodable).",
			"command"),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "multinet", Name: "cni_operations_in_flight",
			Help: "CNI operations read and not yet answered (queued or running)."}),
		delegate: histogramVec("delegate_duration_seconds", latencyBuckets,
			"Time of one delegate config list invocation, by command and the list's first plugin type.",
			"command", "plugin"),
		delegateEr: counterVec("delegate_errors_total",
			"Failed delegate invocations, by command, plugin type and CNI error code.",
			"command", "plugin", "code"),
		nadLive: counterVec("nad_live_lookups_total",
			"NetworkAttachmentDefinitions an ADD did not find in the synced informer cache, read from the API server, by result (found: the informer lagged).",
			"result"),
		nadSync: histogramVec("nad_sync_wait_seconds", latencyBuckets,
			"Time an ADD's NAD lookup waited for the NAD informer's first list, by result (synced, not_synced: gave up after nadSyncWait or the request's deadline).",
			"result"),
		stPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "multinet", Name: "network_status_pending",
			Help: "Pod sandboxes whose network-status annotation the API server has not accepted yet (the ADD's PATCH failed); multinetd retries them in the background."}),
		stRetries: counterVec("network_status_retries_total",
			"Background retries of a network-status PATCH, by result (landed; failed: tried again later; withdrawn: the pod is gone, its sandbox torn down or superseded).",
			"result"),
		corrupt: counterVec("corrupt_records_total",
			"Corrupt (or partially recovered) attachment records handled, by operation (ADD, DEL, GC) and outcome (recovered: everything they could name torn down; incomplete: a delegate DEL failed or the pod's networks are unknown, the record kept for a retry).",
			"operation", "outcome"),
		reaped: counterVec("stale_sandboxes_total",
			"Attachment records of pod sandboxes the container runtime no longer lists (their DEL never reached multinetd), by result (reaped: torn down and removed; failed: a teardown failed, retried at the next reap).",
			"result"),
		hotPlugs: counterVec("hotplug_operations_total",
			"Hot-plugs of a running pod's networks (its networks annotation changed), by result (succeeded; failed: a delegate, lookup or save failed, rolled back and retried; refused: the change cannot be made until the annotation changes).",
			"result"),
		hotPlugDur: histogramVec("hotplug_duration_seconds", latencyBuckets,
			"Time of one hot-plug, from taking the sandbox's lock to its record saved and network-status written, by result.",
			"result"),
		recSynced: counterVec("records_synced_total",
			"Attachment records made durable by the background group commit (recordSync: background), by result (ok; error: an fsync failed, the record may not survive a power loss).",
			"result"),
		peerRef: counterVec("socket_peer_refused_total",
			"Connections refused because the connecting process is not root on the node (SO_PEERCRED), by socket (cni: the shim's, ipam: multinet-ipam's).",
			"socket"),
		polSyncs: counterVec("policy_syncs_total",
			"MultiNetworkPolicy syncs of a pod sandbox's rules, by result (applied: its nftables table written; unchanged: it already held them; removed: no policy selects the pod any more; none: not selected, no table; failed: retried).",
			"result"),
		polLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "multinet", Name: "policy_sync_latency_seconds", Buckets: latencyBuckets,
			Help: "Time from a change multinetd saw (policy, pod or namespace labels, a peer's network-status, a NAD) to the affected sandbox's rules in place."}),
		polTables: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "multinet", Name: "policy_enforced_sandboxes",
			Help: "Pod sandboxes of the node whose network namespace holds multinetd's MultiNetworkPolicy table."}),
		polRules: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "multinet", Name: "policy_rules",
			Help: "nftables rules in the MultiNetworkPolicy tables of the node's sandboxes (divide by multinet_policy_enforced_sandboxes for rules per pod)."}),
	}
	m.registry.MustRegister(m.collectors()...)
	m.initLabels()
	return m
}

// collectors are every collector newMetrics registers.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.opDuration, m.opTotal, m.queued, m.read, m.inFlight, m.delegate, m.delegateEr, m.nadLive, m.nadSync,
		m.stPending, m.stRetries, m.corrupt, m.reaped, m.hotPlugs, m.hotPlugDur, m.recSynced, m.peerRef,
		m.polSyncs, m.polLatency, m.polTables, m.polRules,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// MetricCollectors returns new, unregistered collectors of every metric
// multinetd serves on /metrics: its own (multinet_cni_*, multinet_delegate_*,
// multinet_network_status_*, multinet_hotplug_*, ...), the Go and process
// collectors, and those of the multinet-ipam it serves (ipamd.MetricCollectors).
// They describe the metric names for tools that check dashboards and alert
// rules against them (deploy/observability); they are not the ones a running
// daemon updates.
func MetricCollectors() []prometheus.Collector {
	return append(newMetrics().collectors(), ipamd.MetricCollectors()...)
}

// initLabels creates the series of every known label value at 0, so that
// they are exported before the first event.
func (m *metrics) initLabels() {
	for _, s := range []string{SocketCNI, SocketIPAM} {
		m.peerRef.WithLabelValues(s)
	}
	for _, r := range []string{nadlookup.LiveFound, nadlookup.LiveNotFound, nadlookup.LiveError} {
		m.nadLive.WithLabelValues(r)
	}
	for _, r := range []string{reapedOK, reapFailed} {
		m.reaped.WithLabelValues(r)
	}
	for _, r := range []string{netstatus.RetryLanded, netstatus.RetryFailed, netstatus.RetryWithdrawn} {
		m.stRetries.WithLabelValues(r)
	}
	for _, r := range []string{hotplug.Succeeded, hotplug.Failed, hotplug.Refused} {
		m.hotPlugs.WithLabelValues(r)
	}
	for _, r := range []string{policysync.ResultApplied, policysync.ResultUnchanged, policysync.ResultRemoved, policysync.ResultNone, policysync.ResultFailed} {
		m.polSyncs.WithLabelValues(r)
	}
}

var _ policysync.Observer = (*metrics)(nil)

// PolicySynced implements policysync.Observer.
func (m *metrics) PolicySynced(result string, latency time.Duration, tables, rules int) {
	m.polSyncs.WithLabelValues(result).Inc()
	if latency > 0 {
		m.polLatency.Observe(latency.Seconds())
	}
	m.polTables.Set(float64(tables))
	m.polRules.Set(float64(rules))
}

// counterVec is the counter vector multinet_<name> with labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "multinet", Name: name, Help: help}, labels)
}

// histogramVec is the histogram vector multinet_<name> of buckets (seconds)
// with labels.
func histogramVec(name string, buckets []float64, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "multinet", Name: name, Help: help, Buckets: buckets}, labels)
}

var _ hotplug.Observer = (*metrics)(nil)

// recordSync is the record store's state.Options.OnSync: it counts the
// records of a group commit and logs a failed one.
func (m *metrics) recordSync(records int, err error) {
	if err != nil {
		klog.ErrorS(err, "Group commit of attachment records failed: they may not survive a power loss", "records", records)
		m.recSynced.WithLabelValues("error").Add(float64(records))
		return
	}
	m.recSynced.WithLabelValues("ok").Add(float64(records))
}

// HotPlugDone implements hotplug.Observer.
func (m *metrics) HotPlugDone(result string, d time.Duration) {
	m.hotPlugs.WithLabelValues(result).Inc()
	m.hotPlugDur.WithLabelValues(result).Observe(d.Seconds())
}

var _ netstatus.Observer = (*metrics)(nil)

// StatusPending implements netstatus.Observer.
func (m *metrics) StatusPending(n int) { m.stPending.Set(float64(n)) }

// StatusRetried implements netstatus.Observer.
func (m *metrics) StatusRetried(result string) { m.stRetries.WithLabelValues(result).Inc() }

var _ attach.RecordObserver = (*metrics)(nil)

// CorruptRecord implements attach.RecordObserver.
func (m *metrics) CorruptRecord(operation, outcome string) {
	m.corrupt.WithLabelValues(operation, outcome).Inc()
}

// OnStart implements cniserver.Observer.
func (m *metrics) OnStart(string) { m.inFlight.Inc() }

// OnPeerRefused implements cniserver.PeerObserver for the shim's socket.
func (m *metrics) OnPeerRefused(uint32) { m.peerRef.WithLabelValues(SocketCNI).Inc() }

// Values of socket_peer_refused_total's socket label.
const (
	SocketCNI  = "cni"
	SocketIPAM = "ipam"
)

// ipamPeers is the Observer of multinet-ipam's socket: it counts refused
// peers only (internal/ipam/ipamd has metrics of its own for the operations).
type ipamPeers struct{ m *metrics }

func (ipamPeers) OnStart(string)                                                           {}
func (ipamPeers) OnDone(string, time.Duration, time.Duration, time.Duration, *types.Error) {}
func (p ipamPeers) OnPeerRefused(uint32)                                                   { p.m.peerRef.WithLabelValues(SocketIPAM).Inc() }

// OnDone implements cniserver.Observer.
func (m *metrics) OnDone(command string, read, queued, ran time.Duration, err *types.Error) {
	m.inFlight.Dec()
	code := "0"
	if err != nil {
		code = strconv.FormatUint(uint64(err.Code), 10)
	}
	m.opTotal.WithLabelValues(command, code).Inc()
	m.opDuration.WithLabelValues(command).Observe(ran.Seconds())
	m.queued.WithLabelValues(command).Observe(queued.Seconds())
	m.read.WithLabelValues(command).Observe(read.Seconds())
}

// DelegateDone implements attach.Observer.
func (m *metrics) DelegateDone(command, plugin string, d time.Duration, err error) {
	m.delegate.WithLabelValues(command, plugin).Observe(d.Seconds())
	if err != nil {
		code := "999"
		var te *types.Error
		if errors.As(err, &te) {
			code = strconv.FormatUint(uint64(te.Code), 10)
		}
		m.delegateEr.WithLabelValues(command, plugin, code).Inc()
	}
}

// NADLiveLookup counts one live GET of a NAD the informer cache did not have
// (nadlookup.Lookup.OnLive).
func (m *metrics) NADLiveLookup(result string) { m.nadLive.WithLabelValues(result).Inc() }

// NADSyncWait observes one wait for the NAD informer's first list
// (nadlookup.Lookup.OnSyncWait).
func (m *metrics) NADSyncWait(waited time.Duration, synced bool) {
	result := "synced"
	if !synced {
		result = "not_synced"
	}
	m.nadSync.WithLabelValues(result).Observe(waited.Seconds())
}
