package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	nadfake "github.com/multinet/multinet/pkg/client/clientset/versioned/fake"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// lintClusterFakes makes lint's clients fakes holding objs (namespaces,
// ConfigMaps) and nads.
func lintClusterFakes(o *lintOptions, nads []runtime.Object, objs ...runtime.Object) {
	core := fake.NewClientset(objs...).CoreV1()
	// Created, not given to NewSimpleClientset: its tracker would file them
	// under the guessed plural the client does not list.
	nadc := nadfake.NewSimpleClientset().K8sCniCncfIoV1()
	for _, obj := range nads {
		n := obj.(*nadv1.NetworkAttachmentDefinition)
		if _, err := nadc.NetworkAttachmentDefinitions(n.Namespace).Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			panic(err)
		}
	}
	o.clients = func() (*clusterClients, error) {
		return &clusterClients{Core: core, NADs: nadc, Namespace: "default", Timeout: time.Minute}, nil
	}
}

func storedNAD(ns, name, config string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// TestLintClusterNADTrust: kubectl multinet lint --cluster lists the stored
// NADs that break the NAD trust policy (the shipped one when the cluster has
// no ConfigMap multinet-nad-trust; the ConfigMap's when it has one; the
// file's with --nad-trust-policy), each error naming key, plugin and rule,
// and exits 1; NADs of trusted, global and admin namespaces pass.
func TestLintClusterNADTrust(t *testing.T) {
	uplink := `{"cniVersion":"1.0.0","type":"host-device","device":"eth0"}`
	nads := []runtime.Object{
		storedNAD("team-a", "uplink", uplink),
		storedNAD("team-a", "ok", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`),
		storedNAD("lab", "uplink", uplink),
		storedNAD("default", "uplink", uplink),
		storedNAD("kube-system", "uplink", uplink),
	}
	nss := []runtime.Object{namespace("team-a", nil), namespace("lab", map[string]string{podnetworks.NADTrustLabel: podnetworks.NADTrustUnrestricted}),
		namespace("default", nil), namespace("kube-system", nil)}

	var out, errOut bytes.Buffer
	streams := Streams{Out: &out, ErrOut: &errOut}
	cmd, o := lintCommand(streams)
	lintClusterFakes(o, nads, nss...)
	code, stdout, stderr := execute(t, cmd, &out, &errOut, "--cluster", "--global-namespaces=default")
	if code != ExitInvalid {
		t.Errorf("exit %d, want %d (stderr %q)", code, ExitInvalid, stderr)
	}
	for _, want := range []string{"NetworkAttachmentDefinition team-a/uplink", `key "device" ("eth0") of plugin "host-device"`, `NAD trust rule "tenants" of namespace "team-a"`, "ok  NetworkAttachmentDefinition team-a/ok", "ok  NetworkAttachmentDefinition lab/uplink", "ok  NetworkAttachmentDefinition default/uplink", "ok  NetworkAttachmentDefinition kube-system/uplink"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "shipped NAD trust policy") {
		t.Errorf("stderr %q does not say the shipped policy was used", stderr)
	}

	// The cluster's ConfigMap trusts every namespace.
	open := "apiVersion: multinet.io/v1alpha1\nkind: NADTrustPolicy\nrules: [{name: all, namespaceSelector: {}, unrestricted: true}]\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "multinet-system", Name: "multinet-nad-trust-5g2f8h"}, Data: map[string]string{"nad-trust.yaml": open}}
	cmd, o = lintCommand(streams)
	lintClusterFakes(o, nads, append(nss, cm)...)
	out.Reset()
	errOut.Reset()
	if code, stdout, stderr := execute(t, cmd, &out, &errOut, "--cluster"); code != ExitOK {
		t.Errorf("with the cluster's open policy: exit %d\n%s%s", code, stdout, stderr)
	}

	// --nad-trust-policy wins over the ConfigMap.
	file := write(t, t.TempDir(), "trust.yaml", podnetworks.DefaultNADTrustPolicyYAML)
	cmd, o = lintCommand(streams)
	lintClusterFakes(o, nads, append(nss, cm)...)
	out.Reset()
	errOut.Reset()
	if code, stdout, _ := execute(t, cmd, &out, &errOut, "--cluster", "--nad-trust-policy", file); code != ExitInvalid || !strings.Contains(stdout, `rule "tenants"`) {
		t.Errorf("--nad-trust-policy: exit %d\n%s", code, stdout)
	}

	// -f and --cluster do not go together.
	cmd, o = lintCommand(streams)
	lintClusterFakes(o, nads, nss...)
	out.Reset()
	errOut.Reset()
	if code, _, _ := execute(t, cmd, &out, &errOut, "--cluster", "-f", file); code != ExitUsage {
		t.Errorf("--cluster -f: exit %d, want %d", code, ExitUsage)
	}
}

// TestLintNADTrustPolicyFlag: offline lint checks the NADs of the input
// against --nad-trust-policy, with the labels of the input's Namespace
// objects; a bad policy file is a usage error naming it.
func TestLintNADTrustPolicyFlag(t *testing.T) {
	dir := t.TempDir()
	file := write(t, dir, "trust.yaml", podnetworks.DefaultNADTrustPolicyYAML)
	nads := write(t, dir, "nads.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: lab, labels: {multinet.io/nad-trust: unrestricted}}\n---\n"+
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: up, namespace: team-a}\nspec: {config: '{\"cniVersion\":\"1.0.0\",\"type\":\"macvlan\",\"master\":\"eth0\"}'}\n---\n"+
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: up, namespace: lab}\nspec: {config: '{\"cniVersion\":\"1.0.0\",\"type\":\"macvlan\",\"master\":\"eth0\"}'}\n")
	code, stdout, _ := run(t, "", "lint", "-f", nads, "--nad-trust-policy", file)
	if code != ExitInvalid || !strings.Contains(stdout, `key "master" ("eth0") of plugin "macvlan"`) || !strings.Contains(stdout, "ok  NetworkAttachmentDefinition lab/up") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	if code, _, _ := run(t, "", "lint", "-f", nads); code != ExitOK {
		t.Errorf("without --nad-trust-policy: exit %d, want 0 (offline lint checks no trust policy)", code)
	}
	bad := write(t, dir, "bad.yaml", "kind: Nope\n")
	if code, _, stderr := run(t, "", "lint", "-f", nads, "--nad-trust-policy", bad); code != ExitUsage || !strings.Contains(stderr, "bad.yaml") {
		t.Errorf("bad policy: exit %d, stderr %q", code, stderr)
	}
}
