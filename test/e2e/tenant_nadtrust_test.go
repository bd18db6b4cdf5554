//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// The NAD trust policy (docs/nad-trust.md) as a tenant meets it: the
// deployed webhook and multinetd run the shipped policy; a namespace the
// test makes with newTenantNamespace carries no trust label, as a namespace
// admin's own namespace would not.

// newTenantNamespace creates a namespace without the NAD trust label: the
// shipped policy's rule "tenants" applies to its NADs.
func newTenantNamespace(t *testing.T) string {
	t.Helper()
	return createNamespace(t, nil)
}

// deployedTrustPolicy is deployedPolicy with the shipped NAD trust policy,
// the namespaces' labels read from the cluster.
func deployedTrustPolicy(t *testing.T) podnetworks.Policy {
	t.Helper()
	p := deployedPolicy(t)
	p.NADTrust = podnetworks.NADTrust{Policy: podnetworks.DefaultNADTrustPolicy(),
		Namespaces: podnetworks.NamespaceLabelsFunc(func(ctx context.Context, name string) (map[string]string, error) {
			ns, err := testCluster.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return ns.Labels, nil
		})}
	return p
}

// nodeUplink returns the name of the target node's default-route link (its
// uplink), else any link of the node that is not loopback.
func nodeUplink(t *testing.T) string {
	t.Helper()
	h := target.netlink(t)
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
				return l.Attrs().Name
			}
		}
	}
	for _, name := range nodeLinks(t) {
		if name != "lo" {
			return name
		}
	}
	t.Fatal("the target node has no link but lo")
	return ""
}

// nodeLinks returns the names of the target node's links, sorted,
// without the host ends of pod sandboxes' veths (a veth whose peer is in
// another network namespace): other tests' pods on the node come and go
// meanwhile, and a refused pod has no sandbox, so none of them can be its.
func nodeLinks(t *testing.T) []string {
	t.Helper()
	links, err := target.netlink(t).LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		if _, veth := l.(*netlink.Veth); veth && l.Attrs().NetNsID >= 0 {
			continue
		}
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

// TestTenantNADTrustRefusedAtAdmission: from a
// tenant namespace, a NAD that moves the node's uplink into a pod
// (host-device "device"), keeps host-local's leases in /etc ("dataDir"),
// hands a plugin a literal runtimeConfig (a device-info file path outside
// the device-info root), or points multinet-ipam at multinetd's own CNI
// socket is refused at admission with exactly the policy's message, naming
// the key, the plugin and the rule; the NAD is not stored, and the node's
// links and /etc are as they were. The same NADs are admitted in a
// namespace the admin labelled trusted.
func TestTenantNADTrustRefusedAtAdmission(t *testing.T) {
	ns := newTenantNamespace(t)
	trusted := newNamespace(t)
	uplink := nodeUplink(t)
	socket := filepath.Join(testCluster.mustEnv(t, "MULTINET_CLUSTER_DIR"), "multinet", "run", "multinetd.sock")
	netName := "mne2e-trust-" + randHex(3)
	linksBefore := nodeLinks(t)
	cases := []struct {
		name, config string
		parts        []string
	}{
		{"host-device-uplink", `{"cniVersion":"1.0.0","name":"` + netName + `","type":"host-device","device":"` + uplink + `"}`,
			[]string{`key "device" ("` + uplink + `") of plugin "host-device"`}},
		{"datadir-etc", `{"cniVersion":"1.0.0","name":"` + netName + `","type":"ptp","ipam":{"type":"host-local","subnet":"10.212.0.0/24","dataDir":"/etc"}}`,
			[]string{`key "ipam.dataDir" ("/etc") of plugin "host-local"`}},
		{"runtimeconfig-literal", `{"cniVersion":"1.0.0","name":"` + netName + `","type":"ptp","runtimeConfig":{"CNIDeviceInfoFile":"/etc/passwd"},"ipam":{"type":"host-local","subnet":"10.212.1.0/24"}}`,
			[]string{`key "runtimeConfig"`, `of plugin "ptp"`}},
		{"ipam-socket-multinetd", `{"cniVersion":"1.0.0","name":"` + netName + `","type":"ptp","ipam":{"type":"multinet-ipam","socketPath":"` + socket + `","ranges":[[{"subnet":"10.212.2.0/24"}]]}}`,
			[]string{`key "ipam.socketPath" ("` + socket + `") of plugin "multinet-ipam"`}},
	}
	policy := deployedTrustPolicy(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nad := nadObject(ns, c.name, c.config, nil)
			findings, err := podnetworks.CheckNADTrustFindings(testContext(t, 30*time.Second), nad, policy)
			if err != nil {
				t.Fatal(err)
			}
			if len(findings) == 0 {
				t.Fatalf("the shipped policy allows NAD %s in a tenant namespace", c.name)
			}
			// The webhook's message: CheckNAD's errors, then the policy's.
			var msgs []string
			for _, f := range append(podnetworks.CheckNAD(nad, nil).Errors, findings...) {
				msgs = append(msgs, f.String())
			}
			if len(msgs) == 0 {
				t.Fatalf("the shipped policy allows NAD %s in a tenant namespace", c.name)
			}
			code, stdout, stderr := kubectlRun(t, manifest(t, nad), "apply", "-f", "-")
			parts := append(c.parts, `NAD trust rule "tenants" of namespace "`+ns+`"`)
			assertKubectlDenied(t, code, stdout, stderr, nadWebhook, strings.Join(msgs, "; "), parts...)
			t.Logf("kubectl apply: %s", strings.TrimSpace(stderr))
			if _, err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(testContext(t, 20*time.Second), c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("NAD %s after the refusal: %v, want NotFound", c.name, err)
			}
			// The admin's namespace may hold it (no pod uses it here).
			if code, _, stderr := kubectlRun(t, manifest(t, nadObject(trusted, c.name, c.config, nil)), "apply", "-f", "-"); code != 0 {
				t.Errorf("NAD %s in the trusted namespace %s refused: %s", c.name, trusted, stderr)
			}
		})
	}
	if got := nodeLinks(t); !slices.Equal(got, linksBefore) {
		t.Errorf("node links changed: %q, were %q", got, linksBefore)
	}
	if _, err := os.Stat(target.path(filepath.Join("/etc", netName))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/etc/%s on the node: %v, want none (host-local never ran)", netName, err)
	}
}

// TestTenantNADTrustRefusedAtADD: a NAD stored
// before the policy applied to it (created while the namespace was
// trusted; the admin then removed the trust label) fails the ADD of a pod
// admitted meanwhile: multinetd posts a NetworkAttachFailed Warning whose
// message is exactly podnetworks.Check's (naming the NAD, the key, the
// plugin and the rule), nothing is attached, the node bridge the NAD names
// is never made and no address is leased; a new pod selecting it is now
// refused at admission with the same message.
func TestTenantNADTrustRefusedAtADD(t *testing.T) {
	ns := newNamespace(t)
	net := bridgeNet(t, ns, "net", "1.0.0", nil)
	p := podSpec(ns, "gated", "net")
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "multinet.io/e2e-hold"}}
	ctx := testContext(t, 2*time.Minute)
	if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod (trusted namespace): %v", err)
	}
	t.Cleanup(func() { deletePod(t, ns, p.Name) })

	// The admin withdraws the trust.
	patch := []byte(`{"metadata":{"labels":{"` + podnetworks.NADTrustLabel + `":null}}}`)
	if _, err := testCluster.kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("remove the trust label of %s: %v", ns, err)
	}
	want := verdictMessage(t, p, deployedTrustPolicy(t))
	for _, part := range []string{"NetworkAttachmentDefinition " + ns + "/net", `key "plugins[0].bridge" ("` + net.Bridge + `") of plugin "bridge"`, `key "plugins[0].ipam.dataDir"`, `NAD trust rule "tenants" of namespace "` + ns + `"`} {
		if !strings.Contains(want, part) {
			t.Errorf("podnetworks' verdict %q does not contain %q", want, part)
		}
	}

	releaseGateRefused(t, ctx, p, want)
	if a := recordAttachments(t, ns, p.Name); len(a) != 0 {
		t.Errorf("records hold attachments %+v, want none", a)
	}
	if _, err := target.netlink(t).LinkByName(net.Bridge); err == nil {
		t.Errorf("node bridge %s exists: the bridge plugin ran for an untrusted NAD", net.Bridge)
	}
	if a := net.allocations(t); len(a) != 0 {
		t.Errorf("leases in %s: %v, want none", net.DataDir, a)
	}

	// A new pod selecting it is refused at admission, with the same rule.
	again := podSpec(ns, "again", "net")
	again.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	code, stdout, stderr := kubectlRun(t, manifest(t, again), "apply", "-f", "-")
	assertKubectlDenied(t, code, stdout, stderr, mutatingPodWebhook, verdictMessage(t, again, deployedTrustPolicy(t)), `NAD trust rule "tenants"`)
	deletePod(t, ns, p.Name)
	assertNoRecords(t, ns)
}
