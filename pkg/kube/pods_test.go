package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/pkg/client/clientset/kubernetes/fake"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
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
