package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/multinet/multinet/internal/node/nadlookup"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// HTTP paths the handlers are served on (the webhook configurations point
// here; see internal/webhook/registration).
const (
	MutatePodsPath   = "/mutate-pods"
	ValidatePodsPath = "/validate-pods"
	ValidateNADsPath = "/validate-nads"
	// ValidateIPAMClaimsPath serves ValidateIPAMClaimStatus.
	ValidateIPAMClaimsPath = "/validate-ipamclaims"
)

// ExistingPolicy says how MutatePods treats a resource the pod's containers
// already request.
type ExistingPolicy string

const (
	// KeepExisting (the default): when the pod's app containers together
	// already request at least N of the resource, nothing changes; otherwise
	// the target container gets what is missing, so the pod totals N. With the
	// target container alone holding a value v, that is max(v, N).
	KeepExisting ExistingPolicy = "keep"
	// AddToExisting: the target container's value becomes its existing value
	// plus N (for containers that ask for devices for their own use besides
	// the network attachments).
	AddToExisting ExistingPolicy = "add"
)

// LookupFailurePolicy says what the pod handlers do when the verdict cannot
// be known because a NetworkAttachmentDefinition lookup failed
// (podnetworks.LookupError); docs/decisions/webhook.md.
type LookupFailurePolicy string

const (
	// RejectOnLookupFailure (the default): answer 503 with the lookup
	// error; the API server refuses the request and the client may retry.
	// No pod is admitted whose networks were not checked.
	RejectOnLookupFailure LookupFailurePolicy = "reject"
	// AdmitOnLookupFailure: admit the pod with a warning; multinetd checks
	// the selection at ADD (the same rules) and reports a problem as an
	// Event. Pods of the mutating handler get no device requests then.
	AdmitOnLookupFailure LookupFailurePolicy = "admit"
)

// DefaultResourceNameAnnotations are the NAD annotation keys read for the
// resource name, first present wins: the NPWG key, then the spelling of the
// original proposal (spec 001).
var DefaultResourceNameAnnotations = podnetworks.DefaultResourceNameKeys

// Options configure the handlers.
type Options struct {
	// NADs is the NetworkAttachmentDefinition cache: the generated lister of
	// an informer (its Lister()), NotFound (apierrors.IsNotFound) for a NAD
	// it does not hold. The objects are the cache's: never modified.
	// Required.
	NADs nadlisters.NetworkAttachmentDefinitionLister
	// LiveNAD, when set, reads a NAD that NADs does not have from the API
	// server before the handlers treat it as missing: a NAD created a
	// moment before the pod may not have reached this replica's informer
	// yet. Each distinct NAD is read at most once per request, at most
	// maxMissingLookups missing ones, each within LiveNADTimeout and the
	// request's context.
	LiveNAD LiveNADFunc
	// LiveNADTimeout bounds each LiveNAD call; 0 means
	// DefaultLiveLookupTimeout.
	LiveNADTimeout time.Duration
	// Synced reports whether NADs holds a full list yet (an informer's
	// HasSynced). Before that MutatePods answers 503 instead of denying pods
	// for NADs it has not seen. Nil means always synced.
	Synced func() bool
	// ResourceNameAnnotations are the NAD annotation keys holding the
	// resource name, first present wins. Empty means
	// DefaultResourceNameAnnotations.
	ResourceNameAnnotations []string
	// ContainerName names the container that gets the resources. Empty, or
	// absent from the pod, means the container at ContainerIndex.
	ContainerName string
	// ContainerIndex is the index in spec.containers of the container that
	// gets the resources when ContainerName does not pick one; out of range
	// means 0. Init containers are never changed.
	ContainerIndex int
	// Existing is how existing requests are treated; empty means KeepExisting.
	Existing ExistingPolicy
	// Policy is multinetd's configuration that decides a pod's networks
	// besides its annotations: namespace isolation (spec §7.4; the zero
	// value allows every namespace), defaultNetworks, systemNamespaces and
	// undeclaredCapabilities (under "multus" a pod relying on it is admitted
	// with a warning per attachment) and maxSelectionElements.
	// Set it as multinetd is configured, or a pod passes admission and then
	// fails at ADD.
	podnetworks.Policy
	// OnLookupFailure is what the pod handlers do when a NAD lookup fails
	// otherwise than NotFound (the API server does not answer the live GET
	// in time): RejectOnLookupFailure (the default) or AdmitOnLookupFailure.
	OnLookupFailure LookupFailurePolicy
	// Metrics counts decisions; nil counts nothing.
	Metrics *Metrics
	// DRA tells which resources DRA serves (DRAIndex): MutatePods requests
	// no extended resource that the pod's own resource claims bring
	// (Multus's DRA flow; docs/decisions/dra.md). Nil: every resource is
	// requested.
	DRA DRAResources
	// NodeAgentUser is the user of multinetd's node credentials whose
	// IPAMClaim status writes ValidateIPAMClaimStatus checks; empty means
	// DefaultNodeAgentUser.
	NodeAgentUser string
	// PodsOnNode looks up the pods bound to a node for
	// ValidateIPAMClaimStatus (ListPodsOnNode); nil answers its requests
	// that add an address with 503.
	PodsOnNode PodsOnNodeFunc
	// PodLookupTimeout bounds each PodsOnNode call; 0 means
	// DefaultPodLookupTimeout.
	PodLookupTimeout time.Duration
}

// Webhooks holds the admission handlers. Safe for concurrent use.
type Webhooks struct {
	o    Options
	nads *nadlookup.Lookup
}

// New checks o, fills in defaults and returns the handlers. Errors name the
// bad option.
func New(o Options) (*Webhooks, error) {
	if o.NADs == nil {
		return nil, errors.New("webhook options: NADs is required")
	}
	if len(o.ResourceNameAnnotations) == 0 {
		o.ResourceNameAnnotations = DefaultResourceNameAnnotations
	}
	for _, k := range o.ResourceNameAnnotations {
		if strings.TrimSpace(k) == "" {
			return nil, errors.New("webhook options: ResourceNameAnnotations: empty key")
		}
	}
	switch o.Existing {
	case "":
		o.Existing = KeepExisting
	case KeepExisting, AddToExisting:
	default:
		return nil, fmt.Errorf("webhook options: Existing %q: must be %q or %q", o.Existing, KeepExisting, AddToExisting)
	}
	switch o.OnLookupFailure {
	case "":
		o.OnLookupFailure = RejectOnLookupFailure
	case RejectOnLookupFailure, AdmitOnLookupFailure:
	default:
		return nil, fmt.Errorf("webhook options: OnLookupFailure %q: must be %q or %q", o.OnLookupFailure, RejectOnLookupFailure, AdmitOnLookupFailure)
	}
	u, err := podnetworks.ParseUndeclaredCapabilities(string(o.UndeclaredCapabilities))
	if err != nil {
		return nil, fmt.Errorf("webhook options: %w", err)
	}
	o.UndeclaredCapabilities = u
	if o.MaxSelectionElements < 0 {
		return nil, fmt.Errorf("webhook options: MaxSelectionElements %d: must be positive (0: %d)", o.MaxSelectionElements, podnetworks.DefaultMaxSelectionElements)
	}
	if o.ContainerIndex < 0 {
		return nil, fmt.Errorf("webhook options: ContainerIndex %d: must not be negative", o.ContainerIndex)
	}
	if o.NodeAgentUser == "" {
		o.NodeAgentUser = DefaultNodeAgentUser
	}
	if o.PodLookupTimeout <= 0 {
		o.PodLookupTimeout = DefaultPodLookupTimeout
	}
	return &Webhooks{o: o, nads: newNADLookup(o)}, nil
}

// Handlers returns the HTTP handler of each path (MutatePodsPath,
// ValidatePodsPath, ValidateNADsPath, ValidateIPAMClaimsPath): controller-runtime admission.Webhooks
// that decode AdmissionReview v1 (and v1beta1) bodies, recover panics into a
// 500 response and count decisions in Metrics.
func (w *Webhooks) Handlers() map[string]http.Handler {
	return map[string]http.Handler{
		MutatePodsPath:         &admission.Webhook{Handler: w.instrument("mutate-pods", w.MutatePods)},
		ValidatePodsPath:       &admission.Webhook{Handler: w.instrument("validate-pods", w.ValidatePods)},
		ValidateNADsPath:       &admission.Webhook{Handler: w.instrument("validate-nads", w.ValidateNADs)},
		ValidateIPAMClaimsPath: &admission.Webhook{Handler: w.instrument("validate-ipamclaims", w.ValidateIPAMClaimStatus)},
	}
}
