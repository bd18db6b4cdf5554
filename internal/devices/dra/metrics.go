package dra

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
)

// Operation label values: the kubelet's DRA gRPC calls the driver answers.
const (
	opPrepare   = "NodePrepareResources"
	opUnprepare = "NodeUnprepareResources"
)

// Metrics are multinet-dra-driver's Prometheus metrics. Create them with
// NewMetrics and hand them to New (Options.Metrics).
type Metrics struct {
	publishes *prometheus.CounterVec   // result
	claims    *prometheus.CounterVec   // operation, result
	duration  *prometheus.HistogramVec // operation
	prepared  prometheus.Gauge
	devices   *prometheus.GaugeVec // resource, health
}

// NewMetrics returns the DRA driver's metrics, registered with reg when reg
// is not nil:
//
//	multinet_dra_resourceslice_publishes_total{result}         counter: ResourceSlice publications (ok, error)
//	multinet_dra_claims_total{operation, result}               counter: ResourceClaims handled by NodePrepareResources / NodeUnprepareResources (ok, error)
//	multinet_dra_operation_duration_seconds{operation}         histogram: time of one NodePrepareResources / NodeUnprepareResources call
//	multinet_dra_prepared_claims                               gauge: ResourceClaims prepared on the node and not unprepared
//	multinet_dra_devices{resource, health}                     gauge: devices published, by the pool's resourceName and health (Healthy, Unhealthy: tainted)
//
// Errors: reg refused a collector.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_dra_resourceslice_publishes_total",
			Help: "ResourceSlice publications of the node's devices (at start and after each change of a pool), by result (ok; error: the driver stops).",
		}, []string{"result"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_dra_claims_total",
			Help: "ResourceClaims the kubelet asked the driver to prepare or unprepare, by operation (NodePrepareResources, NodeUnprepareResources) and result (ok; error: the kubelet retries, the pod waits).",
		}, []string{"operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "multinet_dra_operation_duration_seconds",
			Help:    "Time the driver spent on one NodePrepareResources or NodeUnprepareResources call (every claim of the call), by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"operation"}),
		prepared: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "multinet_dra_prepared_claims",
			Help: "ResourceClaims prepared on the node and not unprepared yet.",
		}),
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "multinet_dra_devices",
			Help: "Devices the driver publishes in the node's ResourceSlices, by the pool's resourceName and health (Healthy; Unhealthy: published with a NoSchedule taint).",
		}, []string{"resource", "health"}),
	}
	for _, op := range []string{opPrepare, opUnprepare} {
		m.claims.WithLabelValues(op, "ok")
		m.claims.WithLabelValues(op, "error")
		m.duration.WithLabelValues(op)
	}
	m.publishes.WithLabelValues("ok")
	if reg != nil {
		for _, c := range m.collectors() {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering DRA driver metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.publishes, m.claims, m.duration, m.prepared, m.devices}
}

// MetricCollectors returns new, unregistered collectors of the
// multinet_dra_* metrics. They describe the metric names for tools that
// check dashboards and alert rules against them (deploy/observability).
func MetricCollectors() []prometheus.Collector {
	m, _ := NewMetrics(nil)
	return m.collectors()
}

// result is a result label value.
func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// published records a publication of pools' devices (byName: DRA pool →
// device name → device), or its failure.
func (m *Metrics) published(pools []*servedPool, byName map[string]map[string]pool.Device, err error) {
	m.publishes.WithLabelValues(result(err)).Inc()
	if err != nil {
		return
	}
	for _, p := range pools {
		healthy, all := 0, 0
		for _, d := range byName[p.name] {
			all++
			if d.Healthy {
				healthy++
			}
		}
		rn := p.pool.ResourceName()
		m.devices.WithLabelValues(rn, "Healthy").Set(float64(healthy))
		m.devices.WithLabelValues(rn, "Unhealthy").Set(float64(all - healthy))
	}
}

// handled records one call of operation that began at start, with the
// claims' errors (nil: ok) and the claims prepared after it.
func (m *Metrics) handled(operation string, start time.Time, errs []error, prepared int) {
	m.duration.WithLabelValues(operation).Observe(time.Since(start).Seconds())
	for _, err := range errs {
		m.claims.WithLabelValues(operation, result(err)).Inc()
	}
	m.prepared.Set(float64(prepared))
}
