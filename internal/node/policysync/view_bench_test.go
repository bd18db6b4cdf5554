package policysync

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// peerPod is a pod of another node as the cluster-wide informer receives
// it: a Deployment's pod with two networks and their network-status, a
// container with resources, a named port, probes and environment, a
// Running status and managedFields.
func peerPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant-a", Name: fmt.Sprintf("web-7d9c6b5f4-%05d", i), UID: types.UID(fmt.Sprintf("0f8c1c2e-3a4b-4c5d-8e9f-%012d", i)),
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d9c6b5f4", "tier": "front"},
			Annotations: map[string]string{
				"k8s.v1.cni.cncf.io/networks": "tenant-a/net-a,tenant-a/net-b",
				"k8s.v1.cni.cncf.io/network-status": fmt.Sprintf(`[{"name":"containerd-net","interface":"eth0","ips":["10.244.%d.%d"],"mac":"ea:03:37:5d:3f:eb","default":true,"dns":{}},`+
					`{"name":"tenant-a/net-a","interface":"net1","ips":["10.210.%d.%d"],"mac":"1e:ad:90:6a:27:18","dns":{}},{"name":"tenant-a/net-b","interface":"net2","ips":["10.211.%d.%d"],"mac":"8e:18:e8:d1:ca:0a","dns":{}}]`,
					i/250, i%250, i/250, i%250, i/250, i%250),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c6b5f4", UID: "rs-uid"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{}}}}}`)}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node2", ServiceAccountName: "default",
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example.com/web:1.2.3",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 9090}},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "PORT", Value: "8080"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, PeriodSeconds: 10},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.244.0.12", HostIP: "10.249.0.2",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Image: "registry.example.com/web:1.2.3",
				ImageID:     "registry.example.com/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
		},
	}
}

// BenchmarkPeerBytesPerPod reports the heap the policy controller holds
// per pod of the cluster (bytes/pod: the informer's trimmed object plus
// its policy.Pod, live heap after minus before, over N pods), and
// whole-bytes/pod, what the whole objects would hold. Run:
// go test -run '^$' -bench PeerBytesPerPod ./internal/node/policysync/
func BenchmarkPeerBytesPerPod(b *testing.B) {
	const n = 2000
	for b.Loop() {
		src := make([]*corev1.Pod, n)
		for i := range src {
			src[i] = peerPod(i)
		}
		before := liveHeap()
		whole := make([]*corev1.Pod, n)
		for i := range whole {
			whole[i] = src[i].DeepCopy()
		}
		mid := liveHeap()
		var p peers
		kept := make([]any, n)
		for i := range src {
			t, _ := TrimPeer(src[i].DeepCopy())
			kept[i] = t
			p.set(t.(*corev1.Pod))
		}
		_ = p.all()
		after := liveHeap()
		b.ReportMetric(float64(after-mid)/n, "bytes/pod")
		b.ReportMetric(float64(mid-before)/n, "whole-bytes/pod")
		runtime.KeepAlive(whole)
		runtime.KeepAlive(kept)
		runtime.KeepAlive(src)
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
