package dra

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/multinet/multinet/internal/testing/apiservertest"
)

// value is a counter's or gauge's value, or a histogram's sample count.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return m.Gauge.GetValue()
}

// The driver's metrics follow its work against a real API server: the
// publication of the node's ResourceSlices with its devices by health,
// prepares and unprepares by result with their calls' latency, and the
// claims prepared.
func TestMetricsCountPublishesAndClaims(t *testing.T) {
	r := startDriver(t, apiservertest.Name(t, "dra-node-m"))
	r.waitSlice(t, "the slice", func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) == 2 })
	m := r.m
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return value(t, m.publishes.WithLabelValues("ok")) >= 1, nil
	})
	if err != nil {
		t.Fatalf("no publication counted: %v", err)
	}
	if h, u := value(t, m.devices.WithLabelValues("example.com/vhost", "Healthy")), value(t, m.devices.WithLabelValues("example.com/vhost", "Unhealthy")); h != 2 || u != 0 {
		t.Errorf("devices Healthy %v Unhealthy %v, want 2 0", h, u)
	}
	c1 := apiClaim(t, r, "m1", "slot1")
	if _, err := r.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c1, claim(r, "u9", "slot9")}); err != nil {
		t.Fatal(err)
	}
	ok, failed := value(t, m.claims.WithLabelValues(opPrepare, "ok")), value(t, m.claims.WithLabelValues(opPrepare, "error"))
	if ok != 1 || failed != 1 || value(t, m.prepared) != 1 || value(t, m.duration.WithLabelValues(opPrepare).(prometheus.Metric)) != 1 {
		t.Errorf("after a prepare: ok %v error %v prepared %v calls %v, want 1 1 1 1", ok, failed, value(t, m.prepared),
			value(t, m.duration.WithLabelValues(opPrepare).(prometheus.Metric)))
	}
	if _, err := r.d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: c1.UID}}); err != nil {
		t.Fatal(err)
	}
	if ok, n := value(t, m.claims.WithLabelValues(opUnprepare, "ok")), value(t, m.prepared); ok != 1 || n != 0 {
		t.Errorf("after an unprepare: ok %v prepared %v, want 1 0", ok, n)
	}
}
