package webhook

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

// DefaultLiveLookupTimeout bounds the live GET of a NAD the cache misses.
const DefaultLiveLookupTimeout = 2 * time.Second

// LiveNADFunc reads one NetworkAttachmentDefinition from the API server
// (a quorum read). Errors: the API server's (*apierrors.StatusError; NotFound
// when it does not exist) or the context's.
type LiveNADFunc func(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)

// LiveFallback is a NADGetter that answers from a cache (the webhook's NAD
// informer) and, when the cache says NotFound, asks the API server before
// saying so. A NAD created a moment before the pod that selects it (one
// `kubectl apply -f` of both, an operator creating both) may not have
// reached this replica's informer yet: denying that pod would be wrong, and
// with several webhook replicas each one's informer lags on its own. A NAD
// that really does not exist costs one GET per admission that selects it,
// bounded by Timeout.
//
// Errors of Get: the cache's other than NotFound, as they are; on a miss, the
// live GET's (NotFound when the NAD does not exist; a timeout or another API
// error is returned wrapped, naming the NAD, and the handlers answer it as
// an internal error, not a denial).
type LiveFallback struct {
	Cache NADGetter
	Live  LiveNADFunc
	// Timeout bounds each live GET; 0 means DefaultLiveLookupTimeout.
	Timeout time.Duration
	// Metrics counts the live GETs by result (NewMetrics); nil counts
	// nothing.
	Metrics *Metrics
}

// Results of LiveFallback's GETs, the "result" label of
// multinet_webhook_nad_live_lookups_total.
const (
	lookupFound    = "found"
	lookupNotFound = "not_found"
	lookupError    = "error"
)

// Get implements NADGetter.
func (f *LiveFallback) Get(namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	nad, err := f.Cache.Get(namespace, name)
	if err == nil || !apierrors.IsNotFound(err) || f.Live == nil {
		return nad, err
	}
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultLiveLookupTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nad, err = f.Live(ctx, namespace, name)
	switch {
	case err == nil:
		f.count(lookupFound)
		return nad, nil
	case apierrors.IsNotFound(err):
		f.count(lookupNotFound)
		return nil, err
	default:
		f.count(lookupError)
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s not in the informer's cache; reading it from the API server: %w", namespace, name, err)
	}
}

func (f *LiveFallback) count(result string) {
	if f.Metrics != nil {
		f.Metrics.nadLiveLookups.WithLabelValues(result).Inc()
	}
}
