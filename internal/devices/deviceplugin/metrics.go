package deviceplugin

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
)

// Metrics are multinet-deviceplugin's Prometheus metrics, labelled by the
// pool's resourceName (resource="multinet.io/netdev"). Create them with
// NewMetrics; one Metrics serves every Plugin of the process.
type Metrics struct {
	devices  *prometheus.GaugeVec     // resource, health
	allocs   *prometheus.CounterVec   // resource, code
	allocDur *prometheus.HistogramVec // resource
	updates  *prometheus.CounterVec   // resource
}

// Health label values of multinet_deviceplugin_devices, as the Device
// Plugin API names a device's health.
const (
	healthHealthy   = "Healthy"
	healthUnhealthy = "Unhealthy"
)

// NewMetrics returns the device plugin's metrics, registered with reg when
// reg is not nil:
//
//	multinet_deviceplugin_devices{resource, health}               gauge: devices advertised, by health (Healthy, Unhealthy)
//	multinet_deviceplugin_allocations_total{resource, code}       counter: Allocate calls, by gRPC status code (OK, InvalidArgument)
//	multinet_deviceplugin_allocate_duration_seconds{resource}     histogram: time of one Allocate call
//	multinet_deviceplugin_list_and_watch_updates_total{resource}  counter: device lists sent to the kubelet over ListAndWatch
//
// Errors: reg refused a collector (a name registered twice).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "multinet_deviceplugin_devices",
			Help: "Devices the device plugin advertises to the kubelet, by resourceName and health (Healthy, Unhealthy: the kubelet does not allocate them).",
		}, []string{"resource", "health"}),
		allocs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_deviceplugin_allocations_total",
			Help: "Allocate calls from the kubelet, by resourceName and gRPC status code (OK; InvalidArgument: a device not in the pool, repeated, or none).",
		}, []string{"resource", "code"}),
		allocDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "multinet_deviceplugin_allocate_duration_seconds",
			Help:    "Time the device plugin spent on one Allocate call, by resourceName.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"resource"}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "multinet_deviceplugin_list_and_watch_updates_total",
			Help: "Device lists sent to the kubelet over ListAndWatch streams (the first list of a stream and one after each change of health or membership), by resourceName.",
		}, []string{"resource"}),
	}
	if reg != nil {
		for _, c := range m.collectors() {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering device plugin metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.devices, m.allocs, m.allocDur, m.updates}
}

// MetricCollectors returns new, unregistered collectors of the
// multinet_deviceplugin_* metrics. They describe the metric names for
// tools that check dashboards and alert rules against them
// (deploy/observability).
func MetricCollectors() []prometheus.Collector {
	m, _ := NewMetrics(nil)
	return m.collectors()
}

// init creates resource's series at 0, so that they are exported before
// the first event.
func (m *Metrics) init(resource string) {
	m.devices.WithLabelValues(resource, healthHealthy)
	m.devices.WithLabelValues(resource, healthUnhealthy)
	m.allocs.WithLabelValues(resource, "OK")
	m.allocDur.WithLabelValues(resource)
	m.updates.WithLabelValues(resource)
}

// setDevices records resource's devices by health.
func (m *Metrics) setDevices(resource string, devs []pool.Device) {
	healthy := 0
	for _, d := range devs {
		if d.Healthy {
			healthy++
		}
	}
	m.devices.WithLabelValues(resource, healthHealthy).Set(float64(healthy))
	m.devices.WithLabelValues(resource, healthUnhealthy).Set(float64(len(devs) - healthy))
}

// allocated records an Allocate call that began at start.
func (m *Metrics) allocated(resource string, start time.Time, err error) {
	m.allocDur.WithLabelValues(resource).Observe(time.Since(start).Seconds())
	m.allocs.WithLabelValues(resource, status.Code(err).String()).Inc()
}
