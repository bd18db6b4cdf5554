// Package ipam is multinet-ipam's allocator: cluster-wide IP address
// management for CNI networks, with its state in the Kubernetes API.
//
// Each allocated address is one cluster-scoped IPAllocation
// (ipam.multinet.io/v1alpha1) named ObjectName(pool, address). Allocating
// is creating that object: of allocators racing for one address on any
// number of nodes, the API server lets exactly one create succeed, the
// others get AlreadyExists and move on to another address. There is no
// pool object that every allocation updates (whereabouts' IPPool), so
// allocations on many nodes do not contend on one object's resourceVersion,
// and releasing is deleting the object.
//
// The IPAM configuration (Config, parsed from a CNI network configuration's
// "ipam" section) is host-local's range sets plus "pool" and "exclude";
// runtimeConfig "ips" requests addresses and "ipamClaimReference" names an
// IPAMClaim (multi-net spec §4.1.2.1.11, §8) whose addresses are kept for
// whichever pod uses the claim, until the claim is deleted.
//
// Pools belong to namespaces (Tenancy): a pool named by a tenant
// namespace's NetworkAttachmentDefinition is that namespace's, keyed
// "namespace/pool"; another namespace's pool is refused unless the admin
// shares it; a namespace holds at most its limit of addresses
// (docs/decisions/ipam-tenancy.md).
//
// Allocations are released by CNI DEL (Release), CNI GC (GC, with
// cni.dev/valid-attachments) and Reconcile (holders that no longer exist:
// pods, IPAMClaims), which multinetd runs periodically.
// docs/decisions/ipam.md records the decisions.
package ipam
