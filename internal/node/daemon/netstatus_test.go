package daemon

import (
	"testing"

	"github.com/multinet/multinet/internal/node/attach"
	"github.com/multinet/multinet/internal/node/netstatus"
)

// The engine's network-status retries are exported as
// multinet_network_status_pending and multinet_network_status_retries_total
// (every result present from the start, at 0).
func TestMetricsNetworkStatus(t *testing.T) {
	m := newMetrics()
	for _, r := range []string{netstatus.RetryLanded, netstatus.RetryFailed, netstatus.RetryWithdrawn} {
		if v, ok := metricValue(t, m, "multinet_network_status_retries_total", map[string]string{"result": r}); !ok || v != 0 {
			t.Errorf("retries{result=%s} = %v (present %v), want 0 before any retry", r, v, ok)
		}
	}
	var o attach.Observer = m
	so, ok := o.(netstatus.Observer)
	if !ok {
		t.Fatal("metrics do not implement netstatus.Observer: the engine would report no network-status retries")
	}
	so.StatusPending(3)
	so.StatusRetried(netstatus.RetryFailed)
	so.StatusRetried(netstatus.RetryFailed)
	so.StatusRetried(netstatus.RetryLanded)
	so.StatusPending(2)
	if v, _ := metricValue(t, m, "multinet_network_status_pending", nil); v != 2 {
		t.Errorf("pending = %v, want 2", v)
	}
	for r, want := range map[string]float64{netstatus.RetryFailed: 2, netstatus.RetryLanded: 1, netstatus.RetryWithdrawn: 0} {
		if v, _ := metricValue(t, m, "multinet_network_status_retries_total", map[string]string{"result": r}); v != want {
			t.Errorf("retries{result=%s} = %v, want %v", r, v, want)
		}
	}
}
