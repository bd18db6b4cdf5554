// Package webhook holds multinet's admission handlers (controller-runtime
// admission.Handler): the mutating "NetworkResource" handler of the
// device-plugin integration (spec 001, slide 5) and the validating handlers
// for pods and NetworkAttachmentDefinitions (NPWG multi-net spec v1.3 §3, §4,
// §7.4).
//
//   - MutatePods (path MutatePodsPath): on a Pod CREATE, the pod's network
//     selection is decided by podnetworks.Check (the rules multinetd applies
//     at ADD and kubectl multinet lint offline) and denied with its message
//     when invalid; for each extended resource named by a selected NAD's
//     resourceName annotation, N = number of attachments of NADs with that
//     resource is added to the requests and limits of one container.
//   - ValidatePods (ValidatePodsPath): Pod CREATE, and UPDATE when a selection
//     annotation changed (hot-plug): podnetworks.Check again, since other
//     mutating webhooks may have changed the pod; on UPDATE, a selection
//     needing more devices than the pod's containers hold is denied (pod
//     resources are immutable).
//   - ValidateNADs (ValidateNADsPath): NAD CREATE/UPDATE: podnetworks.CheckNAD
//     (lint's NAD rules): spec.config that is not a usable CNI config (field
//     named), a resourceName annotation that is not "vendor-domain/type", a
//     name that is not a DNS-1123 subdomain.
//
// docs/validation.md says which error appears where (admission, Event,
// lint).
//
// NADs come from an informer-backed lister; one the cache does not have is
// read once from the API server (Options.LiveNAD), and a failed read is
// answered as Options.OnLookupFailure says. Decisions are counted in Prometheus (see Metrics). The package has
// no global state; see internal/webhook/server for the TLS server, certs and
// webhook configurations. Interpretations: docs/decisions/webhook.md.
package webhook
