package policysync

import (
	"fmt"
	"reflect"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/node/kube"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	policyclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/pkg/spec/policy"
	"github.com/multinet/multinet/pkg/spec/status"
)

// livePhases selects the pods that can hold addresses: a pod that has
// Succeeded or Failed has no sandbox, and its addresses may be another
// pod's now (the informer sees it deleted when it stops matching).
const livePhases = "status.phase!=Succeeded,status.phase!=Failed"

// NewPodInformer is the cluster-wide pod informer policy needs (not
// started): every pod that is not finished, of every node, on client
// (the typed core/v1 client, protobuf), each pod trimmed by TrimPeer to
// what policy reads, so that its memory is bounded by the pods' labels,
// network-status and named ports (docs/network-policy.md "Cost").
// Errors: the informer cannot be made.
func NewPodInformer(client corev1client.PodsGetter) (cache.SharedIndexInformer, error) {
	inf, err := kube.NewInformer[*corev1.PodList](client.Pods(metav1.NamespaceAll), &corev1.Pod{},
		kube.InformerOptions{FieldSelector: livePhases, Transform: TrimPeer, Client: client})
	if err != nil {
		return nil, fmt.Errorf("cluster-wide pod informer: %w", err)
	}
	return inf, nil
}

// NewPolicyInformer is the MultiNetworkPolicy informer (v1beta2, every
// namespace; not started). Each policy keeps its TypeMeta, so that Events
// can refer to it.
func NewPolicyInformer(client policyclient.MultiNetworkPoliciesGetter) (cache.SharedIndexInformer, error) {
	inf, err := kube.NewInformer[*v1beta2.MultiNetworkPolicyList](client.MultiNetworkPolicies(metav1.NamespaceAll),
		&v1beta2.MultiNetworkPolicy{}, kube.InformerOptions{Transform: policyTransform, Client: client})
	if err != nil {
		return nil, fmt.Errorf("MultiNetworkPolicy informer: %w", err)
	}
	return inf, nil
}

// policyTransform drops a policy's managedFields and sets its TypeMeta.
func policyTransform(obj any) (any, error) {
	p, ok := obj.(*v1beta2.MultiNetworkPolicy)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	p.TypeMeta = metav1.TypeMeta{APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "MultiNetworkPolicy"}
	return p, nil
}

// TrimPeer is the cluster-wide pod informer's transform: a pod keeps its
// name, namespace, UID, resourceVersion, labels, the network-status
// annotation, its node, its phase and its containers' named ports (what
// policy.PodFromObject reads); everything else is dropped.
func TrimPeer(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	if v, ok := p.Annotations[status.Annotation]; ok {
		t.Annotations = map[string]string{status.Annotation: v}
	}
	if m, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[corev1.MirrorPodAnnotationKey] = m
	}
	t.Spec.Containers = namedPorts(p.Spec.Containers)
	t.Spec.InitContainers = namedPorts(p.Spec.InitContainers)
	return t, nil
}

// namedPorts keeps, of cs, the containers with named ports and those ports.
func namedPorts(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		var ports []corev1.ContainerPort
		for _, p := range c.Ports {
			if p.Name != "" {
				ports = append(ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: p.Protocol})
			}
		}
		if len(ports) > 0 {
			out = append(out, corev1.Container{Name: c.Name, Ports: ports})
		}
	}
	return out
}

// peers keeps every pod of the cluster-wide informer as policy sees it
// (policy.Pod, converted once per pod change) and the list Compute reads,
// rebuilt after a change.
type peers struct {
	mu    sync.Mutex
	byKey map[string]policy.Pod
	list  []policy.Pod // nil after a change
}

// set converts pod and keeps it; it returns the version it replaces (had:
// there was one) and whether what policy reads of the pod changed. A
// network-status that does not decode gives the pod no attachments.
func (p *peers) set(pod *corev1.Pod) (old, now policy.Pod, had, changed bool) {
	now, _ = policy.PodFromObject(pod)
	key := pod.Namespace + "/" + pod.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byKey == nil {
		p.byKey = map[string]policy.Pod{}
	}
	old, had = p.byKey[key]
	if had && samePeer(old, now) {
		return old, now, true, false
	}
	p.byKey[key] = now
	p.list = nil
	return old, now, had, true
}

// remove forgets pod namespace/name and returns the version it had.
func (p *peers) remove(namespace, name string) (old policy.Pod, had bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := namespace + "/" + name
	old, had = p.byKey[key]
	delete(p.byKey, key)
	p.list = nil
	return old, had
}

// get returns pod namespace/name as policy sees it.
func (p *peers) get(namespace, name string) (policy.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.byKey[namespace+"/"+name]
	return pod, ok
}

// all is every pod, sorted by namespace/name; the slice is shared: do not
// change it.
func (p *peers) all() []policy.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.list == nil {
		keys := make([]string, 0, len(p.byKey))
		for k := range p.byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.list = make([]policy.Pod, 0, len(keys))
		for _, k := range keys {
			p.list = append(p.list, p.byKey[k])
		}
	}
	return p.list
}

// samePeer reports whether a and b are the same to policy.
func samePeer(a, b policy.Pod) bool {
	return reflect.DeepEqual(a, b)
}
