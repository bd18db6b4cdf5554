package attach

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/nadlookup"
	"github.com/multinet/multinet/internal/testing/cnitest"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
)

// lagEnv is an env whose engine reads NADs as multinetd does
// (nadlookup.Lookup) from an informer cache that lags behind the API
// server: cached (the informer's indexer, read through the generated
// lister) and api are separate stores, synced is the informer's HasSynced.
type lagEnv struct {
	*env
	cached cache.Indexer
	api    *fakeNADs
	synced atomic.Bool
	// apiErr, when set, is every live GET's answer (the API server fails).
	apiErr error

	mu    sync.Mutex
	live  map[string]int // live GETs by result
	waits []bool         // sync waits: synced in time?
}

func newLagEnv(t *testing.T, syncWait time.Duration) *lagEnv {
	l := &lagEnv{
		cached: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		api:    &fakeNADs{nads: map[string]*nadv1.NetworkAttachmentDefinition{}},
		live:   map[string]int{},
	}
	l.env = newEnv(t, func(o *envOptions) {
		o.NADs = &nadlookup.Lookup{
			Cache: nadlisters.NewNetworkAttachmentDefinitionLister(l.cached), Live: l.liveGet,
			Synced: l.synced.Load, SyncWait: syncWait,
			OnLive: func(r string) { l.mu.Lock(); l.live[r]++; l.mu.Unlock() },
			OnSyncWait: func(_ time.Duration, synced bool) {
				l.mu.Lock()
				l.waits = append(l.waits, synced)
				l.mu.Unlock()
			},
		}
	})
	return l
}

// cachePut delivers NAD namespace/name to the informer's cache.
func (l *lagEnv) cachePut(t *testing.T, namespace, name, config string) {
	t.Helper()
	if err := l.cached.Add(&nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}); err != nil {
		t.Fatal(err)
	}
}

// liveGet is the API server's GET.
func (l *lagEnv) liveGet(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	if l.apiErr != nil {
		return nil, l.apiErr
	}
	return l.api.Get(ctx, namespace, name)
}

// liveGETs returns the count of live GETs with result.
func (l *lagEnv) liveGETs(result string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live[result]
}

// addErr runs ADD and returns its CNI error (nil on success).
func (l *lagEnv) addErr(t *testing.T, ctx context.Context, id string, networks string) (*types.Error, error) {
	t.Helper()
	_, err := l.eng.Add(ctx, l.req(api.CmdAdd, id, l.podWithNetworks(networks)))
	if err == nil {
		return nil, nil
	}
	var te *types.Error
	if !errors.As(err, &te) {
		t.Fatalf("ADD error %v (%T) is not a CNI error", err, err)
	}
	return te, err
}

// A NAD applied together with its pod is in the API server but not yet in
// the informer's cache: ADD reads it with one live GET (counted) and
// attaches it, instead of failing with "not found". A NAD the cache has
// costs no GET.
func TestAddNADCacheMissReadsAPI(t *testing.T) {
	l := newLagEnv(t, 10*time.Second)
	l.synced.Store(true)
	l.api.put(podNS, "fresh", l.bridgeConf("fresh", ""), nil)
	cached := l.bridgeConf("cached", "")
	l.api.put(podNS, "cached", cached, nil)
	l.cachePut(t, podNS, "cached", cached)

	id := "ctr-" + cnitest.UniqueName("")
	if te, err := l.addErr(t, context.Background(), id, "fresh,cached"); err != nil {
		t.Fatalf("ADD with the NAD only in the API server: %v (code %d)", err, te.Code)
	}
	l.wantLinks("eth0", "net1", "net2")
	if got := l.liveGETs(nadlookup.LiveFound); got != 1 {
		t.Errorf("live GETs found = %d, want 1 (for ns1/fresh only)", got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waits) != 0 {
		t.Errorf("a synced cache was waited for: %v", l.waits)
	}
}

// After a restart the runtime calls ADD before the NAD informer has its
// first list: ADD waits for it and then attaches the NAD from the cache
// (no live GET).
func TestAddWaitsForNADSync(t *testing.T) {
	l := newLagEnv(t, 10*time.Second)
	conf := l.bridgeConf("net-a", "")
	l.api.put(podNS, "net-a", conf, nil)

	id := "ctr-" + cnitest.UniqueName("")
	pod := l.podWithNetworks("net-a")
	done := make(chan error, 1)
	go func() {
		_, err := l.eng.Add(context.Background(), l.req(api.CmdAdd, id, pod))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("ADD returned before the informer synced: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The informer's first list arrives.
	l.cachePut(t, podNS, "net-a", conf)
	l.synced.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ADD after the informer synced: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ADD did not return after the informer synced")
	}
	l.wantLinks("eth0", "net1")
	if n := l.liveGETs(nadlookup.LiveFound) + l.liveGETs(nadlookup.LiveNotFound) + l.liveGETs(nadlookup.LiveError); n != 0 {
		t.Errorf("%d live GETs, want none (the synced cache has the NAD)", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waits) != 1 || !l.waits[0] {
		t.Errorf("sync waits %v, want one that synced", l.waits)
	}
}

// The wait for the informer is bounded by nadSyncWait (and the request's
// deadline): an informer that never syncs fails ADD with CNI error 11 (try
// again later) naming the NAD and the cause, and no delegate runs.
func TestAddNADSyncWaitBounded(t *testing.T) {
	l := newLagEnv(t, 200*time.Millisecond)
	l.api.put(podNS, "net-a", l.bridgeConf("net-a", ""), nil)

	start := time.Now()
	te, err := l.addErr(t, context.Background(), "ctr-"+cnitest.UniqueName(""), "net-a")
	if err == nil {
		t.Fatal("ADD succeeded with an informer that never synced")
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 10*time.Second {
		t.Errorf("ADD failed after %v, want after the 200ms bound", d)
	}
	if te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, "ns1/net-a") || !strings.Contains(te.Msg, "not synced after waiting 200ms") {
		t.Errorf("ADD error code %d %q, want 11 naming ns1/net-a and the unsynced cache", te.Code, te.Msg)
	}
	if got := l.exec.of("ADD"); len(got) != 0 {
		t.Errorf("delegates ran: %v", got)
	}

	// The request's deadline, when shorter, is the bound.
	l2 := newLagEnv(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	te, err = l2.addErr(t, ctx, "ctr-"+cnitest.UniqueName(""), "net-a")
	if err == nil || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, "not synced") {
		t.Errorf("ADD with a 200ms deadline: %v, want CNI error 11 (not synced)", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("ADD with a 200ms deadline took %v", d)
	}
}

// A NAD that exists neither in the cache nor in the API server still fails
// ADD with the clear "not found" (CNI error 7), after one live GET
// (counted); an API server error is CNI error 11 naming the NAD.
func TestAddNADNotFound(t *testing.T) {
	l := newLagEnv(t, 10*time.Second)
	l.synced.Store(true)
	te, err := l.addErr(t, context.Background(), "ctr-"+cnitest.UniqueName(""), "gone")
	if err == nil {
		t.Fatal("ADD of a pod selecting a missing NAD succeeded")
	}
	if te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, "NetworkAttachmentDefinition ns1/gone not found") {
		t.Errorf("ADD error code %d %q, want 7 with \"NetworkAttachmentDefinition ns1/gone not found\"", te.Code, te.Msg)
	}
	if got := l.liveGETs(nadlookup.LiveNotFound); got != 1 {
		t.Errorf("live GETs not_found = %d, want 1", got)
	}

	l.apiErr = errors.New("etcd is down")
	te, err = l.addErr(t, context.Background(), "ctr-"+cnitest.UniqueName(""), "net-x")
	if err == nil || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, "ns1/net-x") || !strings.Contains(te.Msg, "etcd is down") {
		t.Errorf("ADD with the API server failing: %v, want CNI error 11 naming ns1/net-x and the cause", err)
	}
	if got := l.liveGETs(nadlookup.LiveError); got != 1 {
		t.Errorf("live GETs error = %d, want 1", got)
	}
}
