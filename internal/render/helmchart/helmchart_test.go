package helmchart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyDeploy copies the repository's deploy/ (without the chart) into a
// temporary root and applies edit to the file rel of it.
func copyDeploy(t *testing.T, rel, old, new string) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("..", "..", "..", "deploy")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if r == "helm" || r == "observability" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(root, "deploy", r), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.ToSlash(r) == rel {
			if !strings.Contains(string(b), old) {
				t.Fatalf("%s has no %q", rel, old)
			}
			b = []byte(strings.Replace(string(b), old, new, 1))
		}
		return os.WriteFile(filepath.Join(root, "deploy", r), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGenerateRefusesWhatItCannotFollow: a change of deploy/ that moves a
// field the chart templates fails the generation, naming the field,
// instead of producing a chart that differs from kustomize.
func TestGenerateRefusesWhatItCannotFollow(t *testing.T) {
	for _, c := range []struct{ rel, old, new, want string }{
		{"base/multinetd-daemonset.yaml", "- --cni-conf-dir=/etc/cni/net.d", "- --cni-conf-dir=/etc/cni/other", "no argument --cni-conf-dir=/etc/cni/net.d"},
		{"base/multinetd-daemonset.yaml", "hostPath: {path: /opt/cni/bin, type: DirectoryOrCreate}", "hostPath: {path: /opt/bin, type: DirectoryOrCreate}", "cni-bin: hostPath.path is /opt/bin, want /opt/cni/bin"},
		{"base/multinetd.yaml", "globalNamespaces: [default]", "globalNamespaces:\n- default", `want one line "globalNamespaces: [default]"`},
		{"base/multinetd.yaml", "namespaceIsolation: true", "namespaceIsolation: true\nundeclaredCapabilities: multus", "the base sets undeclaredCapabilities"},
		{"base/webhook-deployment.yaml", "- --global-namespaces=default", "", "no argument --global-namespaces= in the base"},
	} {
		root := copyDeploy(t, c.rel, c.old, c.new)
		if _, err := Generate(root); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q -> %q: Generate: %v, want an error with %q", c.rel, c.old, c.new, err, c.want)
		}
	}
	if _, err := Generate(copyDeploy(t, "base/multinetd.yaml", "stateDir:", "stateDir:")); err != nil {
		t.Errorf("deploy/ as it is: %v", err)
	}
}
