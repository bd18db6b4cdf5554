package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"

	"github.com/multinet/multinet/pkg/client/clientset/kubernetes/fake"
)

// PatchAnnotation tells a pod that is gone (deleted: NotFound; re-created
// under its name: the UID precondition's Conflict) apart from a PATCH that
// failed: the first is ErrPodGone and ends the retries of network-status, the
// second is retried later.
func TestPatchAnnotation(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: "uid-1"}}
	tests := []struct {
		name      string
		answer    error // of every PATCH; nil: the fake tracker applies it
		wantErr   bool
		wantGone  bool
		wantCalls int32
	}{
		{name: "lands", wantCalls: 1},
		{name: "deleted", answer: apierrors.NewNotFound(corev1.Resource("pods"), "web"), wantErr: true, wantGone: true, wantCalls: 1},
		{name: "re-created", answer: apierrors.NewConflict(corev1.Resource("pods"), "web", errors.New("Precondition failed: UID in precondition: uid-1, UID in object meta: uid-2")), wantErr: true, wantGone: true, wantCalls: 1},
		{name: "API server down", answer: apierrors.NewServiceUnavailable("etcd leader changed"), wantErr: true, wantCalls: 3},
		{name: "forbidden", answer: apierrors.NewForbidden(corev1.Resource("pods"), "web", errors.New("no")), wantErr: true, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(pod.DeepCopy())
			var calls atomic.Int32
			client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				calls.Add(1)
				if a.GetSubresource() != "status" {
					t.Errorf("PATCH of subresource %q, want status", a.GetSubresource())
				}
				return tt.answer != nil, nil, tt.answer
			})
			p := &StatusPatcher{client: client.CoreV1(), backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}}
			err := p.PatchAnnotation(context.Background(), "ns1", "web", "uid-1", "k8s.v1.cni.cncf.io/network-status", "[]")
			if (err != nil) != tt.wantErr || errors.Is(err, ErrPodGone) != tt.wantGone {
				t.Errorf("err = %v; want an error %v, ErrPodGone %v", err, tt.wantErr, tt.wantGone)
			}
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("%d PATCHes, want %d", got, tt.wantCalls)
			}
			got, _ := client.CoreV1().Pods("ns1").Get(context.Background(), "web", metav1.GetOptions{})
			if landed := got.Annotations["k8s.v1.cni.cncf.io/network-status"] == "[]"; landed != !tt.wantErr {
				t.Errorf("annotation on the pod: %v, want %v", landed, !tt.wantErr)
			}
		})
	}
}

// OnDelete reports every deleted pod with its UID.
func TestPodCacheOnDelete(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: "uid-1"}, Spec: corev1.PodSpec{NodeName: "node1"}}
	client := fake.NewSimpleClientset(pod)
	c, err := NewPodCache(fakePods(client), PodCacheOptions{NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan string, 1)
	if err := c.OnDelete(func(namespace, name, uid string) { deleted <- namespace + "/" + name + " " + uid }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go c.Run(ctx)
	for !c.HasSynced() {
		time.Sleep(5 * time.Millisecond)
	}
	if err := client.CoreV1().Pods("ns1").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-deleted:
		if got != "ns1/web uid-1" {
			t.Errorf("OnDelete(%s), want ns1/web uid-1", got)
		}
	case <-ctx.Done():
		t.Fatal("OnDelete not called")
	}
}
