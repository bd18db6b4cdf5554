package policysync

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// watch registers the handlers that queue the sandboxes a change affects:
//   - a policy's add, update or delete: the sandboxes of its namespace;
//   - a namespace's labels, a peer's labels, network-status or named ports,
//     a NAD's add or delete: the sandboxes of every namespace that has a
//     policy (a peer can be in any namespace);
//   - a local pod's labels: its own sandboxes too.
func (c *Controller) watch() error {
	if _, err := c.opts.Policies.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.policyChanged(obj, false) },
		UpdateFunc: func(_, obj any) { c.policyChanged(obj, false) },
		DeleteFunc: func(obj any) { c.policyChanged(obj, true) },
	}); err != nil {
		return fmt.Errorf("policysync: MultiNetworkPolicy handler: %w", err)
	}
	if _, err := c.opts.Namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueGoverned() },
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*corev1.Namespace)
			n, _ := obj.(*corev1.Namespace)
			if o == nil || n == nil || !maps.Equal(o.Labels, n.Labels) {
				c.enqueueGoverned()
			}
		},
		DeleteFunc: func(any) { c.enqueueGoverned() },
	}); err != nil {
		return fmt.Errorf("policysync: namespace handler: %w", err)
	}
	if _, err := c.opts.NADs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueGoverned() },
		DeleteFunc: func(any) { c.enqueueGoverned() },
	}); err != nil {
		return fmt.Errorf("policysync: NetworkAttachmentDefinition handler: %w", err)
	}
	if _, err := c.opts.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(obj, false) },
		UpdateFunc: func(_, obj any) { c.podChanged(obj, false) },
		DeleteFunc: func(obj any) { c.podChanged(obj, true) },
	}); err != nil {
		return fmt.Errorf("policysync: pod handler: %w", err)
	}
	return nil
}

// policyChanged queues the sandboxes of the policy's namespace.
func (c *Controller) policyChanged(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*v1beta2.MultiNetworkPolicy)
	if !ok {
		return
	}
	ids := c.local.where(func(ns string) bool { return ns == p.Namespace })
	if deleted {
		c.report.forgetPolicy(p.Namespace + "/" + p.Name)
	} else if len(ids) > 0 && c.synced() {
		// Bad input is said even when the policy selects no pod here.
		c.report.problems("", nil, c.policyObject, policy.Check(c.cluster(""), p))
	}
	c.enqueue(ids)
}

// podChanged keeps a peer's change and queues what it affects.
func (c *Controller) podChanged(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	changed := true
	if deleted {
		c.peers.remove(pod.Namespace, pod.Name)
	} else {
		changed = c.peers.set(pod)
	}
	if !changed {
		return
	}
	if pod.Spec.NodeName == c.opts.NodeName && !deleted {
		c.enqueue(c.local.ofPod(pod.Namespace, pod.Name))
	}
	c.enqueueGoverned()
}

// enqueueGoverned queues the sandboxes of every namespace that has a
// policy.
func (c *Controller) enqueueGoverned() {
	idx := c.opts.Policies.GetIndexer()
	c.enqueue(c.local.where(func(ns string) bool {
		objs, err := idx.ByIndex(cache.NamespaceIndex, ns)
		return err == nil && len(objs) > 0
	}))
}
