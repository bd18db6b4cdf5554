package policysync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/nftpolicy"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// lockWait bounds how long a queued sync waits for the container's lock
// (an ADD, DEL or hot-plug holds it); then it is retried later.
const lockWait = 2 * time.Second

// processNext syncs the next sandbox of the queue; false once the queue
// is shut down.
func (c *Controller) processNext(ctx context.Context) bool {
	id, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(id)
	if err := c.syncQueued(ctx, id); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "network policy sync failed; retrying", "containerID", id)
		c.queue.AddRateLimited(id)
		return true
	}
	c.queue.Forget(id)
	return true
}

// syncQueued syncs container id holding its lock.
func (c *Controller) syncQueued(ctx context.Context, id string) error {
	lctx, cancel := context.WithTimeout(ctx, lockWait)
	unlock, err := c.opts.Locks.Lock(lctx, id)
	cancel()
	if err != nil {
		return fmt.Errorf("container %s busy: %w", id, err)
	}
	defer unlock()
	return c.syncLocked(ctx, id, c.takePending(id), nil)
}

// syncLocked computes and writes the rules of container id (its lock
// held); changed is when the change that caused it was seen (zero: none);
// pod is the sandbox's pod when the caller has read it (ADD, hot-plug),
// nil to look it up.
func (c *Controller) syncLocked(ctx context.Context, id string, changed time.Time, pod *corev1.Pod) error {
	sb, ok := c.local.get(id)
	if !ok {
		return nil // DEL or GC forgot it
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	result, err := c.apply(ctx, id, sb, pod)
	if err != nil {
		c.observe(ResultFailed, 0)
		if !changed.IsZero() {
			c.addPending(id, changed) // the retry still measures from the change
		}
		return err
	}
	var latency time.Duration
	if !changed.IsZero() {
		latency = time.Since(changed)
	}
	c.observe(result, latency)
	return nil
}

// apply computes sb's rules and writes them, or removes its table when no
// policy selects it; it returns the Result constant. pod is the sandbox's
// pod when the caller has it (nil: looked up). A sandbox without a table in
// a namespace without a policy has nothing to do: the pod is not read.
func (c *Controller) apply(ctx context.Context, id string, sb sandbox, pod *corev1.Pod) (string, error) {
	rec := sb.rec
	if !exists(rec.Netns) {
		return ResultNone, nil // the sandbox is gone; DEL follows
	}
	if !sb.table && !c.hasPolicies(rec.PodNamespace) {
		return ResultNone, nil
	}
	if pod == nil {
		var err error
		if pod, err = c.pod(ctx, rec.PodNamespace, rec.PodName, rec.PodUID); err != nil {
			return "", err
		}
	}
	if pod == nil {
		return ResultNone, nil // deleted: DEL follows
	}
	res, err := c.compute(pod, rec)
	if err != nil {
		return "", err
	}
	c.report.problems(id, pod, c.policyObject, res.Problems)
	ifaces := enforceable(res.Interfaces)
	if len(ifaces) == 0 {
		if !sb.table {
			return ResultNone, nil
		}
		if err := c.opts.Writer.Remove(ctx, rec.Netns); err != nil {
			return "", fmt.Errorf("pod %s/%s: remove the policy table from %s: %w", rec.PodNamespace, rec.PodName, rec.Netns, err)
		}
		c.local.update(id, false, 0, "")
		return ResultRemoved, nil
	}
	if sb.table && sb.digest != "" {
		if d, err := nftpolicy.Digest(ifaces); err == nil && d == sb.digest {
			return ResultUnchanged, nil // written by this multinetd: no netlink read
		}
	}
	st, err := c.opts.Writer.Apply(ctx, rec.Netns, ifaces)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: write the policy rules into %s: %w", rec.PodNamespace, rec.PodName, rec.Netns, err)
	}
	c.local.update(id, true, st.Rules, st.Digest)
	if !st.Changed {
		return ResultUnchanged, nil
	}
	return ResultApplied, nil
}

// enforceable are the interfaces of ifaces that have a kernel interface
// and are isolated in some direction.
func enforceable(ifaces []policy.Interface) []policy.Interface {
	var out []policy.Interface
	for _, i := range ifaces {
		if i.Name != "" && (i.Ingress.Isolated || i.Egress.Isolated) {
			out = append(out, i)
		}
	}
	return out
}

// pod returns pod namespace/name with runtime UID uid from the
// cluster-wide informer, else from one GET; nil when it does not exist
// (or is another pod of that name).
func (c *Controller) pod(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error) {
	obj, ok, err := c.opts.Pods.GetStore().GetByKey(podKey(namespace, name))
	if err == nil && ok {
		if p, _ := obj.(*corev1.Pod); p != nil && kube.IsRuntimePod(p, uid) {
			return p, nil
		}
	}
	if c.opts.Live == nil {
		return nil, nil
	}
	p, err := c.opts.Live.Get(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	t, _ := TrimPeer(p)
	if p = t.(*corev1.Pod); !kube.IsRuntimePod(p, uid) {
		return nil, nil
	}
	return p, nil
}

// policyObject is the policy namespace/name as the informer has it, nil
// when gone.
func (c *Controller) policyObject(key types.NamespacedName) *v1beta2.MultiNetworkPolicy {
	obj, ok, err := c.opts.Policies.GetStore().GetByKey(key.String())
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*v1beta2.MultiNetworkPolicy)
	return p
}

// exists reports whether the network namespace path exists.
func exists(netns string) bool {
	if netns == "" {
		return false
	}
	_, err := os.Stat(netns)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// addPending notes that id must be synced because of a change seen at t
// (the first unsynced one counts).
func (c *Controller) addPending(id string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		c.pending[id] = t
	}
}

// takePending returns and clears when id's first unsynced change was seen.
func (c *Controller) takePending(id string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.pending[id]
	delete(c.pending, id)
	return t
}

// enqueue queues the sync of container ids because of a change seen now
// (none before the informers have listed).
func (c *Controller) enqueue(ids []string) {
	if !c.synced() {
		return // Run queues every sandbox once the informers have listed
	}
	now := time.Now()
	for _, id := range ids {
		c.addPending(id, now)
		c.queue.Add(id)
	}
}

// observe tells the Observer about a sync.
func (c *Controller) observe(result string, latency time.Duration) {
	if c.opts.Observer == nil {
		return
	}
	tables, rules := c.local.totals()
	c.opts.Observer.PolicySynced(result, latency, tables, rules)
}
