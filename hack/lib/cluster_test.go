// Package lib_test checks the local cluster's shell library (cluster.sh)
// where it decides something on its own: which kubectl the scripts use and
// the version skew they accept.
package lib_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeKubectl writes a kubectl that reports client version 1.<minor> and
// returns its path.
func fakeKubectl(t *testing.T, dir, minor string) string {
	t.Helper()
	p := filepath.Join(dir, "kubectl")
	script := "#!/bin/sh\necho '{\"clientVersion\":{\"major\":\"1\",\"minor\":\"" + minor + "\",\"gitVersion\":\"v1." + minor + ".0\"}}'\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// sourceAndRun runs bash with cluster.sh sourced and then cmd, with env
// added; it returns the combined output and whether it succeeded.
func sourceAndRun(t *testing.T, env []string, cmd string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatalf("jq is needed (hack/lib/cluster.sh ensure_packages installs it): %v", err)
	}
	c := exec.Command("bash", "-c", ". ./cluster.sh && "+cmd)
	c.Env = append(os.Environ(), env...)
	out, err := c.CombinedOutput()
	return string(out), err == nil
}

// TestKubectlSkew: with KUBECTL naming another kubectl, check_kubectl_skew
// accepts one minor of skew either way from K8S_VERSION and refuses more,
// with a message that says why and what to do; a missing kubectl is
// refused too.
func TestKubectlSkew(t *testing.T) {
	for _, tc := range []struct {
		minor string
		ok    bool
	}{
		{"37", true}, {"36", true}, {"38", true}, {"35", false}, {"39", false}, {"32", false},
	} {
		t.Run("v1."+tc.minor, func(t *testing.T) {
			k := fakeKubectl(t, t.TempDir(), tc.minor)
			out, ok := sourceAndRun(t, []string{"K8S_VERSION=v1.37.2", "KUBECTL=" + k}, "check_kubectl_skew")
			if ok != tc.ok {
				t.Fatalf("kubectl v1.%s against v1.37.2: accepted %v, want %v\n%s", tc.minor, ok, tc.ok, out)
			}
			if !tc.ok && (!strings.Contains(out, "one minor of skew") || !strings.Contains(out, "unset KUBECTL")) {
				t.Errorf("refusal does not say why and what to do: %s", out)
			}
		})
	}
	out, ok := sourceAndRun(t, []string{"K8S_VERSION=v1.37.2", "KUBECTL=/nonexistent/kubectl"}, "check_kubectl_skew")
	if ok || !strings.Contains(out, "does not exist") {
		t.Errorf("a missing kubectl: accepted %v, output %q; want a refusal naming it", ok, out)
	}
}

// TestKubectlIsTheClusterVersion: without KUBECTL the scripts use the
// kubectl built at the cluster's version, not one found on PATH.
func TestKubectlIsTheClusterVersion(t *testing.T) {
	dir := t.TempDir()
	fakeKubectl(t, dir, "32")
	cache := t.TempDir()
	out, ok := sourceAndRun(t, []string{"K8S_VERSION=v1.35.4", "KUBECTL=", "MULTINET_CACHE_DIR=" + cache,
		"PATH=" + dir + ":" + os.Getenv("PATH")}, "kubectl_bin")
	want := filepath.Join(cache, "k8s", "v1.35.4", "kubectl")
	if !ok || strings.TrimSpace(out) != want {
		t.Errorf("kubectl_bin = %q (ok %v), want %s", out, ok, want)
	}
}

// TestNoFeatureGates: the local cluster sets no feature gate on any
// component (everything multinet uses is GA on every supported minor).
func TestNoFeatureGates(t *testing.T) {
	for _, f := range []string{"../cluster-up.sh", "cluster.sh", "coredns.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"feature-gates", "featureGates"} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s sets %s", f, s)
			}
		}
	}
}
