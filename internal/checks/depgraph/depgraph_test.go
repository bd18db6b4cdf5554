package depgraph

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// rule is what one command must not link: a dependency equal to a banned
// path or below it (path + "/...") fails the test; exact paths fail only
// when equal.
type rule struct {
	cmd    string
	banned []string
	exact  []string
	why    string
}

// deadCodeKillers are the packages that look methods up by name through
// reflect (text/template, html/template, and golang.org/x/net/trace, which
// uses them): the linker then keeps every exported method of every
// reachable type, 12 MB of multinetd (docs/bench.md "Binary size"). gRPC
// leaves x/net/trace out with -tags grpcnotrace, which the builds pass.
var deadCodeKillers = []string{"text/template", "html/template", "golang.org/x/net/trace"}

// cliCode is the kubectl plugin's code and libraries: no daemon runs it.
var cliCode = []string{
	"github.com/spf13/cobra", "sigs.k8s.io/kustomize", "k8s.io/cli-runtime", "k8s.io/kubectl",
	"github.com/multinet/multinet/internal/cli", "github.com/multinet/multinet/internal/cli/lint",
	"github.com/multinet/multinet/internal/cli/explain",
}

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var rules = []rule{
	{
		cmd: "./cmd/multinet-delegate-launcher",
		banned: []string{
			"net/http", "k8s.io", "sigs.k8s.io", "google.golang.org/grpc", "google.golang.org/protobuf",
			"github.com/prometheus", "github.com/vishvananda/netlink",
		},
		why: "the launcher lives as long as multinetd and only forks delegates: it must stay small (package nodeexec)",
	},
	{
		cmd: "./cmd/multinet-deviceplugin",
		banned: join(deadCodeKillers, cliCode, []string{
			"k8s.io/client-go", "k8s.io/api", "k8s.io/dynamic-resource-allocation",
			"github.com/multinet/multinet/internal/devices/dra",
		}),
		why: "the device plugin talks to the kubelet only (Device Plugin API over gRPC) and serves /metrics; the DRA driver is multinet-dra-driver",
	},
	{
		cmd: "./cmd/multinetd",
		banned: join(deadCodeKillers, cliCode, []string{
			"sigs.k8s.io/controller-runtime", "k8s.io/dynamic-resource-allocation",
			"github.com/multinet/multinet/internal/devices/dra", "github.com/multinet/multinet/internal/webhook",
			"k8s.io/client-go/informers", "k8s.io/client-go/dynamic",
			// client-go's scheme registers every API group (a third of
			// multinetd's binary); discovery links it too. multinetd's
			// typed clients are pkg/client/clientset/kubernetes's.
			"k8s.io/client-go/kubernetes", "k8s.io/client-go/discovery",
			"k8s.io/client-go/applyconfigurations",
			"github.com/multinet/multinet/pkg/client/informers",
		}),
		// The generated clientsets (their Discovery links
		// k8s.io/client-go/discovery): multinetd takes the typed group
		// clients below them.
		exact: []string{
			"github.com/multinet/multinet/pkg/client/clientset/versioned",
			"github.com/multinet/multinet/pkg/client/clientset/kubernetes",
		},
		why: "multinetd uses typed clients of the groups it reads (pkg/client/clientset/kubernetes/typed: pods, Events, ResourceClaims, ResourceSlices; NADs, IPAMClaims, IPAllocations), informers made from ListWatches, gRPC for the kubelet",
	},
	{
		cmd: "./cmd/multinet-webhook",
		banned: join(deadCodeKillers, cliCode, []string{
			"google.golang.org/grpc", "k8s.io/dynamic-resource-allocation", "github.com/vishvananda/netlink",
			"github.com/multinet/multinet/internal/devices/dra", "github.com/multinet/multinet/internal/node/daemon",
		}),
		why: "the webhook serves admission over HTTPS and reads NADs",
	},
	{
		cmd: "./cmd/multinet-dra-driver",
		banned: join(deadCodeKillers, cliCode, []string{
			"sigs.k8s.io/controller-runtime",
			"github.com/multinet/multinet/internal/node/daemon", "github.com/multinet/multinet/internal/webhook",
		}),
		why: "the DRA driver is a kubelet plugin publishing ResourceSlices and serving /metrics",
	},
}

// deps returns the import paths of pkg's dependency graph as the builds
// make it (go list -tags grpcnotrace -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "grpcnotrace", "-deps", pkg)
	cmd.Dir = "../../.."
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
				if slices.Contains(r.exact, d) {
					t.Errorf("%s links %s: %s", r.cmd, d, r.why)
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

// TestBuildsUseGRPCNoTrace: every build of the daemons passes -tags
// grpcnotrace (without it gRPC links golang.org/x/net/trace and multinetd
// grows by 12 MB, docs/bench.md "Binary size").
func TestBuildsUseGRPCNoTrace(t *testing.T) {
	for _, f := range []string{"hack/images.sh", "hack/cluster-cni-multinet.sh", "Makefile"} {
		b, err := os.ReadFile("../../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		builds, bad := untaggedBuilds(string(b))
		if builds == 0 {
			t.Errorf("%s: no build of ./cmd/ found", f)
		}
		for _, line := range bad {
			t.Errorf("%s builds without -tags grpcnotrace: %s", f, line)
		}
	}
	if n, bad := untaggedBuilds("x:\n\t$(GO) build -o out/ ./cmd/...\n"); n != 1 || len(bad) != 1 {
		t.Errorf("an untagged Makefile build: %d builds, %q", n, bad)
	}
	if n, bad := untaggedBuilds("go build -trimpath -tags grpcnotrace \\\n  ./cmd/multinetd\n"); n != 1 || len(bad) != 0 {
		t.Errorf("a tagged build: %d builds, %q", n, bad)
	}
}

// untaggedBuilds counts the go build commands of script (a "build" word with
// ./cmd/ or -trimpath on its line) and returns those without -tags
// grpcnotrace.
func untaggedBuilds(script string) (builds int, bad []string) {
	for _, line := range strings.Split(script, "\n") {
		if !strings.Contains(line, " build ") || !strings.Contains(line, "./cmd/") && !strings.Contains(line, "-trimpath") {
			continue
		}
		builds++
		if !strings.Contains(line, "-tags grpcnotrace") {
			bad = append(bad, strings.TrimSpace(line))
		}
	}
	return builds, bad
}
