package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/nadlookup"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
)

// lagAPI is an API server stand-in whose NAD list (the informer's first)
// can be held back: List waits until release is closed (nil: answers at
// once) and returns listed; GET answers from stored, the API server's
// current objects; the watch never delivers an event (the informer lags).
// It implements the generated clientset's interface for the NAD client
// only (the other methods are the nil embedded interface's).
type lagAPI struct {
	versioned.Interface
	release <-chan struct{}
	listed  []nadv1.NetworkAttachmentDefinition

	mu     sync.Mutex
	stored map[string]*nadv1.NetworkAttachmentDefinition
	gets   int
}

func (f *lagAPI) K8sCniCncfIoV1() nadclient.K8sCniCncfIoV1Interface { return lagGroup{f: f} }

// lagGroup is lagAPI's k8s.cni.cncf.io/v1 client.
type lagGroup struct {
	nadclient.K8sCniCncfIoV1Interface
	f *lagAPI
}

func (g lagGroup) NetworkAttachmentDefinitions(ns string) nadclient.NetworkAttachmentDefinitionInterface {
	return &lagNADClient{f: g.f, ns: ns}
}

// IsWatchListSemanticsUnSupported: the informer lists, then watches.
func (lagGroup) IsWatchListSemanticsUnSupported() bool { return true }

func (f *lagAPI) getCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

type lagNADClient struct {
	nadclient.NetworkAttachmentDefinitionInterface
	f  *lagAPI
	ns string
}

func (c *lagNADClient) List(ctx context.Context, _ metav1.ListOptions) (*nadv1.NetworkAttachmentDefinitionList, error) {
	if c.f.release != nil {
		select {
		case <-c.f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &nadv1.NetworkAttachmentDefinitionList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: c.f.listed}, nil
}

func (c *lagNADClient) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func (c *lagNADClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*nadv1.NetworkAttachmentDefinition, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.gets++
	if n, ok := c.f.stored[c.ns+"/"+name]; ok {
		return n.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(nadv1.Resource(nadv1.NetworkAttachmentDefinitionResource), name)
}

func testNAD(ns, name string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"bridge"}`},
	}
}

// startLookup starts the NAD informer over api, as Run does, and returns
// the lookup Run gives the engine (nadLookup), with its metrics.
func startLookup(t *testing.T, api *lagAPI, wait time.Duration) (*nadlookup.Lookup, cache.SharedIndexInformer, *metrics) {
	t.Helper()
	client := api.K8sCniCncfIoV1()
	informer, err := newNADInformer(client)
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		informer.RunWithContext(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return nadLookup(client, informer, wait, m), informer, m
}

func waitSynced(t *testing.T, inf cache.SharedIndexInformer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
}

func counter(t *testing.T, m *metrics, name, result string) float64 {
	t.Helper()
	v, ok := metricValue(t, m, name, map[string]string{"result": result})
	if !ok {
		t.Fatalf("metric %s{result=%q} missing", name, result)
	}
	return v
}

// A NAD created in the API server that the synced informer has not
// received yet (applied together with its pod) is read with one live GET,
// counted in multinet_nad_live_lookups_total{result="found"}; a NAD the
// cache has costs no GET.
func TestNADLookupCacheMiss(t *testing.T) {
	api := &lagAPI{
		listed: []nadv1.NetworkAttachmentDefinition{*testNAD("ns1", "cached")},
		stored: map[string]*nadv1.NetworkAttachmentDefinition{"ns1/cached": testNAD("ns1", "cached"), "ns1/fresh": testNAD("ns1", "fresh")},
	}
	lookup, inf, m := startLookup(t, api, 10*time.Second)
	waitSynced(t, inf)

	got, err := lookup.Get(context.Background(), "ns1", "fresh")
	if err != nil || got.Name != "fresh" {
		t.Fatalf("Get(ns1/fresh) = %v, %v; want the NAD from the API server", got, err)
	}
	if _, err := lookup.Get(context.Background(), "ns1", "cached"); err != nil {
		t.Fatalf("Get(ns1/cached): %v", err)
	}
	if n := api.getCount(); n != 1 {
		t.Errorf("%d live GETs, want 1 (ns1/fresh)", n)
	}
	if v := counter(t, m, "multinet_nad_live_lookups_total", "found"); v != 1 {
		t.Errorf("multinet_nad_live_lookups_total{result=found} = %v, want 1", v)
	}
}

// Before the informer's first list (multinetd just restarted, the runtime
// already calling ADD) the lookup waits, then answers from the cache:
// no "not found", no live GET; the wait is observed in
// multinet_nad_sync_wait_seconds{result="synced"}.
func TestNADLookupWaitsForSync(t *testing.T) {
	release := make(chan struct{})
	api := &lagAPI{release: release, listed: []nadv1.NetworkAttachmentDefinition{*testNAD("ns1", "net-a")}}
	lookup, inf, m := startLookup(t, api, 10*time.Second)

	type answer struct {
		nad *nadv1.NetworkAttachmentDefinition
		err error
	}
	done := make(chan answer, 1)
	go func() {
		n, err := lookup.Get(context.Background(), "ns1", "net-a")
		done <- answer{n, err}
	}()
	select {
	case a := <-done:
		t.Fatalf("Get returned before the informer synced: %v, %v", a.nad, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	if inf.HasSynced() {
		t.Fatal("the informer synced before its list was released")
	}
	close(release)
	select {
	case a := <-done:
		if a.err != nil || a.nad.Name != "net-a" {
			t.Fatalf("Get after sync = %v, %v; want ns1/net-a", a.nad, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get did not return after the informer synced")
	}
	if n := api.getCount(); n != 0 {
		t.Errorf("%d live GETs, want 0", n)
	}
	if v := counter(t, m, "multinet_nad_sync_wait_seconds", "synced"); v != 1 {
		t.Errorf("multinet_nad_sync_wait_seconds{result=synced} count = %v, want 1", v)
	}
}

// The wait is bounded: an informer that never syncs gives, after the
// bound, an error naming the NAD and saying the cache has not synced
// (nadlookup.ErrNotSynced), not "not found"; the request's deadline bounds
// it too.
func TestNADLookupSyncWaitBounded(t *testing.T) {
	never := make(chan struct{})
	api := &lagAPI{release: never, stored: map[string]*nadv1.NetworkAttachmentDefinition{"ns1/net-a": testNAD("ns1", "net-a")}}
	lookup, _, m := startLookup(t, api, 200*time.Millisecond)

	start := time.Now()
	_, err := lookup.Get(context.Background(), "ns1", "net-a")
	d := time.Since(start)
	if !errors.Is(err, nadlookup.ErrNotSynced) || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "ns1/net-a") || !strings.Contains(err.Error(), "200ms") {
		t.Fatalf("Get = %v, want ErrNotSynced naming ns1/net-a and the 200ms bound", err)
	}
	if d < 200*time.Millisecond || d > 10*time.Second {
		t.Errorf("Get gave up after %v, want after 200ms", d)
	}
	if v := counter(t, m, "multinet_nad_sync_wait_seconds", "not_synced"); v != 1 {
		t.Errorf("multinet_nad_sync_wait_seconds{result=not_synced} count = %v, want 1", v)
	}

	long, _, _ := startLookup(t, &lagAPI{release: never}, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = long.Get(ctx, "ns1", "net-a")
	if !errors.Is(err, nadlookup.ErrNotSynced) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with a 100ms deadline = %v, want ErrNotSynced and the deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Get with a 100ms deadline took %v", d)
	}
	if n := api.getCount(); n != 0 {
		t.Errorf("%d live GETs before the cache synced, want 0", n)
	}
}

// A NAD that exists neither in the cache nor in the API server is NotFound
// after one live GET, counted as not_found.
func TestNADLookupNotFound(t *testing.T) {
	api := &lagAPI{}
	lookup, inf, m := startLookup(t, api, 10*time.Second)
	waitSynced(t, inf)
	if _, err := lookup.Get(context.Background(), "ns1", "gone"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get(ns1/gone) = %v, want NotFound", err)
	}
	if v := counter(t, m, "multinet_nad_live_lookups_total", "not_found"); v != 1 || api.getCount() != 1 {
		t.Errorf("not_found = %v after %d GETs, want 1 and 1", v, api.getCount())
	}
}
