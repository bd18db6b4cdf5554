package ipamd

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/multinet/multinet/pkg/cniserver/api"
)

// metrics are multinet-ipam's Prometheus metrics (registered when a
// Registerer is given).
type metrics struct {
	ops       *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	conflicts prometheus.Counter
	released  *prometheus.CounterVec
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
	}
	if r != nil {
		r.MustRegister(m.collectors()...)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ops, m.duration, m.conflicts, m.released}
}

// MetricCollectors returns new, unregistered collectors of the multinet_ipam_*
// metrics that Options.Registerer and CleanupOptions.Registerer get. They
// describe the metric names for tools that check dashboards and alert rules
// against them (deploy/observability).
func MetricCollectors() []prometheus.Collector { return newMetrics(nil).collectors() }

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
