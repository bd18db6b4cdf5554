package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

var nadResource = schema.GroupResource{Group: "k8s.cni.cncf.io", Resource: "network-attachment-definitions"}

// liveNADs is an API server stand-in for Options.LiveNAD: it serves nads and
// counts the GETs; err, when set, is every GET's answer.
type liveNADs struct {
	nads  map[string]*nadv1.NetworkAttachmentDefinition
	err   error
	gets  int
	delay time.Duration
}

func (l *liveNADs) get(ctx context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	l.gets++
	if l.delay > 0 {
		select {
		case <-time.After(l.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if l.err != nil {
		return nil, l.err
	}
	if n, ok := l.nads[ns+"/"+name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(nadResource, name)
}

// A NAD the informer has not seen yet is read from the API server and the
// pod gets its resources; a NAD that does not exist is still denied (one GET,
// counted), a cached NAD needs no GET, and an API error is an internal error
// naming the NAD, not a denial.
func TestLiveNADLookup(t *testing.T) {
	fresh := nad("ns1", "fresh", "example.com/vf")
	live := &liveNADs{nads: map[string]*nadv1.NetworkAttachmentDefinition{"ns1/fresh": fresh}}
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	lookups := metrics.nadLiveLookups
	w := newHooks(t, Options{NADs: lister(t, standardNADs()...), LiveNAD: live.get, Metrics: metrics})
	ctx := context.Background()

	resp := w.MutatePods(ctx, podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks("fresh,fresh")), nil))
	checkResponse(t, resp, ResultPatched)
	p := applyPatch(t, podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks("fresh,fresh")), nil), resp)
	if got := p.Spec.Containers[0].Resources.Limits["example.com/vf"]; got.Value() != 2 {
		t.Errorf("limits %v, want example.com/vf: 2", p.Spec.Containers[0].Resources.Limits)
	}
	// "fresh" is selected twice but looked up once.
	if found := counterValue(t, lookups, "found"); live.gets != 1 || found != 1 {
		t.Errorf("found lookups %v, GETs %d; want 1 and 1", found, live.gets)
	}

	before := live.gets
	resp = w.MutatePods(ctx, podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks("gone")), nil))
	checkResponse(t, resp, ResultDenied, `networks[0] "gone": NetworkAttachmentDefinition ns1/gone not found`)
	if live.gets != before+1 || counterValue(t, lookups, "not_found") != 1 {
		t.Errorf("missing NAD: %d GETs, not_found %v; want 1 and 1", live.gets-before, counterValue(t, lookups, "not_found"))
	}

	before = live.gets
	resp = w.MutatePods(ctx, podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks("net-a")), nil))
	checkResponse(t, resp, ResultPatched)
	if live.gets != before {
		t.Errorf("a cached NAD cost %d GETs", live.gets-before)
	}

	live.err = apierrors.NewServiceUnavailable("etcd is down")
	resp = w.MutatePods(ctx, podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks("other")), nil))
	checkResponse(t, resp, ResultErrored, "ns1/other", "etcd is down")
	if counterValue(t, lookups, "error") != 1 {
		t.Errorf("error lookups %v, want 1", counterValue(t, lookups, "error"))
	}
}

// The live GET is bounded by Timeout: a hanging API server gives an error
// naming the NAD within it, not a hung admission.
func TestLiveNADLookupTimeout(t *testing.T) {
	live := &liveNADs{delay: time.Minute}
	w := newHooks(t, Options{NADs: lister(t), LiveNAD: live.get, LiveNADTimeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := w.nads.Get(context.Background(), "ns1", "slow")
	if !errors.Is(err, context.DeadlineExceeded) || apierrors.IsNotFound(err) {
		t.Fatalf("err %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Get took %v with a 50ms timeout", d)
	}
}

func counterValue(t *testing.T, c *prometheus.CounterVec, result string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.WithLabelValues(result).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A selection naming one missing NAD thousands of times, or many distinct
// missing NADs, costs one live GET per distinct NAD and at most
// podnetworks.MaxMissingLookups of them, and is denied (with the bound on
// selection elements raised above them).
func TestLiveNADLookupBounds(t *testing.T) {
	live := &liveNADs{}
	w := newHooks(t, Options{NADs: lister(t, standardNADs()...), LiveNAD: live.get, Policy: podnetworks.Policy{MaxSelectionElements: 10000}})
	ctx := context.Background()

	same := strings.TrimSuffix(strings.Repeat("gone,", 5000), ",")
	resp := w.MutatePods(ctx, podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks(same)), nil))
	checkResponse(t, resp, ResultDenied, "NetworkAttachmentDefinition ns1/gone not found", "and 4980 more")
	if live.gets != 1 {
		t.Errorf("one missing NAD selected 5000 times: %d GETs, want 1", live.gets)
	}

	live.gets = 0
	var names []string
	for i := 0; i < 100; i++ {
		names = append(names, fmt.Sprintf("gone-%d", i))
	}
	resp = w.MutatePods(ctx, podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks(strings.Join(names, ","))), nil))
	checkResponse(t, resp, ResultDenied, "NetworkAttachmentDefinition ns1/gone-0 not found", "networks[8] and later: not checked: lookups stopped after 8 missing NetworkAttachmentDefinitions")
	if live.gets != podnetworks.MaxMissingLookups {
		t.Errorf("100 missing NADs: %d GETs, want %d", live.gets, podnetworks.MaxMissingLookups)
	}
}

// When the API server does not answer a NAD lookup, the pod handlers answer
// 503 by default (the client retries; no pod is admitted unchecked) and,
// with AdmitOnLookupFailure, admit the pod unchanged with a warning naming
// the NAD: multinetd checks the selection at ADD.
func TestLookupFailurePolicy(t *testing.T) {
	live := &liveNADs{err: apierrors.NewServiceUnavailable("etcd is down")}
	p := pod("ns1", networks("net-a,fresh"))
	for _, tc := range []struct {
		policy LookupFailurePolicy
		result string
	}{{"", ResultErrored}, {RejectOnLookupFailure, ResultErrored}, {AdmitOnLookupFailure, ResultAllowed}} {
		w := newHooks(t, Options{LiveNAD: live.get, OnLookupFailure: tc.policy})
		for name, h := range map[string]func(context.Context, admission.Request) admission.Response{"mutate": w.MutatePods, "validate": w.ValidatePods} {
			resp := h(context.Background(), podRequest(t, admissionv1.Create, "ns1", p, nil))
			if got := Result(resp); got != tc.result {
				t.Errorf("%q %s: result %s (%s), want %s", tc.policy, name, got, message(resp), tc.result)
			}
			if tc.result == ResultErrored && (resp.Result.Code != http.StatusServiceUnavailable || !strings.Contains(message(resp), "ns1/fresh")) {
				t.Errorf("%q %s: %d %q, want 503 naming ns1/fresh", tc.policy, name, resp.Result.Code, message(resp))
			}
			if tc.result == ResultAllowed && (len(resp.Patches) != 0 || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "ns1/fresh")) {
				t.Errorf("%q %s: patches %v warnings %q, want none and one naming ns1/fresh", tc.policy, name, resp.Patches, resp.Warnings)
			}
		}
	}
	if _, err := New(Options{NADs: lister(t), OnLookupFailure: "maybe"}); err == nil {
		t.Error("New accepted OnLookupFailure \"maybe\"")
	}
}
