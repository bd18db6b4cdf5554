package apiclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/apiclient"
)

// NADLookup over a synced cache that lags behind the API server: a NAD the
// cache does not have is GET from the API server (LiveNADs), once per Get,
// and reported; a missing NAD is NotFound (reported); a cached NAD costs no
// request; the API server failing is an error naming the NAD, not NotFound.
func TestNADLookupLiveGET(t *testing.T) {
	f := newFakeAPIServer(t)
	ctx := testContext(t)
	cs := newClient(t, f)
	if _, err := cs.NetworkAttachmentDefinitions("ns1").Create(ctx, nad("ns1", "fresh", "{}", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(nad("ns1", "cached", "{}", nil)); err != nil {
		t.Fatal(err)
	}
	results := map[string]int{}
	l := &apiclient.NADLookup{
		Cache:  apiclient.NewNetworkAttachmentDefinitionLister(idx),
		Live:   apiclient.LiveNADs(cs),
		Synced: func() bool { return true },
		OnLive: func(r string) { results[r]++ },
	}
	before := len(f.requestLog())

	if got, err := l.Get(ctx, "ns1", "fresh"); err != nil || got.Name != "fresh" {
		t.Fatalf("Get(ns1/fresh) = %v, %v; want it from the API server", got, err)
	}
	if _, err := l.Get(ctx, "ns1", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(ns1/gone) = %v, want NotFound", err)
	}
	if _, err := l.Get(ctx, "ns1", "cached"); err != nil {
		t.Errorf("Get(ns1/cached): %v", err)
	}
	reqs := f.requestLog()[before:]
	if len(reqs) != 2 || reqs[0].Method != "GET" || reqs[0].Path != "/apis/k8s.cni.cncf.io/v1/namespaces/ns1/network-attachment-definitions/fresh" {
		t.Errorf("requests %+v, want the GETs of ns1/fresh and ns1/gone only", reqs)
	}
	if results[apiclient.LiveFound] != 1 || results[apiclient.LiveNotFound] != 1 || results[apiclient.LiveError] != 0 {
		t.Errorf("live results %v, want found 1, not_found 1", results)
	}

	f.srv.Close() // the API server is gone
	l.LiveTimeout = 5 * time.Second
	_, err := l.Get(ctx, "ns1", "other")
	if err == nil || apierrors.IsNotFound(err) || results[apiclient.LiveError] != 1 {
		t.Errorf("Get with the API server down = %v (results %v), want an error counted as error", err, results)
	}
}

// A never-syncing cache: Get gives ErrNotSynced after SyncWait, without
// reading the cache or the API server.
func TestNADLookupNotSynced(t *testing.T) {
	var lives int
	var waits []bool
	l := &apiclient.NADLookup{
		Cache: apiclient.NewNetworkAttachmentDefinitionLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		Live: func(context.Context, string, string) (*nadv1.NetworkAttachmentDefinition, error) {
			lives++
			return nil, nil
		},
		Synced:     func() bool { return false },
		SyncWait:   100 * time.Millisecond,
		OnSyncWait: func(_ time.Duration, synced bool) { waits = append(waits, synced) },
	}
	_, err := l.Get(context.Background(), "ns1", "x")
	if !errors.Is(err, apiclient.ErrNotSynced) || lives != 0 || len(waits) != 1 || waits[0] {
		t.Errorf("Get = %v, %d live GETs, waits %v; want ErrNotSynced, 0, [false]", err, lives, waits)
	}
}
