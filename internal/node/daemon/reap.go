package daemon

import (
	"context"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/attach"
	"github.com/multinet/multinet/internal/node/sandboxes"
)

// Results of the multinet_stale_sandboxes_total metric.
const (
	reapedOK   = "reaped"
	reapFailed = "failed"
)

// reapTimeout bounds one reap: the CRI list and every teardown.
const reapTimeout = 5 * time.Minute

// runReaper reaps, every cfg.ReapInterval until ctx ends, the attachment
// records of pod sandboxes the runtime at cfg.RuntimeEndpoint no longer
// lists (attach.Engine.Reap): the second line of defence behind the
// runtime's DEL, for the runtime (containerd 2.4) never calls CNI GC. When
// POD_NAMESPACE and POD_NAME are set (the DaemonSet's downward API), the
// runtime must list multinetd's own pod, else nothing is reaped. A runtime
// that cannot be listed is logged and tried again next time: without a
// definitive list nothing is reaped.
func runReaper(ctx context.Context, cfg Config, engine *attach.Engine, m *metrics) {
	if cfg.RuntimeEndpoint == "" || cfg.ReapInterval.Duration <= 0 {
		klog.InfoS("not reaping the records of removed sandboxes (runtimeEndpoint or reapInterval unset)")
		return
	}
	var self *sandboxes.Pod
	if ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"); ns != "" && name != "" {
		self = &sandboxes.Pod{Namespace: ns, Name: name}
	}
	lister, err := sandboxes.New(cfg.RuntimeEndpoint, self)
	if err != nil {
		klog.ErrorS(err, "not reaping the records of removed sandboxes")
		return
	}
	defer lister.Close()
	log := klog.FromContext(ctx).WithName("reaper")
	t := time.NewTicker(cfg.ReapInterval.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reapOnce(klog.NewContext(ctx, log), lister, engine, cfg.ReapMinAge.Duration, m)
	}
}

// reapOnce lists the runtime's sandboxes and reaps the records of the rest.
func reapOnce(ctx context.Context, lister *sandboxes.Lister, engine *attach.Engine, minAge time.Duration, m *metrics) {
	log := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	live, err := lister.IDs(lctx)
	lcancel()
	if err != nil {
		log.Error(err, "listing the runtime's pod sandboxes; nothing reaped")
		return
	}
	res, err := engine.Reap(ctx, func(id string) bool { return live[id] }, minAge)
	m.reaped.WithLabelValues(reapedOK).Add(float64(len(res.Reaped)))
	if err != nil {
		m.reaped.WithLabelValues(reapFailed).Add(float64(res.Failed))
		log.Error(err, "reaping the records of removed sandboxes (retried next time)")
	}
	if len(res.Reaped) > 0 || res.Young > 0 || res.Busy > 0 {
		log.V(2).Info("reaped", "reaped", len(res.Reaped), "young", res.Young, "busy", res.Busy)
	}
}
