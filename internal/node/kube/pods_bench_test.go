package kube

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multinet/multinet/pkg/client/clientset/kubernetes/fake"
)

// benchPod is a pod as a node's pod cache holds one: a Deployment's pod
// with two networks, network-status, one container with resources, probes
// and a few environment variables, a Running status, and managedFields
// (which the cache's transform drops).
func benchPod(i int) *corev1.Pod {
	name := fmt.Sprintf("web-7d9c6b5f4-%05d", i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant-a", Name: name, UID: types.UID(fmt.Sprintf("0f8c1c2e-3a4b-4c5d-8e9f-%012d", i)),
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d9c6b5f4"},
			Annotations: map[string]string{
				"k8s.v1.cni.cncf.io/networks":       "tenant-a/net-a,tenant-a/net-b",
				"k8s.v1.cni.cncf.io/network-status": `[{"name":"containerd-net","interface":"eth0","ips":["10.244.0.12"],"mac":"ea:03:37:5d:3f:eb","default":true,"dns":{}},{"name":"tenant-a/net-a","interface":"net1","ips":["10.210.5.12"],"mac":"1e:ad:90:6a:27:18","dns":{}},{"name":"tenant-a/net-b","interface":"net2","ips":["10.210.6.12"],"mac":"8e:18:e8:d1:ca:0a","dns":{}}]`,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c6b5f4", UID: "rs-uid"}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{}}}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}}`)},
			},
		},
		Spec: corev1.PodSpec{
			NodeName: "node1", ServiceAccountName: "default",
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example.com/web:1.2.3",
				Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "PORT", Value: "8080"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, PeriodSeconds: 10},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.244.0.12", HostIP: "10.249.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Image: "registry.example.com/web:1.2.3",
				ImageID:     "registry.example.com/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
		},
	}
}

// BenchmarkPodCacheBytesPerPod reports the heap multinetd's pod cache holds
// per cached pod (bytes/pod: the live heap after the informer synced N
// pods, minus the live heap before, divided by N; the fake clientset's own
// copies are counted out by measuring after it was filled): the
// daemon's memory. Run: go test -run '^$' -bench PodCacheBytesPerPod ./internal/node/kube/
func BenchmarkPodCacheBytesPerPod(b *testing.B) {
	const n = 1000
	for b.Loop() {
		cs := fake.NewSimpleClientset()
		for i := range n {
			if err := cs.Tracker().Add(benchPod(i)); err != nil {
				b.Fatal(err)
			}
		}
		before := liveHeap()
		c, err := NewPodCache(fakePods(cs), PodCacheOptions{NodeName: "node1"})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go c.Run(ctx)
		for !c.HasSynced() {
			time.Sleep(time.Millisecond)
		}
		if got := len(c.informer.GetStore().ListKeys()); got != n {
			b.Fatalf("cache holds %d pods, want %d", got, n)
		}
		after := liveHeap()
		b.ReportMetric(float64(after-before)/n, "bytes/pod")
		cancel()
		runtime.KeepAlive(c)
		runtime.KeepAlive(cs)
	}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
