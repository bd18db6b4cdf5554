package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPAMClaim is a claim to the IP addresses of one pod interface on one
// network, made on behalf of the pod's owner (spec §8). The IP addresses must
// not be de-allocated before the IPAMClaim is deleted (§8, §8.1).
//
// The name is any name the owner's controller and the IPAM plugin agree on,
// typically "<owner name>.<network name>.<interface name>" (§8.3); the API
// server requires a DNS-1123 subdomain. metadata.ownerReferences maps the
// claim to its owner (§8.3.2); the owner's controller protects the claim with
// a finalizer while a pod of the owner runs.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ipamclaims,singular=ipamclaim,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=".spec.network"
// +kubebuilder:printcolumn:name="Interface",type=string,JSONPath=".spec.interface"
// +kubebuilder:printcolumn:name="IPs",type=string,JSONPath=".status.ips"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type IPAMClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the claim's intent, written by the workload controller (§8.2).
	Spec IPAMClaimSpec `json:"spec,omitempty"`
	// Status is the allocation, written by the IPAM CNI plugin through the
	// status subresource (§8.2).
	Status IPAMClaimStatus `json:"status,omitempty"`
}

// IPAMClaimSpec is the intent of an IPAMClaim (§8.2).
type IPAMClaimSpec struct {
	// The network name for which this persistent allocation was created.
	Network string `json:"network"`
	// The pod interface name for which this allocation was created.
	Interface string `json:"interface"`
}

// IPAMClaimStatus is the allocation recorded for an IPAMClaim (§8.2).
//
// The CRD requires status.ips once a status is written (§8.1). The API server
// drops a JSON null before validation, so a status update with a nil IPs is
// rejected; write []string{} for "no address".
type IPAMClaimStatus struct {
	// The list of IP addresses (v4, v6) that were allocated for the pod
	// interface, each in CIDR form ("10.128.20.8/24", §8.2.1).
	IPs []string `json:"ips"`
}

// Prefixes parses Status.IPs (§8.2, §8.2.1). Each entry is an IPv4 or IPv6
// address in CIDR form ("10.128.20.8/24", "fd10:128:20::8/64"); a bare
// address is accepted as a host prefix (/32 or /128). The prefixes keep the
// host address (they are not masked). An empty or nil list gives nil, nil.
//
// Errors: an entry that is neither an address nor an address/prefix-length,
// named as status.ips[i].
func (s IPAMClaimStatus) Prefixes() ([]netip.Prefix, error) {
	if len(s.IPs) == 0 {
		return nil, nil
	}
	out := make([]netip.Prefix, 0, len(s.IPs))
	for i, raw := range s.IPs {
		v := strings.TrimSpace(raw)
		if strings.Contains(v, "/") {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return nil, fmt.Errorf("status.ips[%d] %q: not an IP address in CIDR form: %w", i, raw, err)
			}
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("status.ips[%d] %q: not an IP address: %w", i, raw, err)
		}
		if a.Zone() != "" {
			return nil, fmt.Errorf("status.ips[%d] %q: an IP address with a zone is not allowed", i, raw)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// IPAMClaimList is a list of IPAMClaims.
//
// +kubebuilder:object:root=true
type IPAMClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []IPAMClaim `json:"items"`
}
