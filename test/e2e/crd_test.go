//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	nadinformers "github.com/multinet/multinet/pkg/client/informers/externalversions"
)

// TestCRDsEstablished: the CRDs of deploy/crds are served with the group,
// version, scope and names of spec §3.1 (NetworkAttachmentDefinition),
// §8.1 (IPAMClaim, with a status subresource) and the NPWG
// MultiNetworkPolicy (v1beta2 stored), and are Established.
func TestCRDsEstablished(t *testing.T) {
	tests := []struct {
		name       string
		version    string
		kind       string
		plural     string
		shortNames []string
		status     bool
	}{
		{"network-attachment-definitions.k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition", "network-attachment-definitions", []string{"net-attach-def"}, false},
		{"ipamclaims.k8s.cni.cncf.io", "v1alpha1", "IPAMClaim", "ipamclaims", nil, true},
		{"multi-networkpolicies.k8s.cni.cncf.io", "v1beta2", "MultiNetworkPolicy", "multi-networkpolicies", []string{"multi-policy"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t, 30*time.Second)
			var crd apiextensionsv1.CustomResourceDefinition
			err := testCluster.kube.Discovery().RESTClient().Get().
				AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", tt.name).Do(ctx).Into(&crd)
			if err != nil {
				t.Fatalf("get CRD %s: %v (are the CRDs of deploy/crds applied?)", tt.name, err)
			}
			if crd.Spec.Group != "k8s.cni.cncf.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("group/scope = %s/%s, want k8s.cni.cncf.io/Namespaced", crd.Spec.Group, crd.Spec.Scope)
			}
			if crd.Spec.Names.Kind != tt.kind || crd.Spec.Names.Plural != tt.plural {
				t.Errorf("kind/plural = %s/%s, want %s/%s", crd.Spec.Names.Kind, crd.Spec.Names.Plural, tt.kind, tt.plural)
			}
			for _, s := range tt.shortNames {
				if !slices.Contains(crd.Spec.Names.ShortNames, s) {
					t.Errorf("shortNames = %v, want %s among them", crd.Spec.Names.ShortNames, s)
				}
			}
			var served *apiextensionsv1.CustomResourceDefinitionVersion
			for i := range crd.Spec.Versions {
				if crd.Spec.Versions[i].Name == tt.version {
					served = &crd.Spec.Versions[i]
				}
			}
			switch {
			case served == nil:
				t.Errorf("version %s not defined", tt.version)
			case !served.Served || !served.Storage:
				t.Errorf("version %s served=%v storage=%v, want both", tt.version, served.Served, served.Storage)
			case tt.status && (served.Subresources == nil || served.Subresources.Status == nil):
				t.Errorf("version %s has no status subresource", tt.version)
			}
			for _, cond := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.Established, apiextensionsv1.NamesAccepted} {
				if got := crdCondition(&crd, cond); got != apiextensionsv1.ConditionTrue {
					t.Errorf("condition %s = %q, want True", cond, got)
				}
			}
		})
	}
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, typ apiextensionsv1.CustomResourceDefinitionConditionType) apiextensionsv1.ConditionStatus {
	for _, c := range crd.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// TestNetworkAttachmentDefinitionExamples: every example object of spec §3.2
// can be created, read back with the Go types, seen by an informer, listed
// and deleted. The examples reuse the name a-bridge-network; each is deleted
// before the next is created.
func TestNetworkAttachmentDefinitionExamples(t *testing.T) {
	ns := newNamespace(t)
	cs := testCluster.multi.K8sCniCncfIoV1()

	factory := nadinformers.NewSharedInformerFactoryWithOptions(testCluster.multi, 0, nadinformers.WithNamespace(ns))
	inf := factory.K8sCniCncfIo().V1().NetworkAttachmentDefinitions()
	informer := inf.Informer() // before Start: the factory starts the informers asked for
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)
	syncCtx := testContext(t, 30*time.Second)
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		t.Fatal("NetworkAttachmentDefinition informer did not sync in 30s")
	}
	lister := inf.Lister().NetworkAttachmentDefinitions(ns)

	tests := []struct {
		section string
		name    string
		config  string // "" = no spec (§3.2.4)
	}{
		{"§3.2.1 CNI config JSON", "a-bridge-network", `{
    "cniVersion": "0.3.0",
    "name": "a-bridge-network",
    "type": "bridge",
    "bridge": "br0",
    "isGateway": true,
    "ipam": {
      "type": "host-local",
      "subnet": "192.168.5.0/24",
      "dataDir": "/mnt/cluster-ipam"
    }
}`},
		// The export of §3.2.2 lost the braces of the plugin objects; this
		// is the published example.
		{"§3.2.2 CNI configlist JSON", "another-bridge-network", `{
  "cniVersion": "0.3.0",
  "name": "another-bridge-network",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "br0",
      "ipam": {
        "type": "host-local",
        "subnet": "192.168.5.0/24"
      }
    },
    {
      "type": "port-forwarding"
    },
    {
      "type": "tuning",
      "sysctl": {
        "net.ipv4.conf.all.log_martians": "1"
      }
    }
  ]
}`},
		{"§3.2.3 limited config for a thick plugin", "a-bridge-network", `{
      "cniVersion": "0.3.0",
      "type": "awesome-plugin"
}`},
		{"§3.2.4 implementation-specific network reference (no spec)", "a-bridge-network", ""},
	}
	for _, tt := range tests {
		t.Run(tt.section, func(t *testing.T) {
			ctx := testContext(t, 60*time.Second)
			if tt.config != "" && !json.Valid([]byte(tt.config)) {
				t.Fatalf("test data: config of %s is not JSON", tt.section)
			}
			nad := &nadv1.NetworkAttachmentDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: tt.name, Namespace: ns},
				Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: tt.config},
			}
			created, err := cs.NetworkAttachmentDefinitions(ns).Create(ctx, nad, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create %s/%s: %v", ns, tt.name, err)
			}
			if created.UID == "" || created.ResourceVersion == "" {
				t.Errorf("created object has no uid/resourceVersion: %+v", created.ObjectMeta)
			}

			got, err := cs.NetworkAttachmentDefinitions(ns).Get(ctx, tt.name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get %s/%s: %v", ns, tt.name, err)
			}
			if got.Spec.Config != tt.config {
				t.Errorf("read back spec.config:\n got %q\nwant %q", got.Spec.Config, tt.config)
			}
			if got.UID != created.UID {
				t.Errorf("read back uid %s, created %s", got.UID, created.UID)
			}

			// The informer sees this very object (same UID and config).
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				o, err := lister.Get(tt.name)
				if err != nil {
					return false, nil
				}
				return o.UID == created.UID && o.Spec.Config == tt.config, nil
			})
			if err != nil {
				t.Fatalf("informer did not see %s/%s (uid %s): %v", ns, tt.name, created.UID, err)
			}
			listed, err := lister.List(labels.Everything())
			if err != nil || len(listed) != 1 || listed[0].Name != tt.name {
				t.Errorf("lister.List(%s) = %d objects (%v), want exactly %s", ns, len(listed), err, tt.name)
			}
			list, err := cs.NetworkAttachmentDefinitions(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != 1 || list.Items[0].Spec.Config != tt.config {
				t.Errorf("List(%s) = %+v (%v), want exactly the created object", ns, list, err)
			}

			if err := cs.NetworkAttachmentDefinitions(ns).Delete(ctx, tt.name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete %s/%s: %v", ns, tt.name, err)
			}
			if _, err := cs.NetworkAttachmentDefinitions(ns).Get(ctx, tt.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get after delete: err = %v, want NotFound", err)
			}
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				_, err := lister.Get(tt.name)
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				t.Fatalf("informer still has %s/%s after delete: %v", ns, tt.name, err)
			}
		})
	}
}

// TestNetworkAttachmentDefinitionNames: the API server accepts the object
// names of spec §3.3.1 and rejects names that are not DNS-1123 (§3.3) with an
// Invalid error naming metadata.name.
func TestNetworkAttachmentDefinitionNames(t *testing.T) {
	ns := newNamespace(t)
	cs := testCluster.multi.K8sCniCncfIoV1()
	tests := []struct {
		name  string
		valid bool
	}{
		{"attachment-name", true},               // §3.3.1
		{"a0-" + strings.Repeat("b", 59), true}, // 62 characters
		{"Upper-Case", false},
		{"under_score", false},
		{"-leading-dash", false},
		{"trailing-dash-", false},
		{"has space", false},
		{"example-namespace.attachment-name.", false},
		{strings.Repeat("a", 254), false}, // longer than a DNS-1123 subdomain
	}
	for _, tt := range tests {
		label := tt.name
		if len(label) > 20 {
			label = fmt.Sprintf("%s...(%d)", label[:12], len(tt.name))
		}
		t.Run(label, func(t *testing.T) {
			ctx := testContext(t, 30*time.Second)
			nad := &nadv1.NetworkAttachmentDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: tt.name, Namespace: ns},
				Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"bridge"}`},
			}
			_, err := cs.NetworkAttachmentDefinitions(ns).Create(ctx, nad, metav1.CreateOptions{})
			if tt.valid {
				if err != nil {
					t.Fatalf("create %q: %v, want accepted", tt.name, err)
				}
				if err := cs.NetworkAttachmentDefinitions(ns).Delete(ctx, tt.name, metav1.DeleteOptions{}); err != nil {
					t.Errorf("delete %q: %v", tt.name, err)
				}
				return
			}
			if err == nil {
				_ = cs.NetworkAttachmentDefinitions(ns).Delete(ctx, tt.name, metav1.DeleteOptions{})
				t.Fatalf("create %q: accepted, want rejected by the API server", tt.name)
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("create %q: %v is not an API server error (rejected on the client?)", tt.name, err)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("create %q: reason %s (%v), want Invalid", tt.name, apierrors.ReasonForError(err), err)
			}
			if !strings.Contains(err.Error(), "metadata.name") {
				t.Errorf("create %q: error %q does not name metadata.name", tt.name, err)
			}
		})
	}
}

// TestIPAMClaimStatusSubresource: an IPAMClaim (spec §8.2.1 example) can be
// created; its status is written only through the status subresource (§8.2:
// the IPAM plugin's part), and spec only through the main resource.
func TestIPAMClaimStatusSubresource(t *testing.T) {
	ns := newNamespace(t)
	ctx := testContext(t, 60*time.Second)
	claims := testCluster.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns)

	claim := &v1alpha1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-a.tenantblue.net1", Namespace: ns},
		Spec:       v1alpha1.IPAMClaimSpec{Network: "tenantblue", Interface: "net1"},
	}
	created, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create IPAMClaim: %v", err)
	}
	if len(created.Status.IPs) != 0 {
		t.Errorf("new claim has status.ips %v, want none", created.Status.IPs)
	}

	// Status written with an Update of the main resource is ignored.
	withStatus := created.DeepCopy()
	withStatus.Status.IPs = []string{"10.0.0.9/24"}
	updated, err := claims.Update(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update IPAMClaim: %v", err)
	}
	if len(updated.Status.IPs) != 0 {
		t.Errorf("Update changed status.ips to %v; want status only through the status subresource", updated.Status.IPs)
	}

	// UpdateStatus writes status and ignores spec changes.
	want := []string{"10.128.20.8/24", "fd10:128:20::8/64"}
	toStatus := updated.DeepCopy()
	toStatus.Status.IPs = want
	toStatus.Spec.Interface = "net9"
	afterStatus, err := claims.UpdateStatus(ctx, toStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	got, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get IPAMClaim: %v", err)
	}
	if !slices.Equal(got.Status.IPs, want) {
		t.Errorf("status.ips = %v, want %v", got.Status.IPs, want)
	}
	if got.Spec.Interface != "net1" {
		t.Errorf("spec.interface = %q after UpdateStatus, want net1 (unchanged)", got.Spec.Interface)
	}
	if got.ResourceVersion != afterStatus.ResourceVersion {
		t.Errorf("resourceVersion %s, UpdateStatus returned %s", got.ResourceVersion, afterStatus.ResourceVersion)
	}
	prefixes, err := got.Status.Prefixes()
	if err != nil || len(prefixes) != 2 {
		t.Errorf("Prefixes() = %v, %v; want two prefixes", prefixes, err)
	}

	if err := claims.Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete IPAMClaim: %v", err)
	}
	if _, err := claims.Get(ctx, claim.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}
