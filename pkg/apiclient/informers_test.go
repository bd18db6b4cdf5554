package apiclient_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/pkg/apiclient"
)

func names[T metav1.Object](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

func startInformer(t *testing.T, ctx context.Context, inf cache.SharedIndexInformer) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestNetworkAttachmentDefinitionInformerAndLister(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	cs := newClient(t, f)
	for _, n := range []*nadv1.NetworkAttachmentDefinition{
		nad("ns1", "net-b", "{}", nil), nad("ns1", "net-a", "{}", nil), nad("ns2", "net-c", "", nil),
	} {
		if _, err := cs.NetworkAttachmentDefinitions(n.Namespace).Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	inf := apiclient.NewNetworkAttachmentDefinitionInformer(cs, metav1.NamespaceAll, 0, nil)
	lister := apiclient.NewNetworkAttachmentDefinitionLister(inf.GetIndexer())
	startInformer(t, ctx, inf)
	// The cache was filled by a streaming list, as from kube-apiserver.
	if gets := informerGets(f); len(gets) != 1 || !strings.Contains(gets[0].Query, "sendInitialEvents=true") {
		t.Errorf("informer requests %+v, want one watch with sendInitialEvents=true", gets)
	}

	all, err := lister.List(metav1.NamespaceAll)
	if err != nil || !slices.Equal(names(all), []string{"ns1/net-a", "ns1/net-b", "ns2/net-c"}) {
		t.Errorf("List(all) = %v, %v; want all three sorted", names(all), err)
	}
	ns1, err := lister.List("ns1")
	if err != nil || !slices.Equal(names(ns1), []string{"ns1/net-a", "ns1/net-b"}) {
		t.Errorf("List(ns1) = %v, %v", names(ns1), err)
	}
	if none, err := lister.List("ns3"); err != nil || len(none) != 0 {
		t.Errorf("List(ns3) = %v, %v; want empty", names(none), err)
	}
	got, err := lister.Get("ns2", "net-c")
	if err != nil || got.Name != "net-c" || got.Spec.Config != "" {
		t.Errorf("Get(ns2, net-c) = %+v, %v", got, err)
	}
	if _, err := lister.Get("ns1", "net-c"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(ns1, net-c) err = %v, want NotFound", err)
	}

	// Changes reach the cache through the watch.
	c := cs.NetworkAttachmentDefinitions("ns1")
	if _, err := c.Create(ctx, nad("ns1", "net-d", `{"type":"macvlan"}`, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "net-d in the cache", func() bool {
		n, err := lister.Get("ns1", "net-d")
		return err == nil && n.Spec.Config == `{"type":"macvlan"}`
	})
	if err := c.Delete(ctx, "net-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "net-a gone from the cache", func() bool {
		_, err := lister.Get("ns1", "net-a")
		return apierrors.IsNotFound(err)
	})
}

func TestIPAMClaimInformerNamespaceAndTweak(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	cs := newClient(t, f)
	mk := func(ns, name, owner string) {
		t.Helper()
		claim := &v1alpha1.IPAMClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"owner": owner}},
			Spec:       v1alpha1.IPAMClaimSpec{Network: "tenantred", Interface: "eth1"},
		}
		if _, err := cs.IPAMClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("ns1", "vm-a.tenantred", "vm-a")
	mk("ns1", "vm-b.tenantred", "vm-b")
	mk("ns2", "vm-a.tenantred", "vm-a")

	inf := apiclient.NewFilteredIPAMClaimInformer(cs, "ns1", 0,
		cache.Indexers{"network": func(obj any) ([]string, error) {
			return []string{obj.(*v1alpha1.IPAMClaim).Spec.Network}, nil
		}},
		func(o *metav1.ListOptions) { o.LabelSelector = "owner=vm-a" })
	lister := apiclient.NewIPAMClaimLister(inf.GetIndexer())
	startInformer(t, ctx, inf)

	all, err := lister.List(metav1.NamespaceAll)
	if err != nil || !slices.Equal(names(all), []string{"ns1/vm-a.tenantred"}) {
		t.Errorf("List = %v, %v; want only ns1/vm-a.tenantred (namespace ns1, owner=vm-a)", names(all), err)
	}
	// The caller's indexer is kept next to the namespace index.
	byNet, err := inf.GetIndexer().ByIndex("network", "tenantred")
	if err != nil || len(byNet) != 1 {
		t.Errorf("ByIndex(network) = %d objects, %v", len(byNet), err)
	}

	// Status written by the IPAM plugin reaches the cache.
	claim, err := lister.Get("ns1", "vm-a.tenantred")
	if err != nil {
		t.Fatal(err)
	}
	upd := claim.DeepCopy()
	upd.Status.IPs = []string{"10.0.0.5/24"}
	if _, err := cs.IPAMClaims("ns1").UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "status in the cache", func() bool {
		c, err := lister.Get("ns1", "vm-a.tenantred")
		return err == nil && slices.Equal(c.Status.IPs, []string{"10.0.0.5/24"})
	})
	if len(claim.Status.IPs) != 0 {
		t.Error("the cached object handed out before the update changed")
	}

	for _, r := range f.requestLog() {
		if r.Method == "GET" && r.Path != "/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims" {
			t.Errorf("informer requested %s, want only namespace ns1", r.Path)
		}
	}
}

// informerGets returns the GET requests the fake API server saw.
func informerGets(f *fakeAPIServer) []fakeRequest {
	var gets []fakeRequest
	for _, r := range f.requestLog() {
		if r.Method == "GET" {
			gets = append(gets, r)
		}
	}
	return gets
}

// noStreamingList is a client that declares, as client-go's fake clientsets
// do, that it cannot serve a streaming list.
type noStreamingList struct{ apiclient.Interface }

func (noStreamingList) IsWatchListSemanticsUnSupported() bool { return true }

// An informer over such a client lists, then watches.
func TestInformerListsWhenClientCannotStream(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	cs := newClient(t, f)
	if _, err := cs.NetworkAttachmentDefinitions("ns1").Create(ctx, nad("ns1", "net-a", "{}", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	inf := apiclient.NewNetworkAttachmentDefinitionInformer(noStreamingList{cs}, metav1.NamespaceAll, 0, nil)
	startInformer(t, ctx, inf)
	if _, err := apiclient.NewNetworkAttachmentDefinitionLister(inf.GetIndexer()).Get("ns1", "net-a"); err != nil {
		t.Errorf("Get(ns1, net-a) after sync: %v", err)
	}
	if gets := informerGets(f); len(gets) == 0 || strings.Contains(gets[0].Query, "watch=true") {
		t.Errorf("informer requests %+v, want a list first", gets)
	}
}

// A lister over an indexer that holds another type errors, never panics.
func TestListerWrongType(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := idx.Add(&v1alpha1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "x"}}); err != nil {
		t.Fatal(err)
	}
	l := apiclient.NewNetworkAttachmentDefinitionLister(idx)
	if _, err := l.Get("ns1", "x"); err == nil || apierrors.IsNotFound(err) {
		t.Errorf("Get err = %v, want a type error", err)
	}
	if _, err := l.List("ns1"); err == nil {
		t.Error("List: no error for a wrong type")
	}
}

// A lister over an indexer without a namespace index still filters by
// namespace.
func TestListerWithoutNamespaceIndex(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*nadv1.NetworkAttachmentDefinition{nad("ns1", "a", "", nil), nad("ns2", "b", "", nil)} {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	got, err := apiclient.NewNetworkAttachmentDefinitionLister(idx).List("ns2")
	if err != nil || !slices.Equal(names(got), []string{"ns2/b"}) {
		t.Errorf("List(ns2) = %v, %v", names(got), err)
	}
}
