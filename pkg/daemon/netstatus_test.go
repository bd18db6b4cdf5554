package daemon

import (
	"testing"

	"github.com/multinet/multinet/pkg/attach"
)

// The engine's network-status retries are exported as
// multinet_network_status_pending and multinet_network_status_retries_total
// (every result present from the start, at 0).
func TestMetricsNetworkStatus(t *testing.T) {
	m := newMetrics()
	for _, r := range []string{attach.RetryLanded, attach.RetryFailed, attach.RetryWithdrawn} {
		if v, ok := metricValue(t, m, "multinet_network_status_retries_total", map[string]string{"result": r}); !ok || v != 0 {
			t.Errorf("retries{result=%s} = %v (present %v), want 0 before any retry", r, v, ok)
		}
	}
	var o attach.Observer = m
	so, ok := o.(attach.StatusObserver)
	if !ok {
		t.Fatal("metrics do not implement attach.StatusObserver: the engine would report no network-status retries")
	}
	so.StatusPending(3)
	so.StatusRetried(attach.RetryFailed)
	so.StatusRetried(attach.RetryFailed)
	so.StatusRetried(attach.RetryLanded)
	so.StatusPending(2)
	if v, _ := metricValue(t, m, "multinet_network_status_pending", nil); v != 2 {
		t.Errorf("pending = %v, want 2", v)
	}
	for r, want := range map[string]float64{attach.RetryFailed: 2, attach.RetryLanded: 1, attach.RetryWithdrawn: 0} {
		if v, _ := metricValue(t, m, "multinet_network_status_retries_total", map[string]string{"result": r}); v != want {
			t.Errorf("retries{result=%s} = %v, want %v", r, v, want)
		}
	}
}
