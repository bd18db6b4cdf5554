// Package webhook holds multinet's admission handlers (controller-runtime
// admission.Handler): the mutating "NetworkResource" handler of the
// device-plugin integration (spec 001, slide 5) and the validating handlers
// for pods and NetworkAttachmentDefinitions (NPWG multi-net spec v1.3 §3, §4,
// §7.4).
//
//   - MutatePods (path MutatePodsPath): on a Pod CREATE, every network the pod
//     selects (k8s.v1.cni.cncf.io/networks, and the
//     v1.multus-cni.io/default-network override) is looked up in a
//     NetworkAttachmentDefinition cache; for each extended resource named by a
//     NAD's resourceName annotation, N = number of attachments of NADs with
//     that resource is added to the requests and limits of one container.
//     A missing NAD denies the pod with a message naming "namespace/name";
//     a malformed annotation or a selection forbidden by namespace
//     isolation (§7.4) is denied before any lookup.
//   - ValidatePods (ValidatePodsPath): Pod CREATE, and UPDATE when a selection
//     annotation changed: a malformed annotation is denied with pkg/selection's
//     field-precise message; namespace isolation (§7.4) when enabled; on
//     UPDATE, a selection needing more devices than the pod's containers
//     hold is denied (pod resources are immutable).
//   - ValidateNADs (ValidateNADsPath): NAD CREATE/UPDATE: spec.config that is
//     not a usable CNI config (pkg/netconf's *ConfigError, field named) and a
//     resourceName annotation that is not "vendor-domain/type" are denied.
//
// Handlers never call the API server: NADs come from an informer-backed
// lister. Decisions are counted in Prometheus (see Metrics). The package has
// no global state; see pkg/webhook/server for the TLS server, certs and
// webhook configurations. Interpretations: docs/decisions/webhook.md.
package webhook
