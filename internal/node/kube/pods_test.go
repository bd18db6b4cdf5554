package kube

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/pkg/client/clientset/kubernetes/fake"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// A static pod's sandbox carries the static pod's UID; the API holds its
// mirror pod, with another UID and the static one in kubernetes.io/config.mirror.
func TestPodCacheGetMirrorPod(t *testing.T) {
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "kube-system", Name: "static-web-node1", UID: "api-uid",
		Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "static-uid", "kubernetes.io/config.source": "file"},
	}, Spec: corev1.PodSpec{NodeName: "node1"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-2"}, Spec: corev1.PodSpec{NodeName: "node1"}}
	c, err := NewPodCache(fakePods(fake.NewSimpleClientset(mirror, other)), PodCacheOptions{NodeName: "node1", Wait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go c.Run(ctx)
	for !c.HasSynced() {
		time.Sleep(5 * time.Millisecond)
	}

	for _, uid := range []string{"static-uid", "api-uid", ""} {
		got, err := c.Get(ctx, "kube-system", "static-web-node1", uid)
		if err != nil || got.UID != "api-uid" {
			t.Errorf("Get(static pod, uid %q) = %v, %v; want the mirror pod", uid, got, err)
		}
	}
	if _, err := c.Get(ctx, "kube-system", "static-web-node1", "someone-else"); !errors.Is(err, ErrUIDMismatch) {
		t.Errorf("a UID that is neither the mirror's nor its static pod's: err = %v, want ErrUIDMismatch", err)
	}
	// Only a mirror pod's annotation counts, not any pod's.
	if _, err := c.Get(ctx, "default", "web", "static-uid"); !errors.Is(err, ErrUIDMismatch) {
		t.Errorf("a regular pod under another UID: err = %v, want ErrUIDMismatch", err)
	}
}

// fakePods gives NewPodCache the fake clientset's pods together with the
// fake's IsWatchListSemanticsUnSupported (the typed fake alone lacks it, and
// an informer would wait for a watch-list stream the fake never sends).
func fakePods(cs *fake.Clientset) interface {
	corev1client.PodsGetter
	IsWatchListSemanticsUnSupported() bool
} {
	return struct {
		corev1client.PodsGetter
		*fake.Clientset
	}{cs.CoreV1(), cs}
}

// The pod cache's transform keeps what multinetd reads of a pod (the
// network selection and network-status annotations, the mirror pod's UID,
// hostNetwork, phase, deletion, resource claims and the extended-resource
// claim (KEP-5004), the containers' device
// requests) and drops the rest (BenchmarkPodCacheBytesPerPod).
func TestTrimPodKeepsWhatMultinetdReads(t *testing.T) {
	claim := "web-claim-x7"
	full := benchPod(1)
	full.Annotations[corev1.LastAppliedConfigAnnotation] = `{"kind":"Pod"}`
	full.Annotations[corev1.MirrorPodAnnotationKey] = "static-uid"
	full.Generation = 3
	full.DeletionTimestamp = &metav1.Time{}
	full.Spec.HostNetwork = true
	full.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimTemplateName: &claim}}
	full.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "nic", ResourceClaimName: &claim}}
	full.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "web-extended-resources-x",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "a", ResourceName: "example.com/sriov", RequestName: "container-0-request-0"}}}
	sriov := corev1.ResourceName("example.com/sriov")
	full.Spec.Containers = append(full.Spec.Containers,
		corev1.Container{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{sriov: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}}},
		corev1.Container{Name: "b", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{sriov: resource.MustParse("2")}}})
	orig := full.DeepCopy()

	obj, err := TrimPod(full)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Pod)
	if !equality.Semantic.DeepEqual(full, orig) {
		t.Error("TrimPod changed the pod it was given")
	}
	wantAnn := maps.Clone(orig.Annotations)
	delete(wantAnn, corev1.LastAppliedConfigAnnotation)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: orig.Namespace, Name: orig.Name, UID: orig.UID, Generation: 3, Annotations: wantAnn, DeletionTimestamp: orig.DeletionTimestamp},
		Spec: corev1.PodSpec{NodeName: "node1", HostNetwork: true, ResourceClaims: orig.Spec.ResourceClaims, Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{sriov: resource.MustParse("1")}}},
			{Name: "b", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{sriov: resource.MustParse("2")}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ResourceClaimStatuses: orig.Status.ResourceClaimStatuses,
			ExtendedResourceClaimStatus: orig.Status.ExtendedResourceClaimStatus},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("TrimPod =\n%+v\nwant\n%+v", got, want)
	}
	// The device requests read from the trimmed pod are the full pod's.
	for _, name := range []corev1.ResourceName{sriov, "example.com/other"} {
		if g, w := podnetworks.PodRequest(got, name), podnetworks.PodRequest(orig, name); g != w {
			t.Errorf("PodRequest(%s) = %d on the cached pod, %d on the pod", name, g, w)
		}
	}
	if !IsRuntimePod(got, "static-uid") {
		t.Error("the cached mirror pod is not its static pod's")
	}
	svc := &corev1.Service{}
	if o, _ := TrimPod(svc); o != any(svc) {
		t.Error("TrimPod replaced an object that is not a pod")
	}
}
