package apiservertest_test

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

// The server answers, has the module's CRDs, and authorizes with RBAC: an
// impersonated user without bindings is refused.
func TestShared(t *testing.T) {
	t0 := time.Now()
	s := apiservertest.Shared(t)
	t.Logf("started in %s (dir %s)", time.Since(t0), s.Dir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(s.Config())
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("get namespace default: %v", err)
	}
	nc := versioned.NewForConfigOrDie(s.Config())
	if _, err := nc.K8sCniCncfIoV1alpha1().IPAMClaims("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list IPAMClaims (CRD installed?): %v", err)
	}
	nobody := kubernetes.NewForConfigOrDie(s.ConfigAs("nobody", "system:authenticated"))
	if _, err := nobody.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("an unbound user may list pods: RBAC is not on")
	}
}
