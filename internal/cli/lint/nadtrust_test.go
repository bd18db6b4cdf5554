package lint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// shippedTrust is the deployed policy: the shipped NAD trust policy with
// deploy/'s globalNamespaces.
func shippedTrust() podnetworks.Policy {
	return podnetworks.Policy{
		Isolation: selection.IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default"}},
		NADTrust:  podnetworks.NADTrust{Policy: podnetworks.DefaultNADTrustPolicy()},
	}
}

// readExamples decodes examples/*.yaml, leaving out the files named in skip.
func readExamples(t *testing.T, skip ...string) []Object {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	var objs []Object
	for _, p := range paths {
		if strings.Contains(strings.Join(skip, ","), filepath.Base(p)) {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		more, err := Decode(data, p)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, more...)
	}
	return objs
}

// TestLintExamplesNADTrust: examples/ (make demo) passes the shipped NAD
// trust policy because its namespace carries the admin's trust label
// (examples/00-namespaces.yaml); without that Namespace object its NADs,
// which name node bridges, a macvlan master and dataDirs, are refused, the
// one in the global namespace "default" still allowed.
func TestLintExamplesNADTrust(t *testing.T) {
	results, err := Lint(readExamples(t), Options{Policy: shippedTrust()})
	if err != nil {
		t.Fatal(err)
	}
	nads := 0
	for _, r := range results {
		if r.Kind == "NetworkAttachmentDefinition" {
			nads++
		}
		if !r.Valid {
			t.Errorf("%s %s/%s: %q", r.Kind, r.Namespace, r.Name, r.Errors)
		}
	}
	if nads == 0 {
		t.Fatal("no NAD in examples/")
	}

	results, err = Lint(readExamples(t, "00-namespaces.yaml"), Options{Policy: shippedTrust()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Kind != "NetworkAttachmentDefinition" {
			continue
		}
		refused := strings.Contains(strings.Join(r.Errors, "\n"), `NAD trust rule "tenants" of namespace "multinet-demo"`)
		if refused != (r.Namespace == "multinet-demo") {
			t.Errorf("NAD %s/%s without the trust label: errors %q", r.Namespace, r.Name, r.Errors)
		}
	}
}

// TestLintNADTrustFixtures: the NAD shapes the e2e suite, hack/multus-e2e.sh,
// hack/measure-components.sh and the bench create pass in a namespace the
// harness labels trusted and are refused in a tenant's (naming key, plugin
// and rule); what a tenant may write passes in both. Pods selecting a
// refused NAD are refused too, with the same rule.
func TestLintNADTrustFixtures(t *testing.T) {
	fixtures := []struct {
		name, config string
		tenantOK     bool
		key, plugin  string
	}{
		{"bridge-hostlocal", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","bridge":"mne1","ipam":{"type":"host-local","dataDir":"/run/e2e","ranges":[[{"subnet":"10.210.1.0/24"}]]}}]}`, false, "plugins[0].bridge", "bridge"},
		{"macvlan", `{"cniVersion":"1.0.0","name":"n","type":"macvlan","master":"mnmaster","ipam":{"type":"static"}}`, false, "master", "macvlan"},
		{"ipvlan", `{"cniVersion":"1.0.0","name":"n","type":"ipvlan","master":"mnmaster","ipam":{"type":"static"}}`, false, "master", "ipvlan"},
		{"host-device", `{"cniVersion":"1.0.0","name":"n","type":"host-device","device":"mnr0"}`, false, "device", "host-device"},
		{"netdev-device-plugin", `{"cniVersion":"1.0.0","name":"n","type":"multinet-netdev","capabilities":{"deviceID":true,"CNIDeviceInfoFile":true},"ipam":{"type":"host-local","dataDir":"/run/e2e","subnet":"10.9.0.0/24"}}`, false, "ipam.dataDir", "host-local"},
		{"multinet-ipam-socket", `{"cniVersion":"1.1.0","name":"n","type":"ptp","ipam":{"type":"multinet-ipam","pool":"p","socketPath":"/run/multinet/ipam.sock","ranges":[[{"subnet":"10.254.0.0/16"}]]}}`, false, "ipam.socketPath", "multinet-ipam"},
		{"ptp-hostlocal", `{"cniVersion":"1.0.0","name":"n","type":"ptp","ipam":{"type":"host-local","subnet":"10.9.0.0/24"}}`, true, "", ""},
		{"netdev-static", `{"cniVersion":"1.0.0","name":"n","type":"multinet-netdev","capabilities":{"deviceID":true},"ipam":{"type":"static","addresses":[{"address":"10.9.0.2/24"}]}}`, true, "", ""},
	}
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			in := "apiVersion: v1\nkind: Namespace\nmetadata: {name: trusted, labels: {multinet.io/nad-trust: unrestricted}}\n---\n" +
				nad("trusted", "net", f.config) + "---\n" + nad("tenant", "net", f.config) + "---\n" + pod("tenant", "p", "net")
			rs := lintYAML(t, in, Options{Policy: shippedTrust()})
			if !rs[1].Valid {
				t.Errorf("trusted namespace: %q", rs[1].Errors)
			}
			if f.tenantOK {
				if !rs[2].Valid || !rs[3].Valid {
					t.Errorf("tenant namespace: NAD %q, pod %q", rs[2].Errors, rs[3].Errors)
				}
				return
			}
			want := `key "` + f.key + `"`
			msg := strings.Join(rs[2].Errors, "\n")
			if rs[2].Valid || !strings.Contains(msg, want) || !strings.Contains(msg, `plugin "`+f.plugin+`"`) || !strings.Contains(msg, `NAD trust rule "tenants" of namespace "tenant"`) {
				t.Errorf("tenant NAD errors %q, want %s of plugin %s under rule tenants", rs[2].Errors, want, f.plugin)
			}
			if rs[3].Valid || !strings.Contains(strings.Join(rs[3].Errors, "\n"), `NAD trust rule "tenants"`) {
				t.Errorf("tenant pod errors %q, want the trust refusal", rs[3].Errors)
			}
		})
	}
	// Without a NAD trust policy, lint checks none (offline lint's default).
	rs := lintYAML(t, nad("tenant", "net", fixtures[3].config), Options{})
	if !rs[0].Valid {
		t.Errorf("no policy: %q", rs[0].Errors)
	}
}

// portMappings in a pod's annotation is an error when the input holds the
// pod's Namespace labelled Pod Security baseline, without a NAD trust
// policy too; the same pod in a Namespace without the label is clean.
func TestLintPortMappingsPodSecurity(t *testing.T) {
	const nadDoc = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: ports, namespace: %s}\nspec:\n  config: '{\"cniVersion\":\"1.0.0\",\"plugins\":[{\"type\":\"bridge\"},{\"type\":\"portmap\",\"capabilities\":{\"portMappings\":true}}]}'\n---\n"
	const podDoc = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: %s\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\":\"ports\",\"portMappings\":[{\"hostPort\":8080,\"containerPort\":80}]}]'\nspec: {containers: [{name: c, image: busybox}]}\n"
	for _, c := range []struct{ ns, labels, want string }{
		{"locked", "{pod-security.kubernetes.io/enforce: baseline}", `namespace locked enforces Pod Security level "baseline"`},
		{"open", "{}", ""},
	} {
		in := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: %s}\n---\n", c.ns, c.labels) + fmt.Sprintf(nadDoc, c.ns) + fmt.Sprintf(podDoc, c.ns)
		objs, err := Decode([]byte(in), "in.yaml")
		if err != nil {
			t.Fatal(err)
		}
		results, err := Lint(objs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var podErrs []string
		for _, r := range results {
			if r.Kind == "Pod" {
				podErrs = r.Errors
			}
		}
		got := strings.Join(podErrs, "\n")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("namespace %s: pod errors %q, want %q", c.ns, got, c.want)
		}
	}
}
