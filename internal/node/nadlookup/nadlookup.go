package nadlookup

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
)

// LiveFunc reads one NetworkAttachmentDefinition from the API server (a
// quorum read). Errors: the API server's (*apierrors.StatusError; NotFound
// when it does not exist) or the context's.
type LiveFunc func(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)

// LiveGet returns the LiveFunc that GETs through c (a generated clientset's
// K8sCniCncfIoV1()).
func LiveGet(c nadclient.NetworkAttachmentDefinitionsGetter) LiveFunc {
	return func(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
		return c.NetworkAttachmentDefinitions(namespace).Get(ctx, name, metav1.GetOptions{})
	}
}

// Results of a live lookup (Lookup.OnLive), the "result" label of the
// live-lookup counters of multinetd and the webhook.
const (
	LiveFound    = "found"     // the cache lagged behind the API server
	LiveNotFound = "not_found" // the NAD does not exist
	LiveError    = "error"     // the GET failed (timeout, API server error)
)

// ErrNotSynced: the informer had not delivered its first full list within
// Lookup.SyncWait or the caller's context; its cache cannot tell a missing
// NAD from one it has not received yet.
var ErrNotSynced = errors.New("informer cache not synced")

// syncPoll is how often Lookup checks Synced while it waits.
const syncPoll = 20 * time.Millisecond

// Lookup reads NetworkAttachmentDefinitions for a request that must not act
// on a cache lagging behind the API server: it waits (bounded) for the
// informer's first full list, reads the cache, and reads the API server
// once when the cache does not have the NAD (created a moment before the
// request; its watch event not delivered yet). Cache is required; set the
// fields before the first Get. Safe for concurrent use.
type Lookup struct {
	// Cache is the informer's cache: the generated lister of a
	// NetworkAttachmentDefinition informer (its Lister()), or one over an
	// indexer (nadlisters.NewNetworkAttachmentDefinitionLister).
	Cache nadlisters.NetworkAttachmentDefinitionLister
	// Live reads a NAD the cache does not have from the API server; nil
	// trusts the cache's NotFound.
	Live LiveFunc
	// LiveTimeout bounds each Live call besides the caller's context; 0:
	// the context alone.
	LiveTimeout time.Duration
	// Synced reports whether Cache holds the informer's first full list (its
	// HasSynced); nil means it always does. Until then Get waits.
	Synced func() bool
	// SyncWait bounds that wait besides the caller's context; 0: the
	// context alone.
	SyncWait time.Duration
	// OnLive, when set, is told the result of every Live call (LiveFound,
	// LiveNotFound, LiveError).
	OnLive func(result string)
	// OnSyncWait, when set, is told how long a Get waited for Synced and
	// whether the cache synced in that time; only Gets that found the
	// cache not synced wait.
	OnSyncWait func(waited time.Duration, synced bool)
}

// Get returns NAD namespace/name: from the cache, once it has synced, or
// from one live GET when the cache does not have it. The object may be the
// cache's: never modify it. Errors: NotFound (apierrors.IsNotFound) when
// the NAD does not exist (or the cache lacks it and there is no Live);
// ErrNotSynced, naming the NAD, when the cache did not sync within SyncWait
// or ctx (wrapping ctx's error then); a live GET's other errors wrapped,
// naming the NAD; the cache's errors other than NotFound as they are.
func (l *Lookup) Get(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	if err := l.waitSynced(ctx); err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", namespace, name, err)
	}
	nad, err := l.Cache.NetworkAttachmentDefinitions(namespace).Get(name)
	if err == nil || !apierrors.IsNotFound(err) || l.Live == nil {
		return nad, err
	}
	if l.LiveTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.LiveTimeout)
		defer cancel()
	}
	nad, err = l.Live(ctx, namespace, name)
	switch {
	case err == nil:
		l.report(LiveFound)
		return nad, nil
	case apierrors.IsNotFound(err):
		l.report(LiveNotFound)
		return nil, err
	default:
		l.report(LiveError)
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s not in the informer's cache; reading it from the API server: %w", namespace, name, err)
	}
}

// waitSynced returns once Synced reports true, or ErrNotSynced after
// SyncWait or when ctx ends.
func (l *Lookup) waitSynced(ctx context.Context) error {
	if l.Synced == nil || l.Synced() {
		return nil
	}
	start := time.Now()
	var bound <-chan time.Time
	if l.SyncWait > 0 {
		t := time.NewTimer(l.SyncWait)
		defer t.Stop()
		bound = t.C
	}
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if l.Synced() {
				l.waited(start, true)
				return nil
			}
		case <-bound:
			if l.Synced() {
				l.waited(start, true)
				return nil
			}
			l.waited(start, false)
			return fmt.Errorf("%w after waiting %s", ErrNotSynced, l.SyncWait)
		case <-ctx.Done():
			l.waited(start, false)
			return fmt.Errorf("%w (waited %s): %w", ErrNotSynced, time.Since(start).Round(time.Millisecond), ctx.Err())
		}
	}
}

func (l *Lookup) report(result string) {
	if l.OnLive != nil {
		l.OnLive(result)
	}
}

func (l *Lookup) waited(start time.Time, synced bool) {
	if l.OnSyncWait != nil {
		l.OnSyncWait(time.Since(start), synced)
	}
}
