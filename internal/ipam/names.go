package ipam

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels multinet-ipam sets on IPAllocations, to find them without a list
// of the whole pool.
const (
	// LabelAttachment is AttachmentKey(containerID, ifName) on an
	// attachment-owned allocation (absent on claim-owned ones).
	LabelAttachment = "ipam.multinet.io/attachment"
	// LabelClaimUID is the IPAMClaim's metadata.uid on a claim-owned
	// allocation.
	LabelClaimUID = "ipam.multinet.io/claim-uid"
)

// Field selectors of the IPAllocation CRD (its selectableFields).
const (
	FieldPool = "spec.pool"
	FieldNode = "spec.owner.node"
)

// maxPoolPart bounds the pool part of an object name: with the longest
// address part (39 characters of IPv6) the name stays far under 253.
const maxPoolPart = 200

// ObjectName is the name of the IPAllocation of address a in pool:
// "<pool part>.<address part>". The pool part is the pool itself when it is
// a lowercase DNS subdomain of at most 200 characters, else its lowercased
// letters, digits and dashes (at most 40) and a hash of the pool. The
// address part is the address with '-' for '.' and ':' in the fully
// expanded form without leading zeros: "10-1-2-3", "fd10-0-0-0-0-0-0-8".
// The address part holds no dot and has 4 groups for IPv4, 8 for IPv6, so
// one name never stands for two (pool, address) pairs of valid pools but
// for a hash collision of two unusual pool names, which only makes the
// pools share their addresses (a create fails with AlreadyExists), never
// duplicates one.
func ObjectName(pool string, a netip.Addr) string {
	return poolPart(pool) + "." + addrPart(a)
}

func poolPart(pool string) string {
	if len(pool) <= maxPoolPart && len(validation.IsDNS1123Subdomain(pool)) == 0 {
		return pool
	}
	var b strings.Builder
	for _, r := range strings.ToLower(pool) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		s = "pool"
	}
	return s + "-" + shortHash(pool, 10)
}

func addrPart(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	b := a.As16()
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = fmt.Sprintf("%x", uint16(b[2*i])<<8|uint16(b[2*i+1]))
	}
	return strings.Join(parts, "-")
}

// AttachmentKey is the LabelAttachment value of a CNI attachment: a hash
// of its container ID and interface name (a container ID is 64 characters,
// over a label value's 63).
func AttachmentKey(containerID, ifName string) string {
	return shortHash(containerID+"\x00"+ifName, 40)
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
