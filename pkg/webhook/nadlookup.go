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

// Results of the live NAD lookups (Options.LiveNAD), the "result" label of
// multinet_webhook_nad_live_lookups_total.
const (
	lookupFound    = "found"
	lookupNotFound = "not_found"
	lookupError    = "error"
)

// lookupNAD returns the NAD from the cache (Options.NADs) or, when the
// cache says NotFound and Options.LiveNAD is set, from the API server within
// ctx and LiveNADTimeout. Errors: the cache's other than NotFound, as they
// are; NotFound when the NAD does not exist; a live GET's timeout or other
// API error wrapped, naming the NAD (the handlers answer it as an internal
// error, not a denial).
func (w *Webhooks) lookupNAD(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	nad, err := w.o.NADs.Get(namespace, name)
	if err == nil || !apierrors.IsNotFound(err) || w.o.LiveNAD == nil {
		return nad, err
	}
	timeout := w.o.LiveNADTimeout
	if timeout <= 0 {
		timeout = DefaultLiveLookupTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nad, err = w.o.LiveNAD(ctx, namespace, name)
	switch {
	case err == nil:
		w.countLookup(lookupFound)
		return nad, nil
	case apierrors.IsNotFound(err):
		w.countLookup(lookupNotFound)
		return nil, err
	default:
		w.countLookup(lookupError)
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s not in the informer's cache; reading it from the API server: %w", namespace, name, err)
	}
}

func (w *Webhooks) countLookup(result string) {
	if w.o.Metrics != nil {
		w.o.Metrics.nadLiveLookups.WithLabelValues(result).Inc()
	}
}
