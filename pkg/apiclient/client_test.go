package apiclient_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/pkg/apiclient"
)

func newClient(t *testing.T, f *fakeAPIServer) *apiclient.Clientset {
	t.Helper()
	cs, err := apiclient.NewForConfig(f.config())
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	return cs
}

func nad(ns, name, config string, lbls map[string]string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}

func TestNetworkAttachmentDefinitionCRUD(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	c := newClient(t, f).NetworkAttachmentDefinitions("ns1")

	const cfg = `{"cniVersion":"1.0.0","type":"bridge","bridge":"br0"}`
	created, err := c.Create(ctx, nad("ns1", "net-a", cfg, map[string]string{"tier": "data"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if created.Spec.Config != cfg || created.ResourceVersion == "" || created.UID == "" {
		t.Errorf("Create returned %+v, want the stored object with resourceVersion and uid", created)
	}
	// §3.2.4: a NAD without spec.config is valid.
	if _, err := c.Create(ctx, nad("ns1", "net-b", "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create without config: %v", err)
	}
	if _, err := c.Create(ctx, nad("ns1", "net-a", cfg, nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create err = %v, want AlreadyExists", err)
	}

	got, err := c.Get(ctx, "net-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Name != "net-a" || got.Namespace != "ns1" || got.Spec.Config != cfg || got.Labels["tier"] != "data" {
		t.Errorf("Get = %+v", got)
	}

	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 || list.ResourceVersion == "" {
		t.Fatalf("List = %+v, %v; want 2 items and a resourceVersion", list, err)
	}
	list, err = c.List(ctx, metav1.ListOptions{LabelSelector: "tier=data"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "net-a" {
		t.Fatalf("List tier=data = %+v, %v; want net-a only", list, err)
	}

	got.Spec.Config = `{"cniVersion":"1.0.0","type":"macvlan"}`
	updated, err := c.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if updated.Spec.Config != got.Spec.Config || updated.ResourceVersion == got.ResourceVersion {
		t.Errorf("Update = %+v, want new config and a new resourceVersion", updated)
	}
	// got still carries the old resourceVersion.
	if _, err := c.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("Update with stale resourceVersion err = %v, want Conflict", err)
	}

	patched, err := c.Patch(ctx, "net-a", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+nadv1.ResourceNameAnnotation+`":"example.com/pool"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if patched.Annotations[nadv1.ResourceNameAnnotation] != "example.com/pool" || patched.Spec.Config != updated.Spec.Config {
		t.Errorf("Patch = %+v", patched)
	}

	if err := c.Delete(ctx, "net-a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.Get(ctx, "net-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete err = %v, want NotFound", err)
	}
	if err := c.Delete(ctx, "net-a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second Delete err = %v, want NotFound", err)
	}

	// Wire: the REST paths of §3.1 (group k8s.cni.cncf.io, version v1,
	// plural network-attachment-definitions), JSON only, never protobuf.
	const base = "/apis/k8s.cni.cncf.io/v1/namespaces/ns1/network-attachment-definitions"
	wantCalls := []struct{ method, path string }{
		{"POST", base}, {"POST", base}, {"POST", base},
		{"GET", base + "/net-a"}, {"GET", base}, {"GET", base},
		{"PUT", base + "/net-a"}, {"PUT", base + "/net-a"}, {"PATCH", base + "/net-a"},
		{"DELETE", base + "/net-a"}, {"GET", base + "/net-a"}, {"DELETE", base + "/net-a"},
	}
	log := f.requestLog()
	if len(log) != len(wantCalls) {
		t.Fatalf("server saw %d requests, want %d: %+v", len(log), len(wantCalls), log)
	}
	for i, w := range wantCalls {
		r := log[i]
		if r.Method != w.method || r.Path != w.path {
			t.Errorf("request %d = %s %s, want %s %s", i, r.Method, r.Path, w.method, w.path)
		}
		if r.Accept != "application/json" {
			t.Errorf("request %d Accept = %q, want application/json", i, r.Accept)
		}
		if strings.Contains(r.ContentType, "protobuf") {
			t.Errorf("request %d Content-Type = %q", i, r.ContentType)
		}
	}
	if !strings.Contains(log[5].Query, "labelSelector=tier%3Ddata") {
		t.Errorf("List query = %q, want labelSelector=tier%%3Ddata", log[5].Query)
	}
}

// §8.2: the workload controller writes spec, the IPAM plugin writes status
// through the status subresource.
func TestIPAMClaimSpecAndStatus(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	c := newClient(t, f).IPAMClaims("ns1")

	claim := &v1alpha1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-a.tenantred.eth1", Namespace: "ns1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "vm-a", UID: "u1"}}},
		Spec: v1alpha1.IPAMClaimSpec{Network: "tenantred", Interface: "eth1"},
	}
	created, err := c.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	created.Status.IPs = []string{"10.128.20.8/24", "fd10:128:20::8/64"}
	withStatus, err := c.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if len(withStatus.Status.IPs) != 2 || withStatus.Spec.Network != "tenantred" {
		t.Errorf("UpdateStatus = %+v", withStatus)
	}
	prefixes, err := withStatus.Status.Prefixes()
	if err != nil || len(prefixes) != 2 {
		t.Errorf("Prefixes = %v, %v", prefixes, err)
	}

	// Update of the main resource leaves status alone.
	withStatus.Spec.Interface = "eth2"
	withStatus.Status.IPs = []string{"192.0.2.1/24"}
	updated, err := c.Update(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if updated.Spec.Interface != "eth2" || len(updated.Status.IPs) != 2 {
		t.Errorf("Update = %+v, want new spec and the old status", updated)
	}

	list, err := newClient(t, f).IPAMClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("List all namespaces = %+v, %v", list, err)
	}
	if err := c.Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}

	const base = "/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims"
	want := []struct{ method, path string }{
		{"POST", base},
		{"PUT", base + "/vm-a.tenantred.eth1/status"},
		{"PUT", base + "/vm-a.tenantred.eth1"},
		{"GET", "/apis/k8s.cni.cncf.io/v1alpha1/ipamclaims"},
		{"DELETE", base + "/vm-a.tenantred.eth1"},
	}
	log := f.requestLog()
	if len(log) != len(want) {
		t.Fatalf("server saw %+v, want %d requests", log, len(want))
	}
	for i, w := range want {
		if log[i].Method != w.method || log[i].Path != w.path {
			t.Errorf("request %d = %s %s, want %s %s", i, log[i].Method, log[i].Path, w.method, w.path)
		}
	}
}

func TestWatch(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	c := newClient(t, f).NetworkAttachmentDefinitions("ns1")

	w, err := c.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()
	if _, err := c.Create(ctx, nad("ns1", "net-a", "{}", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "net-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []watch.EventType{watch.Added, watch.Deleted} {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s", want)
			}
			n, isNAD := ev.Object.(*nadv1.NetworkAttachmentDefinition)
			if ev.Type != want || !isNAD || n.Name != "net-a" {
				t.Fatalf("event %s %T, want %s of *NetworkAttachmentDefinition net-a", ev.Type, ev.Object, want)
			}
		case <-ctx.Done():
			t.Fatalf("no %s event: %v", want, ctx.Err())
		}
	}
	log := f.requestLog()
	if !strings.Contains(log[0].Query, "watch=true") {
		t.Errorf("watch query = %q, want watch=true", log[0].Query)
	}
}

func TestServerErrorIsAPIError(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	_, err := newClient(t, f).NetworkAttachmentDefinitions("fail").Get(ctx, "x", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "injected failure") {
		t.Errorf("err = %v, want an InternalError carrying the server's message", err)
	}
}

// Bad arguments fail with an error naming the argument, without a request.
func TestArgumentErrors(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	cs := newClient(t, f)
	n := cs.NetworkAttachmentDefinitions("ns1")
	ic := cs.IPAMClaims("ns1")
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"Get empty name", func() error { _, err := n.Get(ctx, "", metav1.GetOptions{}); return err }, "name is empty"},
		{"Delete empty name", func() error { return n.Delete(ctx, "", metav1.DeleteOptions{}) }, "name is empty"},
		{"Create nil", func() error { _, err := n.Create(ctx, nil, metav1.CreateOptions{}); return err }, "object is nil"},
		{"Update nil", func() error { _, err := n.Update(ctx, nil, metav1.UpdateOptions{}); return err }, "object is nil"},
		{"Update no name", func() error { _, err := n.Update(ctx, nad("ns1", "", "", nil), metav1.UpdateOptions{}); return err }, "metadata.name is empty"},
		{"UpdateStatus nil", func() error { _, err := ic.UpdateStatus(ctx, nil, metav1.UpdateOptions{}); return err }, "object is nil"},
		{"UpdateStatus no name", func() error {
			_, err := ic.UpdateStatus(ctx, &v1alpha1.IPAMClaim{}, metav1.UpdateOptions{})
			return err
		}, "metadata.name is empty"},
		{"Patch empty name", func() error {
			_, err := ic.Patch(ctx, "", types.MergePatchType, []byte("{}"), metav1.PatchOptions{})
			return err
		}, "name is empty"},
		{"Patch empty type", func() error { _, err := ic.Patch(ctx, "x", "", []byte("{}"), metav1.PatchOptions{}); return err }, "patch type is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if log := f.requestLog(); len(log) != 0 {
		t.Errorf("bad arguments reached the server: %+v", log)
	}
	if _, err := apiclient.NewForConfig(nil); err == nil || !strings.Contains(err.Error(), "rest config is nil") {
		t.Errorf("NewForConfig(nil) err = %v", err)
	}
	if _, err := apiclient.NewForConfigAndClient(&rest.Config{Host: f.srv.URL}, nil); err == nil || !strings.Contains(err.Error(), "http client is nil") {
		t.Errorf("NewForConfigAndClient(nil client) err = %v", err)
	}
}

// NewForConfig leaves the caller's config alone.
func TestNewForConfigDoesNotModifyConfig(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	if _, err := apiclient.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.GroupVersion != nil || cfg.APIPath != "" || cfg.ContentType != "" || cfg.NegotiatedSerializer != nil {
		t.Errorf("config was modified: %+v", cfg)
	}
}
