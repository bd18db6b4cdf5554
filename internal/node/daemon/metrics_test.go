package daemon

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	dto "github.com/prometheus/client_model/go"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// metricValue returns the value of the counter or gauge name with labels
// (a histogram's sample count), and whether it exists.
func metricValue(t *testing.T, m *metrics, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range mt.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return mt.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return mt.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(mt.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// The observer counts operations by command and CNI error code, their
// durations, the operations in flight, and delegate invocations and errors
// by plugin and code (999 for an error that is not a CNI error).
func TestMetricsObserver(t *testing.T) {
	m := newMetrics()
	m.OnStart("ADD")
	m.OnStart("DEL")
	m.OnStart("ADD")
	if v, _ := metricValue(t, m, "multinet_cni_operations_in_flight", nil); v != 3 {
		t.Errorf("in flight = %v, want 3", v)
	}
	m.OnDone("ADD", 100*time.Microsecond, time.Millisecond, 20*time.Millisecond, nil)
	m.OnDone("ADD", 0, 0, time.Second, &types.Error{Code: types.ErrTryAgainLater})
	m.OnDone("DEL", 0, 0, time.Millisecond, nil)
	m.DelegateDone("ADD", "bridge", 5*time.Millisecond, nil)
	m.DelegateDone("DEL", "bridge", time.Millisecond, types.NewError(types.ErrInvalidNetworkConfig, "bad", ""))
	m.DelegateDone("DEL", "bridge", time.Millisecond, fmt.Errorf("wrapped: %w", types.NewError(types.ErrIOFailure, "io", "")))
	m.DelegateDone("CHECK", "macvlan", time.Millisecond, errors.New("exec: not found"))
	m.CorruptRecord("DEL", "incomplete")
	m.CorruptRecord("GC", "recovered")
	m.OnPeerRefused(65534)
	ipamPeers{m}.OnPeerRefused(1000)
	ipamPeers{m}.OnPeerRefused(1000)

	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"multinet_cni_operations_in_flight", nil, 0},
		{"multinet_cni_operations_total", map[string]string{"command": "ADD", "code": "0"}, 1},
		{"multinet_cni_operations_total", map[string]string{"command": "ADD", "code": "11"}, 1},
		{"multinet_cni_operations_total", map[string]string{"command": "DEL", "code": "0"}, 1},
		{"multinet_cni_operation_duration_seconds", map[string]string{"command": "ADD"}, 2},
		{"multinet_cni_operation_queued_seconds", map[string]string{"command": "DEL"}, 1},
		{"multinet_cni_request_read_seconds", map[string]string{"command": "ADD"}, 2},
		{"multinet_delegate_duration_seconds", map[string]string{"command": "DEL", "plugin": "bridge"}, 2},
		{"multinet_delegate_duration_seconds", map[string]string{"command": "ADD", "plugin": "bridge"}, 1},
		{"multinet_delegate_errors_total", map[string]string{"command": "DEL", "plugin": "bridge", "code": "7"}, 1},
		{"multinet_delegate_errors_total", map[string]string{"command": "DEL", "plugin": "bridge", "code": "5"}, 1},
		{"multinet_delegate_errors_total", map[string]string{"command": "CHECK", "plugin": "macvlan", "code": "999"}, 1},
		{"multinet_corrupt_records_total", map[string]string{"operation": "DEL", "outcome": "incomplete"}, 1},
		{"multinet_corrupt_records_total", map[string]string{"operation": "GC", "outcome": "recovered"}, 1},
		{"multinet_socket_peer_refused_total", map[string]string{"socket": "cni"}, 1},
		{"multinet_socket_peer_refused_total", map[string]string{"socket": "ipam"}, 2},
	}
	for _, tt := range tests {
		v, ok := metricValue(t, m, tt.name, tt.labels)
		if !ok || v != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, v, ok, tt.want)
		}
	}
	if _, ok := metricValue(t, m, "multinet_delegate_errors_total", map[string]string{"command": "ADD"}); ok {
		t.Error("a successful delegate was counted as an error")
	}
}

// multinetd hands its ipamSocketPath to the delegates it runs (and so to
// multinet-ipam) in its environment; with multinet-ipam off nothing is set.
func TestExportIPAMSocket(t *testing.T) {
	t.Setenv(api.IPAMSocketEnv, "")
	if err := exportIPAMSocket(Config{IPAMSocketPath: IPAMOff}); err != nil || os.Getenv(api.IPAMSocketEnv) != "" {
		t.Errorf("off: %v, %s=%q", err, api.IPAMSocketEnv, os.Getenv(api.IPAMSocketEnv))
	}
	if err := exportIPAMSocket(Config{IPAMSocketPath: "/run/x/ipam.sock"}); err != nil || os.Getenv(api.IPAMSocketEnv) != "/run/x/ipam.sock" {
		t.Errorf("set: %v, %s=%q", err, api.IPAMSocketEnv, os.Getenv(api.IPAMSocketEnv))
	}
}
