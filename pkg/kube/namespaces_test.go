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
