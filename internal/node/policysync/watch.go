package policysync

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// watch registers the handlers that queue the sandboxes a change affects:
//   - a policy's add, update or delete: the sandboxes its old or new
//     version selects;
//   - a pod's creation, deletion or change of what policy reads (labels,
//     network-status, named ports): the sandboxes selected by a policy
//     whose rules read the pod as a peer, in its old or new version
//     (policy.ReadsPeer), and, for a pod of this node, its own sandboxes;
//   - a namespace's labels, a NAD's add or delete: the sandboxes of every
//     namespace that has a policy.
func (c *Controller) watch() error {
	if _, err := c.opts.Policies.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.policyChanged(nil, obj, false) },
		UpdateFunc: func(old, obj any) { c.policyChanged(old, obj, false) },
		DeleteFunc: func(obj any) { c.policyChanged(nil, obj, true) },
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

// policyChanged queues the sandboxes that the policy's old or new version
// selects.
func (c *Controller) policyChanged(old, obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*v1beta2.MultiNetworkPolicy)
	if !ok {
		return
	}
	versions := []*v1beta2.MultiNetworkPolicy{p}
	if o, ok := old.(*v1beta2.MultiNetworkPolicy); ok {
		versions = append(versions, o)
	}
	if deleted {
		c.report.forgetPolicy(p.Namespace + "/" + p.Name)
	} else if c.synced() && len(c.local.where(func(ns, _ string) bool { return ns == p.Namespace })) > 0 {
		// Bad input is said even when the policy selects no pod here.
		c.report.problems("", nil, c.policyObject, policy.Check(c.cluster(""), p))
	}
	c.enqueue(c.selectedBy(versions))
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
	var versions []policy.Pod
	if deleted {
		old, had := c.peers.remove(pod.Namespace, pod.Name)
		if !had {
			return
		}
		versions = append(versions, old)
	} else {
		old, now, had, changed := c.peers.set(pod)
		if !changed {
			return
		}
		if versions = append(versions, now); had {
			versions = append(versions, old)
		}
		if pod.Spec.NodeName == c.opts.NodeName {
			c.enqueue(c.local.ofPod(pod.Namespace, pod.Name))
		}
	}
	if !c.synced() {
		return // Run queues every sandbox once the informers have listed
	}
	c.enqueue(c.readersOf(versions))
}

// readersOf returns the local sandboxes selected by a policy whose rules
// read one of versions (of one pod) as a peer.
func (c *Controller) readersOf(versions []policy.Pod) []string {
	var readers []*v1beta2.MultiNetworkPolicy
	nsLabels := c.namespaceLabels(versions[0].Namespace)
	for _, o := range c.opts.Policies.GetStore().List() {
		p, ok := o.(*v1beta2.MultiNetworkPolicy)
		if ok && slices.ContainsFunc(versions, func(v policy.Pod) bool { return policy.ReadsPeer(p, v, nsLabels) }) {
			readers = append(readers, p)
		}
	}
	return c.selectedBy(readers)
}

// selectedBy returns the local sandboxes whose pod one of policies
// selects, and those whose pod the cluster-wide informer does not have
// (its labels are not known here).
func (c *Controller) selectedBy(policies []*v1beta2.MultiNetworkPolicy) []string {
	if len(policies) == 0 {
		return nil
	}
	byNamespace := map[string][]*v1beta2.MultiNetworkPolicy{}
	for _, p := range policies {
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
	}
	return c.local.where(func(namespace, name string) bool {
		ps := byNamespace[namespace]
		if len(ps) == 0 {
			return false
		}
		pod, known := c.peers.get(namespace, name)
		return !known || slices.ContainsFunc(ps, func(p *v1beta2.MultiNetworkPolicy) bool {
			ok, _ := policy.Selects(p, pod)
			return ok
		})
	})
}

// namespaceLabels returns namespace ns's labels from the informer (nil
// when it does not have it).
func (c *Controller) namespaceLabels(ns string) map[string]string {
	obj, ok, err := c.opts.Namespaces.GetStore().GetByKey(ns)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Namespace)
	if n == nil {
		return nil
	}
	return n.Labels
}

// enqueueGoverned queues the sandboxes of every namespace that has a
// policy.
func (c *Controller) enqueueGoverned() {
	idx := c.opts.Policies.GetIndexer()
	c.enqueue(c.local.where(func(ns, _ string) bool {
		objs, err := idx.ByIndex(cache.NamespaceIndex, ns)
		return err == nil && len(objs) > 0
	}))
}
