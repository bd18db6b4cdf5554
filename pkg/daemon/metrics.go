package daemon

import (
	"errors"
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/pkg/attach"
	"github.com/multinet/multinet/pkg/nadlookup"
)

// metrics are multinetd's Prometheus metrics, in their own registry.
// They implement cniserver.Observer, attach.Observer,
// attach.StatusObserver, attach.RecordObserver and attach.HotPlugObserver.
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
}

// latencyBuckets span 1 ms to about 65 s, in seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "multinet", Name: "cni_operation_duration_seconds",
			Help:    "Time multinetd spent on a CNI operation (handler run time, without queueing), by CNI command.",
			Buckets: latencyBuckets,
		}, []string{"command"}),
		opTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "cni_operations_total",
			Help: "CNI operations answered, by command and CNI error code (0 = success).",
		}, []string{"command", "code"}),
		queued: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "multinet", Name: "cni_operation_queued_seconds",
			Help:    "Time a CNI operation waited for a concurrency slot, by command.",
			Buckets: latencyBuckets,
		}, []string{"command"}),
		read: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "multinet", Name: "cni_request_read_seconds",
			Help:    "Time from accepting a CNI connection to its request read and decoded, by command (INVALID: not decodable).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
		}, []string{"command"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "multinet", Name: "cni_operations_in_flight",
			Help: "CNI operations read and not yet answered (queued or running).",
		}),
		delegate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "multinet", Name: "delegate_duration_seconds",
			Help:    "Time of one delegate config list invocation, by command and the list's first plugin type.",
			Buckets: latencyBuckets,
		}, []string{"command", "plugin"}),
		delegateEr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "delegate_errors_total",
			Help: "Failed delegate invocations, by command, plugin type and CNI error code.",
		}, []string{"command", "plugin", "code"}),
		nadLive: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "nad_live_lookups_total",
			Help: "NetworkAttachmentDefinitions an ADD did not find in the synced informer cache, read from the API server, by result (found: the informer lagged).",
		}, []string{"result"}),
		nadSync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "multinet", Name: "nad_sync_wait_seconds",
			Help:    "Time an ADD's NAD lookup waited for the NAD informer's first list, by result (synced, not_synced: gave up after nadSyncWait or the request's deadline).",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		stPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "multinet", Name: "network_status_pending",
			Help: "Pod sandboxes whose network-status annotation the API server has not accepted yet (the ADD's PATCH failed); multinetd retries them in the background.",
		}),
		stRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "network_status_retries_total",
			Help: "Background retries of a network-status PATCH, by result (landed; failed: tried again later; withdrawn: the pod is gone, its sandbox torn down or superseded).",
		}, []string{"result"}),
		corrupt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "corrupt_records_total",
			Help: "Corrupt (or partially recovered) attachment records handled, by operation (ADD, DEL, GC) and outcome (recovered: everything they could name torn down; incomplete: a delegate DEL failed or the pod's networks are unknown, the record kept for a retry).",
		}, []string{"operation", "outcome"}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "stale_sandboxes_total",
			Help: "Attachment records of pod sandboxes the container runtime no longer lists (their DEL never reached multinetd), by result (reaped: torn down and removed; failed: a teardown failed, retried at the next reap).",
		}, []string{"result"}),
		hotPlugs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "hotplug_operations_total",
			Help: "Hot-plugs of a running pod's networks (its networks annotation changed), by result (succeeded; failed: a delegate, lookup or save failed, rolled back and retried; refused: the change cannot be made until the annotation changes).",
		}, []string{"result"}),
		hotPlugDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "multinet", Name: "hotplug_duration_seconds",
			Help:    "Time of one hot-plug, from taking the sandbox's lock to its record saved and network-status written, by result.",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		recSynced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "records_synced_total",
			Help: "Attachment records made durable by the background group commit (recordSync: background), by result (ok; error: an fsync failed, the record may not survive a power loss).",
		}, []string{"result"}),
		peerRef: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet", Name: "socket_peer_refused_total",
			Help: "Connections refused because the connecting process is not root on the node (SO_PEERCRED), by socket (cni: the shim's, ipam: multinet-ipam's).",
		}, []string{"socket"}),
	}
	m.registry.MustRegister(m.opDuration, m.opTotal, m.queued, m.read, m.inFlight, m.delegate, m.delegateEr, m.nadLive, m.nadSync,
		m.stPending, m.stRetries, m.corrupt, m.reaped, m.hotPlugs, m.hotPlugDur, m.recSynced, m.peerRef,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range []string{SocketCNI, SocketIPAM} {
		m.peerRef.WithLabelValues(s)
	}
	for _, r := range []string{nadlookup.LiveFound, nadlookup.LiveNotFound, nadlookup.LiveError} {
		m.nadLive.WithLabelValues(r)
	}
	for _, r := range []string{reapedOK, reapFailed} {
		m.reaped.WithLabelValues(r)
	}
	for _, r := range []string{attach.RetryLanded, attach.RetryFailed, attach.RetryWithdrawn} {
		m.stRetries.WithLabelValues(r)
	}
	for _, r := range []string{attach.HotPlugSucceeded, attach.HotPlugFailed, attach.HotPlugRefused} {
		m.hotPlugs.WithLabelValues(r)
	}
	return m
}

var _ attach.HotPlugObserver = (*metrics)(nil)

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

// HotPlugDone implements attach.HotPlugObserver.
func (m *metrics) HotPlugDone(result string, d time.Duration) {
	m.hotPlugs.WithLabelValues(result).Inc()
	m.hotPlugDur.WithLabelValues(result).Observe(d.Seconds())
}

var _ attach.StatusObserver = (*metrics)(nil)

// StatusPending implements attach.StatusObserver.
func (m *metrics) StatusPending(n int) { m.stPending.Set(float64(n)) }

// StatusRetried implements attach.StatusObserver.
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
// peers only (pkg/ipamd has metrics of its own for the operations).
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
