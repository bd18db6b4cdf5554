package webhook

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/multinet/multinet/internal/node/nadlookup"
)

// Decision results, the "result" label of the decisions counter.
const (
	ResultAllowed = "allowed" // allowed unchanged
	ResultPatched = "patched" // allowed with a JSON patch
	ResultDenied  = "denied"  // denied: the object breaks a rule (HTTP 403 in the response status)
	ResultErrored = "errored" // not decided: bad request or internal error (4xx other than 403, 5xx)
)

// Metrics are the handlers' Prometheus metrics.
type Metrics struct {
	decisions *prometheus.CounterVec
	// nadLiveLookups counts the live NAD GETs (Options.LiveNAD) by result.
	nadLiveLookups *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg:
//
//	multinet_webhook_admission_decisions_total{handler="mutate-pods|validate-pods|validate-nads",result="allowed|patched|denied|errored"}
//	multinet_webhook_nad_live_lookups_total{result="found|not_found|error"}
//
// The second counts the live GETs (Options.LiveNAD) of NADs the informer did not have
// (found: the informer lagged). Errors: reg refused a collector (e.g.
// registered twice).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet",
			Subsystem: "webhook",
			Name:      "admission_decisions_total",
			Help:      "Admission decisions by handler and result (allowed, patched, denied, errored).",
		}, []string{"handler", "result"}),
		nadLiveLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "multinet",
			Subsystem: "webhook",
			Name:      "nad_live_lookups_total",
			Help:      "NetworkAttachmentDefinitions the informer did not have, read from the API server, by result (found: the informer lagged).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.nadLiveLookups} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering webhook metrics: %w", err)
		}
	}
	for _, r := range []string{nadlookup.LiveFound, nadlookup.LiveNotFound, nadlookup.LiveError} {
		m.nadLiveLookups.WithLabelValues(r)
	}
	for _, h := range []string{"mutate-pods", "validate-pods", "validate-nads", "validate-ipamclaims"} {
		for _, r := range []string{ResultAllowed, ResultPatched, ResultDenied, ResultErrored} {
			m.decisions.WithLabelValues(h, r)
		}
	}
	return m, nil
}

// Result classifies a response as one of the Result* constants.
func Result(resp admission.Response) string {
	switch {
	case resp.Allowed && (len(resp.Patches) > 0 || len(resp.Patch) > 0):
		return ResultPatched
	case resp.Allowed:
		return ResultAllowed
	case resp.Result != nil && resp.Result.Code == http.StatusForbidden:
		return ResultDenied
	default:
		return ResultErrored
	}
}

// instrument counts and logs the decisions of h.
func (w *Webhooks) instrument(name string, h admission.HandlerFunc) admission.HandlerFunc {
	return func(ctx context.Context, req admission.Request) admission.Response {
		resp := h(ctx, req)
		result := Result(resp)
		if w.o.Metrics != nil {
			w.o.Metrics.decisions.WithLabelValues(name, result).Inc()
		}
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		// controller-runtime's logger in ctx already names the object and
		// the request ID.
		logger := klog.FromContext(ctx).WithValues("handler", name, "operation", req.Operation, "kind", req.Kind.Kind, "result", result)
		switch result {
		case ResultDenied, ResultErrored:
			logger.Info("admission decision", "message", msg)
		default:
			logger.V(2).Info("admission decision", "message", msg)
		}
		return resp
	}
}
