//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlatformVersions: the cluster under test is the one the scripts say:
// the API server and the kubelet at K8S_VERSION (v1.37.2 by
// default, v1.35.4 in make test-k8s-versions), containerd at
// CONTAINERD_VERSION (2.x) with the runc built beside it, kube-proxy and
// kubectl from the same Kubernetes build.
func TestPlatformVersions(t *testing.T) {
	want := testCluster.mustEnv(t, "K8S_VERSION")
	sv, err := testCluster.kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if sv.GitVersion != want {
		t.Errorf("kube-apiserver is %s, want %s", sv.GitVersion, want)
	}
	ctx := testContext(t, 30*time.Second)
	node, err := testCluster.kube.CoreV1().Nodes().Get(ctx, testCluster.mustEnv(t, "NODE_NAME"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	if info.KubeletVersion != want {
		t.Errorf("kubelet is %s, want %s", info.KubeletVersion, want)
	}
	ctrd := testCluster.mustEnv(t, "CONTAINERD_VERSION")
	if !strings.HasPrefix(ctrd, "v2.") || info.ContainerRuntimeVersion != "containerd://"+strings.TrimPrefix(ctrd, "v") &&
		info.ContainerRuntimeVersion != "containerd://"+ctrd {
		t.Errorf("container runtime is %s, want containerd %s (2.x)", info.ContainerRuntimeVersion, ctrd)
	}
	if ip := testCluster.mustEnv(t, "NODE_IP"); len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Address != ip {
		t.Errorf("node addresses %v, want the node address %s first", node.Status.Addresses, ip)
	}
	bin := filepath.Dir(testCluster.mustEnv(t, "CTR"))
	out, err := exec.Command(filepath.Join(bin, "runc"), "--version").CombinedOutput()
	if rv := testCluster.mustEnv(t, "RUNC_VERSION"); err != nil || !strings.HasPrefix(string(out), "runc version "+strings.TrimPrefix(rv, "v")) {
		t.Errorf("runc --version = %q (%v), want %s", out, err, rv)
	}
	out, err = exec.Command(testCluster.mustEnv(t, "KUBECTL"), "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(out), want) {
		t.Errorf("the scripts' kubectl reports %q (%v), want %s", out, err, want)
	}
}
