package nadlookup_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/nadlookup"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
)

func nad(ns, name string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: nadv1.SchemeGroupVersion.String(), Kind: nadv1.NetworkAttachmentDefinitionKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: "{}"},
	}
}

// lister returns a generated lister over an indexer holding nads.
func lister(t *testing.T, nads ...*nadv1.NetworkAttachmentDefinition) nadlisters.NetworkAttachmentDefinitionLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, n := range nads {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return nadlisters.NewNetworkAttachmentDefinitionLister(idx)
}

// request is one request the test API server saw.
type request struct{ method, path, accept string }

// apiServer answers GETs of NetworkAttachmentDefinitions from stored, as
// kube-apiserver does (JSON; a metav1.Status 404 when absent), and logs
// every request.
type apiServer struct {
	srv    *httptest.Server
	stored map[string]*nadv1.NetworkAttachmentDefinition // key: path

	mu   sync.Mutex
	reqs []request
}

func newAPIServer(t *testing.T, nads ...*nadv1.NetworkAttachmentDefinition) *apiServer {
	t.Helper()
	a := &apiServer{stored: map[string]*nadv1.NetworkAttachmentDefinition{}}
	for _, n := range nads {
		a.stored["/apis/k8s.cni.cncf.io/v1/namespaces/"+n.Namespace+"/network-attachment-definitions/"+n.Name] = n
	}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.reqs = append(a.reqs, request{r.Method, r.URL.Path, r.Header.Get("Accept")})
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		n, ok := a.stored[r.URL.Path]
		if r.Method != http.MethodGet || !ok {
			name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
			st := apierrors.NewNotFound(nadv1.Resource(nadv1.NetworkAttachmentDefinitionResource), name).Status()
			st.APIVersion, st.Kind = "v1", "Status"
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(&st)
			return
		}
		_ = json.NewEncoder(w).Encode(n)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *apiServer) requests() []request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]request(nil), a.reqs...)
}

// Lookup over a synced cache that lags behind the API server: a NAD the
// cache does not have is GET from the API server (LiveGet through the
// generated clientset, as JSON), once per Get, and reported; a missing NAD
// is NotFound (reported); a cached NAD costs no request; the API server
// failing is an error naming the NAD, not NotFound.
func TestLookupLiveGET(t *testing.T) {
	api := newAPIServer(t, nad("ns1", "fresh"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := versioned.NewForConfig(&rest.Config{Host: api.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]int{}
	l := &nadlookup.Lookup{
		Cache:  lister(t, nad("ns1", "cached")),
		Live:   nadlookup.LiveGet(cs.K8sCniCncfIoV1()),
		Synced: func() bool { return true },
		OnLive: func(r string) { results[r]++ },
	}

	if got, err := l.Get(ctx, "ns1", "fresh"); err != nil || got.Name != "fresh" {
		t.Fatalf("Get(ns1/fresh) = %v, %v; want it from the API server", got, err)
	}
	if _, err := l.Get(ctx, "ns1", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(ns1/gone) = %v, want NotFound", err)
	}
	if _, err := l.Get(ctx, "ns1", "cached"); err != nil {
		t.Errorf("Get(ns1/cached): %v", err)
	}
	reqs := api.requests()
	const path = "/apis/k8s.cni.cncf.io/v1/namespaces/ns1/network-attachment-definitions/"
	if len(reqs) != 2 || reqs[0].method != "GET" || reqs[0].path != path+"fresh" || reqs[1].path != path+"gone" {
		t.Errorf("requests %+v, want the GETs of ns1/fresh and ns1/gone only", reqs)
	}
	for _, r := range reqs {
		// client-go's default for a config without content types:
		// JSON first (CRDs have no protobuf), */* as a fallback.
		if !strings.HasPrefix(r.accept, "application/json") {
			t.Errorf("%s %s: Accept %q, want application/json first (CRDs have no protobuf)", r.method, r.path, r.accept)
		}
	}
	if results[nadlookup.LiveFound] != 1 || results[nadlookup.LiveNotFound] != 1 || results[nadlookup.LiveError] != 0 {
		t.Errorf("live results %v, want found 1, not_found 1", results)
	}

	api.srv.Close() // the API server is gone
	l.LiveTimeout = 5 * time.Second
	_, err = l.Get(ctx, "ns1", "other")
	if err == nil || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "ns1/other") || results[nadlookup.LiveError] != 1 {
		t.Errorf("Get with the API server down = %v (results %v), want an error naming ns1/other counted as error", err, results)
	}
}

// Without Live the cache's NotFound is the answer, and no live read is
// reported.
func TestLookupWithoutLive(t *testing.T) {
	var lives int
	l := &nadlookup.Lookup{Cache: lister(t, nad("ns1", "cached")), OnLive: func(string) { lives++ }}
	if _, err := l.Get(context.Background(), "ns1", "cached"); err != nil {
		t.Errorf("Get(ns1/cached): %v", err)
	}
	if _, err := l.Get(context.Background(), "ns1", "gone"); !apierrors.IsNotFound(err) || lives != 0 {
		t.Errorf("Get(ns1/gone) = %v after %d live reads, want NotFound and none", err, lives)
	}
}

// A never-syncing cache: Get gives ErrNotSynced after SyncWait, without
// reading the cache or the API server; a context that ends first ends the
// wait with ErrNotSynced and the context's error.
func TestLookupNotSynced(t *testing.T) {
	var lives int
	var waits []bool
	l := &nadlookup.Lookup{
		Cache: lister(t),
		Live: func(context.Context, string, string) (*nadv1.NetworkAttachmentDefinition, error) {
			lives++
			return nil, nil
		},
		Synced:     func() bool { return false },
		SyncWait:   100 * time.Millisecond,
		OnSyncWait: func(_ time.Duration, synced bool) { waits = append(waits, synced) },
	}
	_, err := l.Get(context.Background(), "ns1", "x")
	if !errors.Is(err, nadlookup.ErrNotSynced) || !strings.Contains(err.Error(), "ns1/x") || lives != 0 || len(waits) != 1 || waits[0] {
		t.Errorf("Get = %v, %d live GETs, waits %v; want ErrNotSynced naming ns1/x, 0, [false]", err, lives, waits)
	}

	l.SyncWait = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := l.Get(ctx, "ns1", "x"); !errors.Is(err, nadlookup.ErrNotSynced) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with a 100ms deadline = %v, want ErrNotSynced and the deadline", err)
	}
}
