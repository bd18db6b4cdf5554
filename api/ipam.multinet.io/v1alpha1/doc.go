// Package v1alpha1 holds multinet-ipam's API (group ipam.multinet.io, version
// v1alpha1): IPAllocation, one cluster-scoped object per allocated IP address
// of a pool. Creating the object is the atomic claim of the address (its name
// is derived from the pool and the address, so the API server refuses a
// second claim with AlreadyExists); deleting it releases the address. There
// is no pool object: a pool is named by the IPAM configuration of the
// networks that use it (docs/decisions/ipam.md, docs/multinet-ipam.md).
//
// +kubebuilder:object:generate=true
// +groupName=ipam.multinet.io
// +groupGoName=IPAM
package v1alpha1
