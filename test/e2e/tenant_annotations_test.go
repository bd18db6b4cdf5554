//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// TestTenantAnnotationLimits: what a pod's author
// may put in its network selection annotation. From a tenant's namespace,
// a pod with 1,000 network selection elements, a pod handing a tuning
// sysctl in cni-args to a NAD that does not opt in
// (multinet.io/accept-cni-args), and a pod asking for portMappings in a
// namespace whose Pod Security level is baseline are each refused at
// admission with exactly podnetworks' message; no pod is stored, and the
// node's links and packet-filter rules are as they were.
func TestTenantAnnotationLimits(t *testing.T) {
	ns := newTenantNamespace(t)
	baseline := createNamespace(t, map[string]string{podnetworks.PodSecurityEnforceLabel: "baseline"})
	// A tenant's NAD: reference plugins only, no key naming a node object
	// (the shipped NAD trust policy admits it in both namespaces).
	for i, n := range []string{ns, baseline} {
		createNAD(t, n, "net", map[string]any{"cniVersion": "1.0.0", "name": "net", "plugins": []map[string]any{
			{"type": "ptp", "ipam": map[string]any{"type": "host-local", "subnet": fmt.Sprintf("10.213.%d.0/24", i)}},
			{"type": "tuning"},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		}}, nil)
	}

	linksBefore := nodeLinks(t)
	rulesBefore := nodeRuleset(t)
	policy := deployedTrustPolicy(t)
	cases := []struct {
		name, ns, networks string
		parts              []string
	}{
		{"1000-elements", ns, strings.TrimSuffix(strings.Repeat("net,", 1000), ","),
			[]string{"selects 1000 network selection elements; a pod may have at most 32", "maxSelectionElements"}},
		{"cni-args-sysctl", ns, `[{"name":"net","cni-args":{"sysctl":{"net.ipv4.conf.all.forwarding":"1"}}}]`,
			[]string{`networks[0] "net": field "cni-args": NetworkAttachmentDefinition ` + ns + `/net does not accept cni-args`, podnetworks.AcceptCNIArgsAnnotation + `: "true"`}},
		{"portmappings-baseline", baseline, `[{"name":"net","portMappings":[{"hostPort":18183,"containerPort":80,"protocol":"tcp"}]}]`,
			[]string{`networks[0] "net": field "portMappings": namespace ` + baseline + ` enforces Pod Security level "baseline"`, "forbids hostPort"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := podSpec(c.ns, "p-"+c.name, c.networks)
			p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			want := verdictMessage(t, p, policy)
			code, stdout, stderr := kubectlRun(t, manifest(t, p), "apply", "-f", "-")
			assertKubectlDenied(t, code, stdout, stderr, mutatingPodWebhook, want, c.parts...)
			if _, err := testCluster.kube.CoreV1().Pods(c.ns).Get(testContext(t, 20*time.Second), p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod %s after the refusal: %v, want NotFound", p.Name, err)
			}
		})
	}
	if got := nodeLinks(t); !slices.Equal(got, linksBefore) {
		t.Errorf("node links changed: %q, were %q", got, linksBefore)
	}
	if got := nodeRuleset(t); got != rulesBefore {
		t.Errorf("node packet-filter rules changed:\n%s\nwere:\n%s", got, rulesBefore)
	}
}

// counters are iptables-save's packet and byte counts ("[12:720]") and
// nft's ("counter packets 12 bytes 720").
var counters = regexp.MustCompile(`\[\d+:\d+\]|packets \d+ bytes \d+`)

// sandboxRule matches what the reference plugins write for one pod
// sandbox: a rule whose comment names its container ID, and the
// declaration of a per-sandbox chain (bridge's ipMasq chain CNI-<hash>,
// portmap's CNI-DN-<hash>).
var sandboxRule = regexp.MustCompile(` id: \\"[0-9a-f]{64}\\"|^:CNI-(DN-)?[0-9a-f]{24} `)

// nodeRuleset is the target node's packet-filter rules without counters
// and comments: every iptables table (iptables-save, which lists the
// nf_tables-backed ones too) and, where the node has nft, its whole
// ruleset. The rules of pod sandboxes are left out: other tests' pods on
// the node come and go meanwhile (their default network's masquerade
// rules), and a refused pod has no sandbox, so none of them can be its.
func nodeRuleset(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.Split(target.run(t, "iptables-save"), "\n") {
		if !strings.HasPrefix(l, "#") && !sandboxRule.MatchString(l) {
			b.WriteString(counters.ReplaceAllString(l, "") + "\n")
		}
	}
	if out, err := target.command(testContext(t, 60*time.Second), "nft", "list", "ruleset").Output(); err == nil {
		b.WriteString("nft:\n")
		for _, l := range strings.Split(string(out), "\n") {
			if !sandboxRule.MatchString(l) {
				b.WriteString(counters.ReplaceAllString(l, "") + "\n")
			}
		}
	}
	return b.String()
}
