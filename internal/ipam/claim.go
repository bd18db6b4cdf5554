package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	claimv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// claimAttempts bounds the rounds of AllocateClaim lost to another node
// writing the claim's status at the same time.
const claimAttempts = 5

// AllocateClaim gives the attachment the addresses of the IPAMClaim
// req.Claim in the pod's namespace (multi-net spec §4.1.2.1.11, §8):
//
//   - the addresses in the claim's status.ips are reused, on any node; each
//     must be in a range set of cfg (else ErrClaim) and its IPAllocation is
//     the claim's (re-created when missing; another holder: ErrTaken);
//   - range sets the claim has no address of get a free one, owned by the
//     claim (spec.owner.claim, label LabelClaimUID), and the claim's
//     status.ips is written (UpdateStatus, optimistic concurrency: when
//     another node wrote it first, ours are released and its are used).
//
// Claim-owned allocations are not released by Release (CNI DEL) or GC;
// only the claim's deletion releases them (ReleaseClaim, Reconcile): §8
// "the IP address cannot be de-allocated before the IPAMClaim is deleted".
// Errors: no pod namespace, the claim is missing (ErrClaim), requested
// ips with a claim (the claim decides the addresses).
func (a *Allocator) AllocateClaim(ctx context.Context, cfg *Config, req Request) (*Allocation, error) {
	if req.Pod == nil || req.Pod.Namespace == "" {
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim %q: the pod's namespace is unknown (no K8S_POD_NAMESPACE in CNI_ARGS): %w", req.Claim, ErrClaim)
	}
	if len(req.IPs) > 0 {
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: requested ips cannot be combined with a claim (the claim decides the addresses): %w", req.Pod.Namespace, req.Claim, ErrClaim)
	}
	if a.Claims == nil {
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: this allocator has no IPAMClaim client: %w", req.Pod.Namespace, req.Claim, ErrClaim)
	}
	cfg, err := a.Tenancy.Resolve(cfg, req.NetworkNamespace)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range claimAttempts {
		out, retry, err := a.claimRound(ctx, cfg, req)
		if !retry {
			return out, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: status kept changing: %w", req.Pod.Namespace, req.Claim, lastErr)
}

// claimRound is one read-allocate-write round; retry reports a lost
// status write (the round's own allocations are released again).
func (a *Allocator) claimRound(ctx context.Context, cfg *Config, req Request) (out *Allocation, retry bool, err error) {
	claim, err := a.getClaim(ctx, req.Pod.Namespace, req.Claim)
	if err != nil {
		return nil, false, err
	}
	ref := &ipamv1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)}
	have, err := cfg.claimAddresses(claim)
	if err != nil {
		return nil, false, err
	}
	out = &Allocation{Claim: claim.Namespace + "/" + claim.Name}
	var created []*ipamv1.IPAllocation
	fail := func(err error) (*Allocation, bool, error) {
		a.rollback(created)
		return nil, false, err
	}
	for i := range cfg.RangeSets {
		if addr, ok := have[i]; ok {
			obj, err := a.ensureClaimed(ctx, cfg, req, ref, addr)
			if err != nil {
				return fail(err)
			}
			if obj != nil {
				created = append(created, obj)
			}
			out.Addresses = append(out.Addresses, cfg.address(addr, ObjectName(cfg.Pool, addr)))
			continue
		}
		if err := a.admit(req); err != nil {
			return fail(err)
		}
		obj, err := a.createFree(ctx, cfg, req, i, a.owner(cfg, req.Attachment, ref))
		if err != nil {
			return fail(err)
		}
		created = append(created, obj)
		p, _ := netip.ParsePrefix(obj.Spec.Address)
		out.Addresses = append(out.Addresses, cfg.address(p.Addr(), obj.Name))
	}
	if len(have) == len(cfg.RangeSets) {
		return out, false, nil // nothing new to record
	}
	claim.Status.IPs = statusIPs(claim.Status.IPs, out.Addresses)
	cctx, cancel := a.call(ctx)
	defer cancel()
	_, err = a.Claims.IPAMClaims(claim.Namespace).UpdateStatus(cctx, claim, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		a.rollback(created)
		return nil, true, fmt.Errorf("writing status.ips: %w", err)
	}
	if err != nil {
		return fail(fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: writing status.ips: %w", claim.Namespace, claim.Name, err))
	}
	return out, false, nil
}

// statusIPs is the claim's new status.ips: the addresses in range set
// order, each already recorded kept as written (a bare "10.1.2.3" stays
// so), so that the write only adds entries: the node-scoped authority
// policy refuses a daemon any change or removal of a claim's address
// (docs/security.md "Node-scoped authority").
func statusIPs(old []string, addrs []Address) []string {
	written := map[netip.Addr]string{}
	for _, raw := range old {
		if p, err := (claimv1.IPAMClaimStatus{IPs: []string{raw}}).Prefixes(); err == nil && len(p) == 1 {
			written[p[0].Addr().Unmap()] = raw
		}
	}
	out := make([]string, 0, len(addrs))
	for _, ad := range addrs {
		if raw, ok := written[ad.Prefix.Addr().Unmap()]; ok {
			out = append(out, raw)
			continue
		}
		out = append(out, ad.Prefix.String())
	}
	return out
}

func (a *Allocator) getClaim(ctx context.Context, namespace, name string) (*claimv1.IPAMClaim, error) {
	cctx, cancel := a.call(ctx)
	defer cancel()
	claim, err := a.Claims.IPAMClaims(namespace).Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s does not exist (ipam-claim-reference names a claim in the pod's namespace): %w", namespace, name, ErrClaim)
	}
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: reading IPAMClaim %s/%s: %w", namespace, name, err)
	}
	return claim, nil
}

// claimAddresses maps the claim's status.ips to cfg's range sets. Errors
// (ErrClaim): a malformed entry, one in no range set of the pool, two in
// one range set.
func (c *Config) claimAddresses(claim *claimv1.IPAMClaim) (map[int]netip.Addr, error) {
	prefixes, err := claim.Status.Prefixes()
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: %v: %w", claim.Namespace, claim.Name, err, ErrClaim)
	}
	have := map[int]netip.Addr{}
	for _, p := range prefixes {
		addr := p.Addr().Unmap()
		i, _ := c.rangeSetOf(addr)
		if i < 0 {
			return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: status.ips %s is in none of pool %s's ranges (%s); was the claim used with another network?: %w",
				claim.Namespace, claim.Name, p, c.Pool, c.describeRanges(), ErrClaim)
		}
		if prev, dup := have[i]; dup {
			return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: status.ips %s and %s are in one range set of pool %s: %w", claim.Namespace, claim.Name, prev, addr, c.Pool, ErrClaim)
		}
		have[i] = addr
	}
	return have, nil
}

// ensureClaimed makes sure addr's IPAllocation is the claim's: an existing
// one of the claim (same UID) is used; a missing one is created again
// (returned, to be rolled back on failure); another holder is ErrTaken.
func (a *Allocator) ensureClaimed(ctx context.Context, cfg *Config, req Request, ref *ipamv1.ObjectReference, addr netip.Addr) (*ipamv1.IPAllocation, error) {
	if cfg.LegacyPool != "" {
		// the claim's allocation made before tenancy stays the claim's
		if obj, err := a.get(ctx, ObjectName(cfg.LegacyPool, addr)); err == nil && claimedBy(obj, ref) {
			return nil, nil
		} else if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	name := ObjectName(cfg.Pool, addr)
	var holder *ipamv1.IPAllocation
	if a.Cache != nil {
		holder = a.Cache.Get(name)
	}
	if holder == nil || !claimedBy(holder, ref) {
		cctx, cancel := a.call(ctx)
		obj, err := a.IPAM.IPAllocations().Get(cctx, name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			created, taken, err := a.create(ctx, newObject(cfg, addr, a.owner(cfg, req.Attachment, ref)))
			if err != nil || !taken {
				return created, err
			}
			if obj, err = a.get(ctx, name); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, fmt.Errorf("multinet-ipam: reading IPAllocation %s: %w", name, err)
		}
		holder = obj
	}
	if !claimedBy(holder, ref) {
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: its address %s is held by %s: %w", ref.Namespace, ref.Name, addr, describeOwner(holder.Spec.Owner), errors.Join(ErrClaim, ErrTaken))
	}
	return nil, nil
}

func claimedBy(o *ipamv1.IPAllocation, ref *ipamv1.ObjectReference) bool {
	c := o.Spec.Owner.Claim
	return c != nil && c.Namespace == ref.Namespace && c.Name == ref.Name && c.UID == ref.UID
}

// Check reports whether the attachment (with req.Claim: the IPAMClaim)
// holds an address of every range set of cfg (CNI CHECK). Errors name the
// range set without one.
func (a *Allocator) Check(ctx context.Context, cfg *Config, req Request) error {
	cfg, err := a.Tenancy.Resolve(cfg, req.NetworkNamespace)
	if err != nil {
		return err
	}
	held := map[int]netip.Addr{}
	if req.Claim != "" {
		if req.Pod == nil || req.Pod.Namespace == "" {
			return fmt.Errorf("multinet-ipam: IPAMClaim %q: the pod's namespace is unknown: %w", req.Claim, ErrClaim)
		}
		claim, err := a.getClaim(ctx, req.Pod.Namespace, req.Claim)
		if err != nil {
			return err
		}
		if held, err = cfg.claimAddresses(claim); err != nil {
			return err
		}
		ref := &ipamv1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)}
		for _, addr := range held {
			obj, err := a.get(ctx, ObjectName(cfg.Pool, addr))
			if apierrors.IsNotFound(err) && cfg.LegacyPool != "" {
				obj, err = a.get(ctx, ObjectName(cfg.LegacyPool, addr))
			}
			if err != nil {
				return err
			}
			if !claimedBy(obj, ref) {
				return fmt.Errorf("multinet-ipam: IPAMClaim %s/%s: its address %s is held by %s: %w", ref.Namespace, ref.Name, addr, describeOwner(obj.Spec.Owner), ErrTaken)
			}
		}
	} else {
		objs, err := a.attachmentAllocations(ctx, req.ContainerID, req.IfName)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if p, err := netip.ParsePrefix(o.Spec.Address); err == nil && cfg.inPool(o.Spec.Pool) {
				if i, _ := cfg.rangeSetOf(p.Addr()); i >= 0 {
					held[i] = p.Addr()
				}
			}
		}
	}
	for i, set := range cfg.RangeSets {
		if _, ok := held[i]; !ok {
			return fmt.Errorf("multinet-ipam: pool %s: the attachment (container %s, %s) holds no address of range set %d (%s)", cfg.Pool, short(req.ContainerID), req.IfName, i, describeSet(set))
		}
	}
	return nil
}
