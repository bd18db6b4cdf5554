//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/internal/cli/explain"
	"github.com/multinet/multinet/pkg/spec/status"
)

// buildPlugin builds kubectl-multinet into a temporary directory and returns
// the directory, to put first on kubectl's PATH.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx := testContext(t, 5*time.Minute)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "kubectl-multinet"), "../../cmd/kubectl-multinet").CombinedOutput()
	if err != nil {
		t.Fatalf("go build kubectl-multinet: %v\n%s", err, out)
	}
	return dir
}

// kubectlPlugin runs `kubectl multinet args...` as a user would: kubectl
// finds the plugin on PATH; the cluster comes from KUBECONFIG (kubectl
// refuses flags before a plugin's name). It returns the exit status, stdout
// and stderr.
func kubectlPlugin(t *testing.T, pluginDir string, args ...string) (int, string, string) {
	t.Helper()
	bin := testCluster.env["KUBECTL"]
	if bin == "" {
		bin = "kubectl"
	}
	ctx := testContext(t, 60*time.Second)
	cmd := exec.CommandContext(ctx, bin, append([]string{"multinet"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+testCluster.env["KUBECONFIG"])
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kubectl multinet %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// TestKubectlMultinet: kubectl runs the plugin against the cluster. For a
// pod with two extra networks, `get pods -o json` shows exactly its
// network-status and `explain -o json` the NADs' configs, the interface
// names, the runtimeConfig and the status of each attachment; explain says
// that a pod's attachment fails when its NAD is missing.
func TestKubectlMultinet(t *testing.T) {
	plugin := buildPlugin(t)
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "net-a", "1.0.0", nil)
	b := bridgeNet(t, ns, "net-b", "1.0.0", nil, map[string]any{"type": "tuning", "capabilities": map[string]bool{"mac": true}})
	const mac = "02:00:00:00:0b:01"
	p := runPod(t, podSpec(ns, "two", `[{"name":"net-a"},{"name":"net-b","interface":"data0","mac":"`+mac+`"}]`))
	p, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 30*time.Second), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod: %v", err)
	}
	want := checkStatusMatchesPod(t, p, []string{"eth0", "net1", "data0"})

	t.Run("get pods -o json", func(t *testing.T) {
		code, stdout, stderr := kubectlPlugin(t, plugin, "get", "pods", "-n", ns, "-o", "json")
		var got []struct {
			Namespace string                 `json:"namespace"`
			Name      string                 `json:"name"`
			Networks  []status.NetworkStatus `json:"networks"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
			t.Fatalf("exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
		}
		if len(got) != 1 || got[0].Namespace != ns || got[0].Name != "two" || len(got[0].Networks) != len(want) {
			t.Fatalf("got %+v, want pod %s/two with %d networks", got, ns, len(want))
		}
		for i := range want {
			if !got[0].Networks[i].Equal(&want[i]) {
				t.Errorf("networks[%d] = %+v, network-status has %+v", i, got[0].Networks[i], want[i])
			}
		}
	})

	t.Run("get pods table", func(t *testing.T) {
		code, stdout, stderr := kubectlPlugin(t, plugin, "get", "pods", "-n", ns, "-o", "wide")
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "POD ") || !strings.Contains(lines[0], "DNS") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for i, s := range want {
			f := strings.Fields(lines[i+1])
			if f[0] != "two" || f[1] != s.Name || f[2] != s.Interface || f[3] != strings.Join(s.IPs, ",") || f[4] != s.Mac {
				t.Errorf("row %d = %q, want %s %s %v %s", i+1, lines[i+1], s.Name, s.Interface, s.IPs, s.Mac)
			}
		}
	})

	t.Run("explain -o json", func(t *testing.T) {
		code, stdout, stderr := kubectlPlugin(t, plugin, "explain", "two", "-n", ns, "-o", "json")
		var x explain.Explanation
		if err := json.Unmarshal([]byte(stdout), &x); err != nil || code != 0 {
			t.Fatalf("exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
		}
		if !x.OK || len(x.Errors) != 0 || x.Node == "" || len(x.Selection) != 2 || len(x.Attachments) != 2 || len(x.NetworkStatus) != len(want) {
			t.Fatalf("explanation = %+v", x)
		}
		for i, tn := range []*testNet{a, b} {
			at := x.Attachments[i]
			if at.Network != ns+"/"+tn.Name || x.Selection[i].Namespace != ns || at.Interface != want[i+1].Interface ||
				!at.NADFound || at.ConfigSource != explain.SourceSpecConfig || at.Error != "" {
				t.Errorf("attachment %d = %+v", i, at)
			}
			if at.Status == nil || !at.Status.Equal(&want[i+1]) {
				t.Errorf("attachment %d status = %+v, network-status has %+v", i, at.Status, want[i+1])
			}
			checkConfigMatchesNAD(t, ns, tn.Name, at.Config)
		}
		if rc := x.Attachments[1].RuntimeConfig; len(rc) != 1 || rc["mac"] != mac {
			t.Errorf("data0 runtimeConfig = %v, want mac %s", rc, mac)
		}
		if pl := x.Attachments[1].Plugins; len(pl) != 2 || pl[0].Type != "bridge" || pl[1].Type != "tuning" || strings.Join(pl[1].RuntimeConfig, ",") != "mac" {
			t.Errorf("data0 plugins = %+v, want bridge and tuning receiving mac", pl)
		}
	})

	t.Run("explain a pod whose NAD is missing", func(t *testing.T) {
		// The webhook refuses a pod that selects a missing NAD, so the NAD
		// goes after the pod is running: a re-ADD (sandbox restart) fails.
		gone := bridgeNet(t, ns, "gone", "1.0.0", nil)
		runPod(t, podSpec(ns, "orphan", "net-a,gone"))
		defer func() {
			deletePod(t, ns, "orphan")
			assertReleased(t, gone)
		}()
		if err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Delete(testContext(t, 30*time.Second), "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete NAD: %v", err)
		}
		code, stdout, stderr := kubectlPlugin(t, plugin, "explain", "orphan", "-n", ns, "-o", "json")
		var x explain.Explanation
		if err := json.Unmarshal([]byte(stdout), &x); err != nil || code != 0 {
			t.Fatalf("exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
		}
		if x.OK || len(x.Attachments) != 2 || x.Attachments[0].Error != "" || x.Attachments[1].NADFound ||
			!strings.Contains(x.Attachments[1].Error, "NetworkAttachmentDefinition "+ns+"/gone not found") || x.Attachments[1].Interface != "net2" ||
			x.Attachments[1].Status == nil {
			t.Errorf("explanation = %+v", x)
		}
		code, stdout, _ = kubectlPlugin(t, plugin, "explain", "orphan", "-n", ns)
		if code != 0 || !strings.Contains(stdout, "  [1] "+ns+"/gone -> net2: FAIL\n      error:         "+`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "gone": NetworkAttachmentDefinition `+ns+"/gone not found") ||
			!strings.Contains(stdout, "Result:    FAIL: 1 of 2") {
			t.Errorf("exit %d, text:\n%s", code, stdout)
		}
	})

	t.Run("explain a pod that does not exist", func(t *testing.T) {
		code, stdout, stderr := kubectlPlugin(t, plugin, "explain", "nope", "-n", ns)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "error: pod "+ns+"/nope not found") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})

	deletePod(t, ns, "two")
	assertReleased(t, a, b)
}

// checkConfigMatchesNAD asserts that an attachment's config list has the
// plugins of the NAD's spec.config, and its name.
func checkConfigMatchesNAD(t *testing.T, ns, name string, config json.RawMessage) {
	t.Helper()
	nad, err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(testContext(t, 30*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get NAD %s/%s: %v", ns, name, err)
	}
	type list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	var want, got list
	if err := json.Unmarshal([]byte(nad.Spec.Config), &want); err != nil {
		t.Fatalf("NAD %s/%s spec.config: %v", ns, name, err)
	}
	if err := json.Unmarshal(config, &got); err != nil {
		t.Fatalf("explain config of %s/%s: %v\n%s", ns, name, err, config)
	}
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(got)
	if !bytes.Equal(wantJSON, gotJSON) {
		t.Errorf("explain config of %s/%s:\n%s\nNAD spec.config:\n%s", ns, name, gotJSON, wantJSON)
	}
}
