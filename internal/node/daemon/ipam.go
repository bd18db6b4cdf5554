package daemon

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/ipam/ipamd"
	"github.com/multinet/multinet/internal/node/cniserver"
	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// startIPAM serves multinet-ipam (internal/ipam/ipamd) on cfg.IPAMSocketPath, with
// its own API client (rate limiter) of restConfig, the daemon's pod cache
// (a node allocates for its own pods) and the daemon's metrics registry;
// nil when ipamSocketPath is "none". Shut it down with Shutdown.
func startIPAM(ctx context.Context, cfg Config, restConfig *rest.Config, pods ipamd.Pods, m *metrics) (*ipamd.Service, error) {
	if cfg.IPAMSocketPath == IPAMOff {
		klog.InfoS("multinet-ipam is off (ipamSocketPath: none)")
		return nil, nil
	}
	every := cfg.IPAMReconcileInterval.Duration
	if every == 0 {
		every = -1 // off
	}
	svc, err := ipamd.Start(ctx, ipamd.Options{
		Config:            rest.CopyConfig(restConfig),
		Node:              cfg.NodeName,
		SocketPath:        cfg.IPAMSocketPath,
		Pods:              pods,
		ReconcileInterval: every,
		Tenancy:           cfg.IPAMTenancy(),
		Registerer:        m.registry,
		Server:            cniserver.Options{Observer: ipamPeers{m}},
	})
	if err != nil {
		return nil, fmt.Errorf("ipamSocketPath: %w", err)
	}
	return svc, nil
}

// exportIPAMSocket puts cfg.IPAMSocketPath in multinetd's environment as
// api.IPAMSocketEnv, before any delegate runs: every delegate multinetd
// runs, and so the multinet-ipam it runs, inherits it (libcni starts
// plugins with the caller's environment). The socket is node
// configuration: a NAD's ipam.socketPath is refused
// (docs/decisions/sockets.md). Nothing is set when multinet-ipam is off.
func exportIPAMSocket(cfg Config) error {
	if cfg.IPAMSocketPath == IPAMOff {
		return nil
	}
	if err := os.Setenv(api.IPAMSocketEnv, cfg.IPAMSocketPath); err != nil {
		return fmt.Errorf("ipamSocketPath: setting %s: %w", api.IPAMSocketEnv, err)
	}
	return nil
}
