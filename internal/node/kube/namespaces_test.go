package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestNamespaceLabels: a namespace's labels; nil and no error for one that
// does not exist; any other API error is returned.
func TestNamespaceLabels(t *testing.T) {
	c := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t1", Labels: map[string]string{"a": "b"}}})
	ctx := context.Background()
	if got, err := NamespaceLabels(ctx, c.CoreV1().Namespaces(), "t1"); err != nil || got["a"] != "b" {
		t.Errorf("t1: %v, %v; want its labels", got, err)
	}
	if got, err := NamespaceLabels(ctx, c.CoreV1().Namespaces(), "gone"); err != nil || got != nil {
		t.Errorf("gone: %v, %v; want nil, nil", got, err)
	}
	boom := errors.New("etcd unavailable")
	c.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	if _, err := NamespaceLabels(ctx, c.CoreV1().Namespaces(), "t1"); !errors.Is(err, boom) {
		t.Errorf("failing API: %v, want %v", err, boom)
	}
}

// TestCachedNamespaceLabels: a namespace the store holds is answered from
// it with no API request, however often; one it does not hold is read live
// once per call (the admission burst that queued on the rate limiter read
// every namespace live).
func TestCachedNamespaceLabels(t *testing.T) {
	c := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{"x": "y"}}})
	gets := 0
	c.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) { gets++; return false, nil, nil })
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	cached, err := NamespaceLabelsOnly(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t1", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": "dropped"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ns := cached.(*corev1.Namespace); ns.Annotations != nil || ns.Labels["a"] != "b" {
		t.Fatalf("NamespaceLabelsOnly kept %+v", ns.ObjectMeta)
	}
	if err := store.Add(cached); err != nil {
		t.Fatal(err)
	}
	labels := CachedNamespaceLabels(store, c.CoreV1().Namespaces())
	for range 100 {
		if got, err := labels(context.Background(), "t1"); err != nil || got["a"] != "b" {
			t.Fatalf("t1: %v, %v", got, err)
		}
	}
	if gets != 0 {
		t.Errorf("%d GETs for a cached namespace, want 0", gets)
	}
	if got, err := labels(context.Background(), "new"); err != nil || got["x"] != "y" || gets != 1 {
		t.Errorf("new (not cached): %v, %v after %d GETs; want its labels after 1", got, err, gets)
	}
}
