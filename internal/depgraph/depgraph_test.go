package depgraph

import (
	"os/exec"
	"strings"
	"testing"
)

// rule is what one command must not link: a dependency equal to a banned
// path or below it (path + "/...") fails the test.
type rule struct {
	cmd    string
	banned []string
	why    string
}

var rules = []rule{
	{
		cmd: "./cmd/multinet-deviceplugin",
		banned: []string{
			"k8s.io/client-go", "k8s.io/api", "k8s.io/dynamic-resource-allocation",
			"github.com/multinet/multinet/pkg/dra",
			"github.com/prometheus", "github.com/spf13/cobra", "sigs.k8s.io/kustomize",
		},
		why: "the device plugin talks to the kubelet only (Device Plugin API over gRPC); the DRA driver is multinet-dra-driver",
	},
}

// deps returns the import paths of pkg's dependency graph (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// banned reports the first banned path dep is or is below, "" when none.
func banned(dep string, paths []string) string {
	for _, b := range paths {
		if dep == b || strings.HasPrefix(dep, b+"/") {
			return b
		}
	}
	return ""
}

func TestDaemonsLinkOnlyWhatTheyUse(t *testing.T) {
	for _, r := range rules {
		t.Run(strings.TrimPrefix(r.cmd, "./cmd/"), func(t *testing.T) {
			t.Parallel()
			seen := map[string]bool{}
			for _, d := range deps(t, r.cmd) {
				if b := banned(d, r.banned); b != "" && !seen[b] {
					seen[b] = true
					t.Errorf("%s links %s (banned: %s): %s", r.cmd, d, b, r.why)
				}
			}
		})
	}
}

func TestBanned(t *testing.T) {
	for dep, want := range map[string]string{
		"k8s.io/client-go":              "k8s.io/client-go",
		"k8s.io/client-go/kubernetes":   "k8s.io/client-go",
		"k8s.io/client-gopher":          "",
		"k8s.io/apimachinery/pkg/types": "",
	} {
		if got := banned(dep, []string{"k8s.io/client-go", "k8s.io/api"}); got != want {
			t.Errorf("banned(%q) = %q, want %q", dep, got, want)
		}
	}
}
