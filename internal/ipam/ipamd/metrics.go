package ipamd

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/multinet/multinet/internal/ipam"
	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// metrics are multinet-ipam's Prometheus metrics (registered when a
// Registerer is given).
type metrics struct {
	ops       *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	conflicts prometheus.Counter
	released  *prometheus.CounterVec
	// The reconcile passes (multinetd's over its node, multinet-ipam-cleanup's over every node).
	passes      *prometheus.CounterVec // result
	checked     prometheus.Counter
	failed      prometheus.Counter
	lastSuccess prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_ipam_operations_total",
			Help: "multinet-ipam CNI operations by command and result (ok, or the CNI error code).",
		}, []string{"command", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "multinet_ipam_operation_duration_seconds",
			Help:    "Time multinetd spent on a multinet-ipam CNI operation (API requests included; the plugin's start and the socket not), by command.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"command"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "multinet_ipam_conflicts_total",
			Help: "IPAllocation creates that found their address taken by another allocator (the allocation moved on to another address).",
		}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_ipam_released_total",
			Help: "Addresses released outside CNI DEL, by reason (claim-deleted, pod-gone, claim-gone).",
		}, []string{"reason"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_ipam_reconcile_passes_total",
			Help: "Reconcile passes over IPAllocations (multinetd: its node's; multinet-ipam-cleanup: every node's), by result (ok; error: a list failed, or an allocation could not be checked or released).",
		}, []string{"result"}),
		checked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "multinet_ipam_reconcile_checked_total",
			Help: "IPAllocations a reconcile pass examined (whether their pod or IPAMClaim still exists).",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "multinet_ipam_reconcile_failed_total",
			Help: "IPAllocations a reconcile pass left because their owner could not be checked or their release failed (retried next pass).",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "multinet_ipam_reconcile_last_success_timestamp_seconds",
			Help: "Unix time the last reconcile pass without an error ended (0: none since the process started).",
		}),
	}
	m.passes.WithLabelValues("ok")
	m.passes.WithLabelValues("error")
	for _, reason := range []string{"pod-gone", "claim-gone", "claim-deleted"} {
		m.released.WithLabelValues(reason)
	}
	if r != nil {
		r.MustRegister(m.collectors()...)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.ops, m.duration, m.conflicts}, m.reconcileCollectors()...)
}

// reconcileCollectors are the reconcile passes' collectors, all that
// multinet-ipam-cleanup serves.
func (m *metrics) reconcileCollectors() []prometheus.Collector {
	return []prometheus.Collector{m.released, m.passes, m.checked, m.failed, m.lastSuccess}
}

// CleanupMetricCollectors returns new, unregistered collectors of the
// metrics multinet-ipam-cleanup serves (RunCleanup's
// CleanupOptions.Registerer): multinet_ipam_reconcile_* and
// multinet_ipam_released_total. They describe the metric names for tools
// that check dashboards and alert rules against them (deploy/observability).
func CleanupMetricCollectors() []prometheus.Collector { return newMetrics(nil).reconcileCollectors() }

// MetricCollectors returns new, unregistered collectors of the multinet_ipam_*
// metrics that Options.Registerer gets (multinetd). They
// describe the metric names for tools that check dashboards and alert rules
// against them (deploy/observability).
func MetricCollectors() []prometheus.Collector { return newMetrics(nil).collectors() }

// reconciled records a reconcile pass that ended at end.
func (m *metrics) reconciled(res ipam.ReconcileResult, err error, end time.Time) {
	m.released.WithLabelValues("pod-gone").Add(float64(res.ReleasedPod))
	m.released.WithLabelValues("claim-gone").Add(float64(res.ReleasedClaim))
	m.checked.Add(float64(res.Checked))
	m.failed.Add(float64(res.Failed))
	if err != nil {
		m.passes.WithLabelValues("error").Inc()
		return
	}
	m.passes.WithLabelValues("ok").Inc()
	m.lastSuccess.Set(float64(end.UnixNano()) / 1e9)
}

// observed counts a Handler's operations.
type observed struct {
	h *Handler
	m *metrics
}

// count counts an operation that began at start.
func (o *observed) count(cmd string, start time.Time, err error) {
	o.m.duration.WithLabelValues(cmd).Observe(time.Since(start).Seconds())
	result := "ok"
	if err != nil {
		result = "999"
		var cerr *types.Error
		if errors.As(err, &cerr) {
			result = strconv.FormatUint(uint64(cerr.Code), 10)
		}
	}
	o.m.ops.WithLabelValues(cmd, result).Inc()
}

func (o *observed) Add(ctx context.Context, req *api.Request) ([]byte, error) {
	start := time.Now()
	out, err := o.h.Add(ctx, req)
	o.count(api.CmdAdd, start, err)
	return out, err
}

func (o *observed) Del(ctx context.Context, req *api.Request) error {
	start := time.Now()
	err := o.h.Del(ctx, req)
	o.count(api.CmdDel, start, err)
	return err
}

func (o *observed) Check(ctx context.Context, req *api.Request) error {
	start := time.Now()
	err := o.h.Check(ctx, req)
	o.count(api.CmdCheck, start, err)
	return err
}

func (o *observed) GC(ctx context.Context, req *api.Request) error {
	start := time.Now()
	err := o.h.GC(ctx, req)
	o.count(api.CmdGC, start, err)
	return err
}

func (o *observed) Status(ctx context.Context, req *api.Request) error {
	start := time.Now()
	err := o.h.Status(ctx, req)
	o.count(api.CmdStatus, start, err)
	return err
}
