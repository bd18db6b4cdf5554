package ipamd

import (
	"context"
	"errors"
	"strconv"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/multinet/multinet/pkg/cniserver/api"
)

// metrics are multinet-ipam's Prometheus metrics (registered when a
// Registerer is given).
type metrics struct {
	ops       *prometheus.CounterVec
	conflicts prometheus.Counter
	released  *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_ipam_operations_total",
			Help: "multinet-ipam CNI operations by command and result (ok, or the CNI error code).",
		}, []string{"command", "result"}),
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
		r.MustRegister(m.ops, m.conflicts, m.released)
	}
	return m
}

// observed counts a Handler's operations.
type observed struct {
	h *Handler
	m *metrics
}

func (o *observed) count(cmd string, err error) {
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
	out, err := o.h.Add(ctx, req)
	o.count(api.CmdAdd, err)
	return out, err
}

func (o *observed) Del(ctx context.Context, req *api.Request) error {
	err := o.h.Del(ctx, req)
	o.count(api.CmdDel, err)
	return err
}

func (o *observed) Check(ctx context.Context, req *api.Request) error {
	err := o.h.Check(ctx, req)
	o.count(api.CmdCheck, err)
	return err
}

func (o *observed) GC(ctx context.Context, req *api.Request) error {
	err := o.h.GC(ctx, req)
	o.count(api.CmdGC, err)
	return err
}

func (o *observed) Status(ctx context.Context, req *api.Request) error {
	err := o.h.Status(ctx, req)
	o.count(api.CmdStatus, err)
	return err
}
