package ipamd

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/multinet/multinet/internal/testing/apiservertest"
)

// A burst of ADDs on one node is not held back by the client-side rate
// limit of the configuration multinetd gives the service (its QPS and
// Burst; here one request per 1000 s): 20 ADDs at once all get their
// address, each with exactly one request on ipallocations (the create:
// the synced cache shows the attachments holding nothing), and
// multinet_ipam_operation_duration_seconds counts them.
func TestServiceBurstUnthrottled(t *testing.T) {
	srv := apiservertest.Shared(t)
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = 0.001, 1
	var allocRequests atomic.Int64
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/ipallocations") && r.URL.Query().Get("watch") != "true" {
				allocRequests.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	socket := filepath.Join(t.TempDir(), "ipam.sock")
	svc, err := Start(ctx, Options{Config: cfg, Node: "node-burst", SocketPath: socket, ReconcileInterval: -1, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	if !svc.allocator.Cache.WaitForSync(ctx, 30*time.Second) {
		t.Fatal("IPAllocation cache did not sync")
	}
	n := &node{name: "node-burst", socket: socket, svc: svc}
	list := n.network(t, "1.1.0", "burst-net", `"ranges":[[{"subnet":"10.61.0.0/24"}]]`)
	dir, cacheDir := pluginDir(t), t.TempDir()
	const adds = 20
	before := allocRequests.Load()
	var wg sync.WaitGroup
	errs := make(chan error, adds)
	got := make(chan types.Result, adds)
	for i := range adds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cni := n.cni(dir, cacheDir) // one each: libcni's is not safe for concurrent use
			res, err := cni.AddNetworkList(ctx, list, rt(fmt.Sprintf("burst-%d", i), "net1", nil, nil))
			if err != nil {
				errs <- fmt.Errorf("ADD %d: %w", i, err)
				return
			}
			got <- res
		}()
	}
	wg.Wait()
	close(errs)
	close(got)
	for err := range errs {
		t.Error(err)
	}
	distinct := map[string]bool{}
	for res := range got {
		distinct[ips(t, res)[0]] = true
	}
	if len(distinct) != adds {
		t.Errorf("%d distinct addresses of %d ADDs", len(distinct), adds)
	}
	if n := allocRequests.Load() - before; n != adds {
		t.Errorf("%d requests on ipallocations for %d ADDs, want one each", n, adds)
	}
	if c := histogramCount(t, reg, "multinet_ipam_operation_duration_seconds", "ADD"); c != adds {
		t.Errorf("multinet_ipam_operation_duration_seconds{command=\"ADD\"} counts %d, want %d", c, adds)
	}
}

// histogramCount is the sample count of the histogram name with label
// command=cmd in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name, cmd string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "command" && l.GetValue() == cmd {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
