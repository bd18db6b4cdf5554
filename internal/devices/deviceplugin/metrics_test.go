package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// The device plugin's metrics follow what the kubelet sees over the real
// gRPC socket: devices by health, Allocate calls by status code with their
// latency, and every ListAndWatch list sent.
func TestMetricsFollowTheKubeletsView(t *testing.T) {
	dpDir := t.TempDir()
	k := startKubelet(t, dpDir)
	p, hostDir := vhostPool(t, 2)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(p, Options{DevicePluginsDir: dpDir, DevInfo: devinfo.Store{Root: t.TempDir()}, RPCTimeout: 5 * time.Second, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	k.next(t)
	c := dialPlugin(t, pl.SocketPath())
	const rn = "example.com/vhost"
	gauge := func(health string) float64 { return value(t, m.devices.WithLabelValues(rn, health)) }
	updates := func() float64 { return value(t, m.updates.WithLabelValues(rn)) }

	recv := listAndWatch(t, c)
	recv()
	if gauge(healthHealthy) != 2 || gauge(healthUnhealthy) != 0 || updates() != 1 {
		t.Errorf("after the first list: healthy %v unhealthy %v updates %v, want 2 0 1", gauge(healthHealthy), gauge(healthUnhealthy), updates())
	}
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"slot1"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"slot9"}}}}); err == nil {
		t.Fatal("Allocate of an unknown device succeeded")
	}
	if ok, bad := value(t, m.allocs.WithLabelValues(rn, "OK")), value(t, m.allocs.WithLabelValues(rn, "InvalidArgument")); ok != 1 || bad != 1 {
		t.Errorf("allocations OK %v InvalidArgument %v, want 1 1", ok, bad)
	}
	var h dto.Metric
	if err := m.allocDur.WithLabelValues(rn).(prometheus.Histogram).Write(&h); err != nil || h.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("allocate durations observed = %d (%v), want 2", h.GetHistogram().GetSampleCount(), err)
	}
	if err := os.Remove(filepath.Join(hostDir, "slot0")); err != nil {
		t.Fatal(err)
	}
	recv()
	if gauge(healthHealthy) != 1 || gauge(healthUnhealthy) != 1 || updates() != 2 {
		t.Errorf("after slot0 went: healthy %v unhealthy %v updates %v, want 1 1 2", gauge(healthHealthy), gauge(healthUnhealthy), updates())
	}
	names, err := reg.Gather()
	if err != nil || len(names) != 4 {
		t.Errorf("registry has %d families (%v), want the 4 multinet_deviceplugin_* ones", len(names), err)
	}
}

// value is a counter's or gauge's value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
