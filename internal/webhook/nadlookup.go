package webhook

import (
	"time"

	"github.com/multinet/multinet/internal/node/nadlookup"
)

// DefaultLiveLookupTimeout bounds the live GET of a NAD the cache misses.
const DefaultLiveLookupTimeout = 2 * time.Second

// LiveNADFunc reads one NetworkAttachmentDefinition from the API server
// (a quorum read). Errors: the API server's (*apierrors.StatusError; NotFound
// when it does not exist) or the context's.
type LiveNADFunc = nadlookup.LiveFunc

// newNADLookup returns the handlers' NAD lookup: the cache (Options.NADs)
// or, when it says NotFound and Options.LiveNAD is set, the API server
// within the request's context and LiveNADTimeout, counted in
// multinet_webhook_nad_live_lookups_total. It does not wait for the cache
// to sync: the handlers answer 503 until then (Options.Synced). Errors
// (nadlookup.Lookup.Get): the cache's other than NotFound, as they are;
// NotFound when the NAD does not exist; a live GET's timeout or other API
// error wrapped, naming the NAD (the handlers answer it as an internal
// error, not a denial).
func newNADLookup(o Options) *nadlookup.Lookup {
	timeout := o.LiveNADTimeout
	if timeout <= 0 {
		timeout = DefaultLiveLookupTimeout
	}
	l := &nadlookup.Lookup{Cache: o.NADs, Live: o.LiveNAD, LiveTimeout: timeout}
	if m := o.Metrics; m != nil {
		l.OnLive = func(result string) { m.nadLiveLookups.WithLabelValues(result).Inc() }
	}
	return l
}
