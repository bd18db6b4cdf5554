// Command multinet-ipam-cleanup releases the multinet-ipam IPAllocations
// of every node whose holder is gone: the pods of a dead node, pods deleted
// without a CNI DEL, deleted IPAMClaims (internal/ipam/ipamd RunCleanup). Each node's
// multinetd releases only its own node's allocations (the node-scoped
// authority policies, docs/security.md); this is the one component allowed
// to cross nodes, with a ServiceAccount of its own
// (deploy/base/ipam-cleanup.yaml). It ships in the webhook image.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/ipam/ipamd"
	"github.com/multinet/multinet/internal/process/metricsserver"
	"github.com/multinet/multinet/internal/process/version"
)

// DefaultMetricsAddress is where /metrics is served unless
// --metrics-address says otherwise: loopback, so that the binary run
// anywhere exposes nothing; the shipped Deployment (pod network) sets
// :9393, its container port "metrics", which its PodMonitor scrapes.
const DefaultMetricsAddress = "127.0.0.1:9393"

func main() {
	var o ipamd.CleanupOptions
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file; empty: in-cluster config")
	metricsAddr := flag.String("metrics-address", DefaultMetricsAddress, "address of /metrics, /healthz, /readyz (plain HTTP; empty: off)")
	flag.DurationVar(&o.Interval, "interval", ipamd.DefaultReconcileInterval, "mean time between passes over every IPAllocation (±50%)")
	flag.DurationVar(&o.MinAge, "min-age", ipamd.DefaultReconcileMinAge, "allocations younger than this are left alone (an ADD in flight)")
	klog.InitFlags(nil)
	version.ParseFlags("multinet-ipam-cleanup", "releases multinet-ipam allocations whose pod or IPAMClaim is gone, on every node (docs/multinet-ipam.md).")

	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.ErrorS(err, "loading kubeconfig", "path", *kubeconfig)
		os.Exit(2)
	}
	rc.UserAgent = "multinet-ipam-cleanup/" + version.Version
	o.Config = rc
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(klog.NewContext(ctx, klog.Background()), o, *metricsAddr); err != nil {
		klog.ErrorS(err, "multinet-ipam-cleanup failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// run serves /metrics on metricsAddr (multinet_ipam_reconcile_*,
// multinet_ipam_released_total) and releases until ctx ends.
func run(ctx context.Context, o ipamd.CleanupOptions, metricsAddr string) error {
	reg, err := metricsserver.NewRegistry()
	if err != nil {
		return err
	}
	o.Registerer = reg
	stopMetrics, err := metricsserver.Run(ctx, metricsAddr, reg, nil)
	if err != nil {
		return err
	}
	defer stopMetrics()
	return ipamd.RunCleanup(ctx, o)
}
