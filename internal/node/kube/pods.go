// Package kube is multinetd's view of the Kubernetes API: a node-local pod
// informer, the network-status PATCH, and Events on pods. It never lists or
// watches pods of other nodes, and it never GETs an object an informer already
// holds.
package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
)

// PodCache serves pods of one node from a field-selected informer
// (spec.nodeName=<node>), with a short wait and a single GET as fallback for a
// pod the informer has not delivered yet.
type PodCache struct {
	client   corev1client.PodsGetter
	informer cache.SharedIndexInformer
	// wait is how long Get waits for the informer before its one GET.
	wait time.Duration
}

// PodCacheOptions configure NewPodCache.
type PodCacheOptions struct {
	// NodeName selects the pods (field selector spec.nodeName). Required.
	NodeName string
	// Resync is the informer's resync period; 0 disables resync.
	Resync time.Duration
	// Wait is how long Get waits for a pod missing from the cache before it
	// falls back to one API GET. Default 500 ms.
	Wait time.Duration
}

// NewPodCache builds (but does not start) the node-local pod informer on
// client, the typed core/v1 client of pkg/client/clientset/kubernetes
// (corev1client.NewForConfig: no other API group's client or informer is
// linked in). A client that implements IsWatchListSemanticsUnSupported
// (the fake clientset) is used without watch-list streaming. Errors: empty
// NodeName.
func NewPodCache(client corev1client.PodsGetter, opts PodCacheOptions) (*PodCache, error) {
	if opts.NodeName == "" {
		return nil, errors.New("pod cache: node name is empty")
	}
	if opts.Wait == 0 {
		opts.Wait = 500 * time.Millisecond
	}
	inf, err := NewInformer[*corev1.PodList](client.Pods(metav1.NamespaceAll), &corev1.Pod{}, InformerOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", opts.NodeName).String(),
		Transform:     TrimPod,
		Resync:        opts.Resync,
		Client:        client,
	})
	if err != nil {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	return &PodCache{client: client, informer: inf, wait: opts.Wait}, nil
}

// TrimPod is the pod informer's transform: it replaces a pod by a copy of
// what multinetd reads (the cache's memory), dropping the rest
// (managedFields, the kubectl last-applied-configuration annotation, most of
// spec and status):
//
//   - metadata: name, namespace, UID, resourceVersion, generation,
//     annotations, deletionTimestamp and grace period (the network
//     selection, network-status, the mirror pod's UID; Events' reference);
//   - spec: nodeName, hostNetwork, resourceClaims, and the containers that
//     request or limit an extended resource (a name with a "/": the device
//     resources of podnetworks.PodRequest), with their name and those
//     resources only;
//   - status: phase and resourceClaimStatuses (hot-plug, DRA).
//
// Code that needs more reads the pod from the API server. Other objects
// pass unchanged.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Generation: p.Generation, Annotations: p.Annotations,
			DeletionTimestamp: p.DeletionTimestamp, DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds,
		},
		Spec: corev1.PodSpec{
			NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork, ResourceClaims: p.Spec.ResourceClaims,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase, ResourceClaimStatuses: p.Status.ResourceClaimStatuses,
			ExtendedResourceClaimStatus: p.Status.ExtendedResourceClaimStatus},
	}
	if _, ok := t.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Annotations = maps.Clone(t.Annotations)
		delete(t.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	for _, c := range p.Spec.Containers {
		req, lim := extended(c.Resources.Requests), extended(c.Resources.Limits)
		if req != nil || lim != nil {
			t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}})
		}
	}
	return t, nil
}

// extended returns the extended resources of l (names with a "/", e.g.
// example.com/sriov; not cpu, memory, hugepages-*), nil when none.
func extended(l corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range l {
		if strings.Contains(string(name), "/") {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// OnDelete calls f with the namespace, name and UID of every pod the
// informer sees deleted (also one whose deletion it learned of on a relist),
// from the informer's goroutine: f must not block. Call it before Run.
func (c *PodCache) OnDelete(f func(namespace, name, uid string)) error {
	_, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				f(p.Namespace, p.Name, string(p.UID))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("pod cache: delete handler: %w", err)
	}
	return nil
}

// OnChange calls f with every pod the informer adds (also those of its
// first list and of a relist: old is nil then) and with the old and new
// version of every pod it sees updated, from the informer's goroutine: f
// must not block. Call it before Run.
func (c *PodCache) OnChange(f func(old, new *corev1.Pod)) error {
	_, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				f(nil, p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*corev1.Pod)
			if p, ok := newObj.(*corev1.Pod); ok {
				f(o, p)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("pod cache: change handler: %w", err)
	}
	return nil
}

// Run runs the informer until ctx is done.
func (c *PodCache) Run(ctx context.Context) { c.informer.Run(ctx.Done()) }

// HasSynced reports whether the initial list has been received.
func (c *PodCache) HasSynced() bool { return c.informer.HasSynced() }

// Cached returns the pod from the informer store only.
func (c *PodCache) Cached(namespace, name string) (*corev1.Pod, bool) {
	obj, ok, err := c.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Pod), true
}

// Get returns the pod namespace/name: from the informer; else after waiting up
// to the configured wait for the informer to deliver it; else from one API GET.
// When uid is not empty the pod must be the one with that UID (a pod
// re-created under the same name is a different pod): its own UID, or, for
// the mirror pod of a static pod, the static pod's UID that the kubelet gives
// the runtime, which the mirror pod carries in its kubernetes.io/config.mirror
// annotation (see IsRuntimePod). Errors: NotFound from the API, a UID mismatch
// (ErrUIDMismatch), ctx expiry.
func (c *PodCache) Get(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error) {
	pod, ok := c.Cached(namespace, name)
	if !ok || !IsRuntimePod(pod, uid) {
		pod, ok = c.waitCached(ctx, namespace, name, uid)
	}
	if !ok {
		var err error
		pod, err = c.client.Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
		}
	}
	if !IsRuntimePod(pod, uid) {
		return nil, fmt.Errorf("pod %s/%s has UID %s, the runtime asked for %s: %w", namespace, name, pod.UID, uid, ErrUIDMismatch)
	}
	return pod, nil
}

// IsRuntimePod reports whether pod, as the API has it, is the pod the runtime
// knows by uid ("" matches any): the same UID, or a mirror pod whose
// kubernetes.io/config.mirror annotation is uid. The kubelet gives a static
// pod's runtime sandbox the static pod's own UID (a hash of its manifest) and
// creates a mirror pod with a UID of the API server's, recording the static
// UID in that annotation.
func IsRuntimePod(pod *corev1.Pod, uid string) bool {
	if uid == "" || string(pod.UID) == uid {
		return true
	}
	return pod.Annotations[corev1.MirrorPodAnnotationKey] == uid
}

// ErrUIDMismatch: the pod found under the name is not the pod the runtime asked for.
var ErrUIDMismatch = errors.New("pod UID mismatch")

func (c *PodCache) waitCached(ctx context.Context, namespace, name, uid string) (*corev1.Pod, bool) {
	deadline := time.NewTimer(c.wait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-deadline.C:
			return nil, false
		case <-tick.C:
			if pod, ok := c.Cached(namespace, name); ok && IsRuntimePod(pod, uid) {
				return pod, true
			}
		}
	}
}
