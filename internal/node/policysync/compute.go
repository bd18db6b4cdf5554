package policysync

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/policy"
	"github.com/multinet/multinet/pkg/spec/status"
)

// compute is the effective rules of rec's sandbox, whose pod is pod
// (TrimPeer's view): policy.Compute over the informers' policies of the
// pod's namespace, every namespace's labels and every pod as a peer.
// Errors: rec's results cannot be read.
func (c *Controller) compute(pod *corev1.Pod, rec *state.Record) (policy.Result, error) {
	if !c.hasPolicies(pod.Namespace) {
		return policy.Result{}, nil // nothing selects the pod
	}
	target, err := TargetPod(pod, rec)
	if err != nil {
		return policy.Result{}, err
	}
	return policy.Compute(c.cluster(pod.Namespace), target), nil
}

// hasPolicies reports whether the informer holds a MultiNetworkPolicy of
// namespace (a policy selects only pods of its own namespace); true when
// the index cannot say.
func (c *Controller) hasPolicies(namespace string) bool {
	objs, err := c.opts.Policies.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	return err != nil || len(objs) > 0
}

// cluster is what policy.Compute reads for a target of namespace.
func (c *Controller) cluster(namespace string) policy.Cluster {
	cl := policy.Cluster{
		Namespaces: map[string]map[string]string{},
		Pods:       c.peers.all(),
		NetworkExists: func(n ktypes.NamespacedName) bool {
			_, ok, err := c.opts.NADs.GetStore().GetByKey(n.String())
			return err == nil && ok
		},
	}
	objs, _ := c.opts.Policies.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	for _, o := range objs {
		if p, ok := o.(*v1beta2.MultiNetworkPolicy); ok {
			cl.Policies = append(cl.Policies, p)
		}
	}
	for _, o := range c.opts.Namespaces.GetStore().List() {
		if ns, ok := o.(*corev1.Namespace); ok {
			cl.Namespaces[ns.Name] = ns.Labels
		}
	}
	return cl
}

// TargetPod is the local pod of rec's sandbox as policy sees it: pod's
// labels and named ports, and the attachments of rec (network, interface,
// addresses) mapped as its network-status entries are
// (status.FromResult, then policy.PodFromObject, as kubectl multinet
// explain maps the published annotation), so that multinetd and explain
// agree. The default network and the auxiliary chain are left out. An
// attachment still planned (a hot-plug about to run its delegates) counts
// as its interface name without addresses, so that its rules are in place
// before the delegate makes the interface.
// Errors: a recorded result cannot be read.
func TargetPod(pod *corev1.Pod, rec *state.Record) (policy.Pod, error) {
	var list []status.NetworkStatus
	for _, a := range rec.Attachments {
		if a.Default || a.Auxiliary || a.Detach || a.Phase != state.PhaseAdded && a.Phase != state.PhasePlanned {
			continue
		}
		res, err := recordedResult(a.Result)
		if err != nil {
			return policy.Pod{}, fmt.Errorf("network %s (interface %s) of container %s: recorded result: %w", a.Network, a.IfName, rec.ContainerID, err)
		}
		st, err := status.FromResult(res, a.Network, a.IfName, status.Options{})
		if err != nil {
			return policy.Pod{}, fmt.Errorf("container %s: %w", rec.ContainerID, err)
		}
		list = append(list, st)
	}
	value, err := status.Encode(list)
	if err != nil {
		return policy.Pod{}, fmt.Errorf("container %s: network-status: %w", rec.ContainerID, err)
	}
	p := *pod // PodFromObject reads it; only the annotations are changed
	p.Annotations = maps.Clone(p.Annotations)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[status.Annotation] = value
	return policy.PodFromObject(&p)
}

// recordedResult decodes a recorded CNI result (any version; nil when
// none was recorded).
func recordedResult(raw json.RawMessage) (types.Result, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return version.NewResult(v.CNIVersion, raw)
}
