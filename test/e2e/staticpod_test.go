//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/testing/testskip"
	"github.com/multinet/multinet/pkg/spec/status"
)

// TestStaticPodNetworks: a static pod (a manifest in the target node's
// kubelet's staticPodPath) selecting two networks runs with a correct network-status
// on its mirror pod, although the runtime knows it by the static pod's UID
// and the API by the mirror pod's; deleting the manifest tears both
// attachments down (records gone, addresses released).
func TestStaticPodNetworks(t *testing.T) {
	if testCluster.env["CNI_MODE"] != "multinet" {
		testskip.Skip(t, "needs multinetd (CNI_MODE=%s)", testCluster.env["CNI_MODE"])
	}
	dir := target.path(testCluster.mustEnv(t, "STATIC_POD_DIR"))
	ns := newNamespace(t)
	red := bridgeNet(t, ns, "red", "1.0.0", nil)
	blue := bridgeNet(t, ns, "blue", "0.4.0", nil)

	name := "static-" + randHex(3)
	mirrorName := name + "-" + target.Name
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  annotations:
    %s: red, blue@data1
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: %s
    imagePullPolicy: Never
    command: [sleep, "3600"]
`, name, ns, nadv1.NetworksAnnotation, testCluster.env["TEST_IMAGE"])
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(file) })

	ctx := testContext(t, 150*time.Second)
	var mirror *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		mirror = p
		return p.Status.Phase == corev1.PodRunning && p.Annotations[status.Annotation] != "", nil
	})
	if err != nil {
		t.Fatalf("static pod %s/%s: mirror pod not Running with network-status: %v\n%s", ns, mirrorName, err, podEvents(ns, mirrorName))
	}
	if mirror.Annotations[corev1.MirrorPodAnnotationKey] == "" || string(mirror.UID) == mirror.Annotations[corev1.MirrorPodAnnotationKey] {
		t.Fatalf("pod %s is not a mirror pod with its own UID (annotations %v)", mirrorName, mirror.Annotations)
	}
	list := checkStatusMatchesPod(t, mirror, []string{"eth0", "net1", "data1"})
	if len(list) == 3 && (list[1].Name != ns+"/red" || list[2].Name != ns+"/blue") {
		t.Errorf("network-status names %s, %s; want %s/red, %s/blue", list[1].Name, list[2].Name, ns, ns)
	}
	if len(red.allocations(t)) != 1 || len(blue.allocations(t)) != 1 {
		t.Errorf("allocations: red %v, blue %v; want one each", red.allocations(t), blue.allocations(t))
	}
	if len(podRecords(t, ns, mirrorName)) != 1 {
		t.Errorf("records of the static pod: %v, want 1", podRecords(t, ns, mirrorName))
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, mirrorName, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(podRecords(t, ns, mirrorName)) == 0, nil
	})
	if err != nil {
		t.Fatalf("after its manifest was removed, the static pod's mirror or records remain: %v (records %v)", err, podRecords(t, ns, mirrorName))
	}
	assertReleased(t, red, blue)
}
