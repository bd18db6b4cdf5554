package api_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/multinet/multinet/internal/testing/testskip"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// repoRoot is the module root: this package lives in <root>/api.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	return root
}

// The committed deepcopy code, CRDs and typed client (pkg/client) are what
// hack/update-codegen.sh generates from the types (hack/verify-codegen.sh).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		testskip.Skip(t, "go is not on PATH: cannot build and run controller-gen (hack/update-codegen.sh)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		testskip.Skip(t, "bash is not on PATH: cannot run hack/verify-codegen.sh")
	}
	root := repoRoot(t)
	cmd := exec.Command("bash", filepath.Join(root, "hack", "verify-codegen.sh"))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/verify-codegen.sh: %v\n%s", err, out)
	}
}

func readCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "crds", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &crd
}

// The NetworkAttachmentDefinition CRD is wire-compatible with spec §3.1:
// names, scope, spec.config a string, spec and config optional.
func TestNetworkAttachmentDefinitionCRD(t *testing.T) {
	crd := readCRD(t, "k8s.cni.cncf.io_network-attachment-definitions.yaml")
	if crd.Name != "network-attachment-definitions.k8s.cni.cncf.io" {
		t.Errorf("name = %q", crd.Name)
	}
	s := crd.Spec
	if s.Group != "k8s.cni.cncf.io" || s.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("group/scope = %q/%q, want k8s.cni.cncf.io/Namespaced", s.Group, s.Scope)
	}
	n := s.Names
	if n.Kind != "NetworkAttachmentDefinition" || n.Plural != "network-attachment-definitions" ||
		n.Singular != "network-attachment-definition" || !slices.Equal(n.ShortNames, []string{"net-attach-def"}) {
		t.Errorf("names = %+v, want those of §3.1", n)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != "v1" || !s.Versions[0].Served || !s.Versions[0].Storage {
		t.Fatalf("versions = %+v, want one served storage version v1", s.Versions)
	}
	root := s.Versions[0].Schema.OpenAPIV3Schema
	if slices.Contains(root.Required, "spec") {
		t.Error("spec is required; §3.2.4 has objects without spec")
	}
	spec := root.Properties["spec"]
	if spec.Type != "object" || len(spec.Required) != 0 {
		t.Errorf("spec schema type %q required %v, want an object with no required field", spec.Type, spec.Required)
	}
	cfg, ok := spec.Properties["config"]
	if !ok || cfg.Type != "string" {
		t.Errorf("spec.config schema = %+v, want type string", cfg)
	}
	if len(spec.Properties) != 1 {
		t.Errorf("spec has properties %v, want only config", slices.Sorted(maps.Keys(spec.Properties)))
	}
}

// The IPAMClaim CRD matches spec §8.1: names, scope, v1alpha1 with a status
// subresource, required spec.network/spec.interface and status.ips.
func TestIPAMClaimCRD(t *testing.T) {
	crd := readCRD(t, "k8s.cni.cncf.io_ipamclaims.yaml")
	if crd.Name != "ipamclaims.k8s.cni.cncf.io" {
		t.Errorf("name = %q", crd.Name)
	}
	s := crd.Spec
	n := s.Names
	if s.Group != "k8s.cni.cncf.io" || s.Scope != apiextensionsv1.NamespaceScoped ||
		n.Kind != "IPAMClaim" || n.ListKind != "IPAMClaimList" || n.Plural != "ipamclaims" || n.Singular != "ipamclaim" {
		t.Errorf("group %q scope %q names %+v, want those of §8.1", s.Group, s.Scope, n)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != "v1alpha1" || !s.Versions[0].Served || !s.Versions[0].Storage {
		t.Fatalf("versions = %+v, want one served storage version v1alpha1", s.Versions)
	}
	v := s.Versions[0]
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("no status subresource (§8.1, §8.2)")
	}
	props := v.Schema.OpenAPIV3Schema.Properties
	spec, status := props["spec"], props["status"]
	if got := slices.Sorted(slices.Values(spec.Required)); !slices.Equal(got, []string{"interface", "network"}) {
		t.Errorf("spec.required = %v, want [interface network]", got)
	}
	for _, f := range []string{"interface", "network"} {
		if spec.Properties[f].Type != "string" {
			t.Errorf("spec.%s type = %q, want string", f, spec.Properties[f].Type)
		}
	}
	if !slices.Equal(status.Required, []string{"ips"}) {
		t.Errorf("status.required = %v, want [ips]", status.Required)
	}
	ips := status.Properties["ips"]
	if ips.Type != "array" || ips.Items == nil || ips.Items.Schema == nil || ips.Items.Schema.Type != "string" {
		t.Errorf("status.ips schema = %+v, want an array of strings", ips)
	}
}

// The IPAllocation CRD (multinet-ipam, docs/decisions/ipam.md): cluster
// scoped, one served storage version, an immutable spec (objects are only
// created and deleted), pool and node selectable as fields.
func TestIPAllocationCRD(t *testing.T) {
	crd := readCRD(t, "ipam.multinet.io_ipallocations.yaml")
	s := crd.Spec
	if crd.Name != "ipallocations.ipam.multinet.io" || s.Group != "ipam.multinet.io" || s.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("name %q group %q scope %q", crd.Name, s.Group, s.Scope)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != "v1alpha1" || !s.Versions[0].Storage {
		t.Fatalf("versions = %+v", s.Versions)
	}
	v := s.Versions[0]
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if len(spec.XValidations) != 1 || spec.XValidations[0].Rule != "self == oldSelf" {
		t.Errorf("spec validations = %+v, want immutability", spec.XValidations)
	}
	if got := slices.Sorted(slices.Values(spec.Required)); !slices.Equal(got, []string{"address", "owner", "pool"}) {
		t.Errorf("spec.required = %v", got)
	}
	var fields []string
	for _, f := range v.SelectableFields {
		fields = append(fields, f.JSONPath)
	}
	if !slices.Equal(fields, []string{".spec.pool", ".spec.owner.node"}) {
		t.Errorf("selectable fields = %v", fields)
	}
}

// kustomization.yaml lists every CRD file, so `kubectl apply -k deploy/crds`
// installs them all.
func TestKustomizationListsCRDs(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "crds")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, filepath.Base(f))
	}
	if len(want) != 4 || !slices.Equal(slices.Sorted(slices.Values(k.Resources)), want) {
		t.Errorf("kustomization resources = %v, want the four CRD files (IPAllocation, IPAMClaim, MultiNetworkPolicy, NetworkAttachmentDefinition) %v", k.Resources, want)
	}
	for _, r := range k.Resources {
		if strings.Contains(r, "/") {
			t.Errorf("resource %q is not a file in deploy/crds", r)
		}
	}
}
