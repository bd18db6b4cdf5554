package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/hotplug"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// Hot-plug (docs/hotplug.md): multinetd's pod informer (its node's pods)
// hands every pod whose networks annotation, phase or network-status
// changed, and every pod
// of its first list (so that a restarted multinetd converges what changed
// while it was down or what it left half-done), to a rate-limited workqueue
// keyed by pod. A worker reads the pod's current version from the cache,
// so that an annotation that changed several times is converged to its
// last value once, and calls hotplug.HotPlugger.HotPlug for a Running pod.

// Defaults of the hot-plug loop.
const (
	hotPlugWorkers = 2
	// hotPlugBaseDelay and hotPlugMaxDelay bound the per-pod backoff of
	// hot-plugs to retry (a delegate failed, the sandbox was busy).
	hotPlugBaseDelay = 500 * time.Millisecond
	hotPlugMaxDelay  = 5 * time.Minute
	// hotPlugTimeout bounds one hot-plug (each delegate has its own
	// delegateTimeout within it).
	hotPlugTimeout = 5 * time.Minute
)

// hotPlugEngine is what the loop needs of hotplug.HotPlugger.
type hotPlugEngine interface {
	HotPlug(ctx context.Context, pod *corev1.Pod) (*hotplug.Result, error)
}

// podSource gives a pod's current version (kube.PodCache).
type podSource interface {
	Cached(namespace, name string) (*corev1.Pod, bool)
}

// hotPlugger is the hot-plug loop.
type hotPlugger struct {
	pods   podSource
	engine hotPlugEngine
	queue  workqueue.TypedRateLimitingInterface[string]
}

func newHotPlugger(pods podSource, engine hotPlugEngine) *hotPlugger {
	return &hotPlugger{
		pods:   pods,
		engine: engine,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](hotPlugBaseDelay, hotPlugMaxDelay),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "multinet-hotplug"}),
	}
}

// podEvents is where the hot-plug loop registers its handler (kube.PodCache).
type podEvents interface {
	OnChange(func(old, pod *corev1.Pod)) error
}

// startHotPlug returns the hot-plug loop with its handler registered on
// pods, or nil when cfg.DisableHotPlug turns hot-plug off (nothing is
// registered: annotation changes are not watched).
func startHotPlug(cfg Config, pods interface {
	podSource
	podEvents
}, engine hotPlugEngine) (*hotPlugger, error) {
	if cfg.DisableHotPlug {
		return nil, nil
	}
	h := newHotPlugger(pods, engine)
	if err := pods.OnChange(h.changed); err != nil {
		return nil, fmt.Errorf("hot-plug: watch the node's pods: %w", err)
	}
	return h, nil
}

// changed is the pod informer's handler (old is nil for an added pod): it
// enqueues the pod when hot-plug may have something to do: its networks
// annotation, its phase or its network-status changed. It never blocks.
func (h *hotPlugger) changed(old, pod *corev1.Pod) {
	if pod.Spec.HostNetwork {
		return
	}
	// The network-status PATCH of an ADD marks the moment its record is
	// complete: an annotation changed while the ADD ran (a sandbox
	// re-created under a Running pod) is converged then.
	if old != nil && old.Status.Phase == pod.Status.Phase && sameNetworks(old, pod) &&
		old.Annotations[status.Annotation] == pod.Annotations[status.Annotation] {
		return // labels, conditions, container states, …
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err == nil {
		h.queue.Add(key)
	}
}

// sameNetworks reports whether a and b have the same networks annotation
// (both absent counts as the same).
func sameNetworks(a, b *corev1.Pod) bool {
	va, oka := a.Annotations[selection.NetworksAnnotation]
	vb, okb := b.Annotations[selection.NetworksAnnotation]
	return oka == okb && va == vb
}

// run processes the queue with workers until ctx ends, starting once
// synced reports true (the pod cache has its first list).
func (h *hotPlugger) run(ctx context.Context, workers int, synced cache.InformerSynced) {
	defer h.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for h.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	h.queue.ShutDown()
	wg.Wait()
}

// processNext hot-plugs the next pod of the queue; false once the queue is
// shut down.
func (h *hotPlugger) processNext(ctx context.Context) bool {
	key, shutdown := h.queue.Get()
	if shutdown {
		return false
	}
	defer h.queue.Done(key)
	if h.hotPlug(ctx, key) && ctx.Err() == nil {
		h.queue.AddRateLimited(key)
	} else {
		h.queue.Forget(key)
	}
	return true
}

// hotPlug converges pod key (namespace/name) as it is in the cache now and
// reports whether to retry it later.
func (h *hotPlugger) hotPlug(ctx context.Context, key string) (retry bool) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return false
	}
	pod, ok := h.pods.Cached(ns, name)
	if !ok || pod.DeletionTimestamp != nil || pod.Spec.HostNetwork || pod.Status.Phase != corev1.PodRunning {
		return false // gone, going (the runtime's DEL tears it down), or not started
	}
	ctx, cancel := context.WithTimeout(ctx, hotPlugTimeout)
	defer cancel()
	log := klog.FromContext(ctx).WithValues("pod", key)
	_, err = h.engine.HotPlug(ctx, pod)
	var he *hotplug.Error
	switch {
	case err == nil, errors.Is(err, hotplug.ErrNoSandbox):
		return false
	case errors.Is(err, hotplug.ErrBusy):
		log.V(2).Info("hot-plug: sandbox busy; later", "reason", err)
		return true
	case errors.As(err, &he) && !he.Retry:
		log.V(1).Info("hot-plug refused", "reason", err)
		return false
	}
	log.Error(err, "hot-plug failed; retrying")
	return true
}
