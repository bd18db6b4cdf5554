package ipam

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	ipamclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/ipam.multinet.io/v1alpha1"
	claimclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1alpha1"
)

// Errors Allocate wraps; test with errors.Is.
var (
	// ErrExhausted: a range set has no free address.
	ErrExhausted = errors.New("no free address")
	// ErrConflicts: MaxConflicts creates in a row found their address
	// taken by other allocators; trying again later will likely succeed.
	ErrConflicts = errors.New("too many allocation conflicts")
	// ErrTaken: a requested address (runtimeConfig "ips") is held by
	// someone else.
	ErrTaken = errors.New("address is taken")
	// ErrOutOfRange: a requested address is in no range, or is one that is
	// never allocated (gateway, network, broadcast, excluded).
	ErrOutOfRange = errors.New("address out of range")
	// ErrClaim: the IPAMClaim is missing, or its addresses cannot be used.
	ErrClaim = errors.New("IPAMClaim")
)

// Defaults of Allocator fields left zero.
const (
	DefaultMaxConflicts = 128
	DefaultCallTimeout  = 15 * time.Second
)

// PodRef names a pod (CNI_ARGS K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID).
type PodRef struct {
	Namespace, Name, UID string
}

// Attachment is a CNI attachment: container, interface and pod.
type Attachment struct {
	ContainerID string
	IfName      string
	// Pod is nil outside Kubernetes (no K8S_POD_* in CNI_ARGS).
	Pod *PodRef
}

// Request is one ADD: the attachment, the addresses it asks for
// (runtimeConfig "ips") and the IPAMClaim it names (runtimeConfig
// "ipamClaimReference", in the pod's namespace).
type Request struct {
	Attachment
	IPs   []netip.Addr
	Claim string
	// NetworkNamespace is the namespace of the network's
	// NetworkAttachmentDefinition ("" for a network of the node's own
	// configuration: the admin's); Tenancy.Resolve decides its pool.
	NetworkNamespace string
}

// Address is one allocated address.
type Address struct {
	// Prefix is the address with its subnet's prefix length.
	Prefix netip.Prefix
	// Gateway is the range's gateway (invalid when none).
	Gateway netip.Addr
	// Object is the IPAllocation's name.
	Object string
}

// Allocation is the result of Allocate: one address per range set, in the
// order of the configuration's range sets.
type Allocation struct {
	Addresses []Address
	// Claim is the IPAMClaim's namespace/name when the addresses are the
	// claim's.
	Claim string
}

// Allocator allocates addresses of multinet-ipam pools as IPAllocation
// objects. It is safe for concurrent use; any number of Allocators, on any
// number of nodes, may allocate from one pool at once: the API server's
// create of the address's object name is the only arbiter.
type Allocator struct {
	// IPAM is the IPAllocation client (cluster-scoped).
	IPAM ipamclient.IPAllocationsGetter
	// Claims reads IPAMClaims and writes their status. Required for claims.
	Claims claimclient.IPAMClaimsGetter
	// Node is the node recorded as spec.owner.node, and the node GC acts on.
	Node string
	// Cache, when set, tells which addresses are held (skipped without a
	// request) and how many a namespace holds. It may lag: a create is
	// still the arbiter.
	Cache *Cache
	// Tenancy decides which pool a request's network may use and bounds
	// the addresses of a namespace; nil: every pool is the cluster's, no
	// limit (docs/decisions/ipam-tenancy.md).
	Tenancy *Tenancy
	// MaxConflicts bounds the creates of one allocation that find their
	// address taken (ErrConflicts after). Default DefaultMaxConflicts.
	MaxConflicts int
	// CallTimeout bounds each API request. Default DefaultCallTimeout.
	CallTimeout time.Duration
	// OnConflict, when set, is called for every create that found its
	// address taken (metrics).
	OnConflict func()
}

func (a *Allocator) maxConflicts() int {
	if a.MaxConflicts > 0 {
		return a.MaxConflicts
	}
	return DefaultMaxConflicts
}

// call bounds one API request by CallTimeout (and ctx).
func (a *Allocator) call(ctx context.Context) (context.Context, context.CancelFunc) {
	d := a.CallTimeout
	if d <= 0 {
		d = DefaultCallTimeout
	}
	return context.WithTimeout(ctx, d)
}

// Allocate gives the attachment one address from each range set of cfg.
//
//   - An attachment that already holds addresses of the pool (an ADD
//     repeated without DEL) gets them again.
//   - A requested address (req.IPs) is taken from the range set containing
//     it; it must be allocatable (ErrOutOfRange) and free or already the
//     attachment's (ErrTaken). Range sets without one get a free address.
//   - With req.Claim, the addresses are the IPAMClaim's (AllocateClaim).
//   - A free address is searched in an order that is a hash of the
//     container ID, interface name and range set (walkOrder), skipping addresses the
//     Cache knows to be held; a create that finds the address taken moves
//     on to the next (at most MaxConflicts times: ErrConflicts).
//
// Requests: one create per range set when the Cache has synced and shows
// the attachment holding no address of the pool (heldAllocations); a list
// of the attachment's allocations first otherwise; more creates on
// conflicts. On error, the addresses this call created are released again.
//
// Tenancy: cfg's pool is resolved for req.NetworkNamespace
// (Tenancy.Resolve: ErrPoolNotAllowed), and each new address must fit
// the pod namespace's limit (ErrQuota).
func (a *Allocator) Allocate(ctx context.Context, cfg *Config, req Request) (*Allocation, error) {
	if req.ContainerID == "" || req.IfName == "" {
		return nil, errors.New("multinet-ipam: the attachment needs a container ID and an interface name")
	}
	cfg, err := a.Tenancy.Resolve(cfg, req.NetworkNamespace)
	if err != nil {
		return nil, err
	}
	if req.Claim != "" {
		return a.AllocateClaim(ctx, cfg, req)
	}
	wanted, err := cfg.assignRequested(req.IPs)
	if err != nil {
		return nil, err
	}
	held, err := a.heldAllocations(ctx, cfg, req.ContainerID, req.IfName)
	if err != nil {
		return nil, err
	}
	own := func(set int) (netip.Addr, string) {
		for _, o := range held {
			if p, perr := netip.ParsePrefix(o.Spec.Address); perr == nil && cfg.inPool(o.Spec.Pool) {
				if i, _ := cfg.rangeSetOf(p.Addr()); i == set {
					return p.Addr(), o.Name
				}
			}
		}
		return netip.Addr{}, ""
	}
	out := &Allocation{}
	var created []*ipamv1.IPAllocation
	fail := func(err error) (*Allocation, error) {
		a.rollback(created)
		return nil, err
	}
	for i := range cfg.RangeSets {
		w := wanted[i]
		if addr, name := own(i); addr.IsValid() {
			if w.IsValid() && w != addr {
				return fail(fmt.Errorf("multinet-ipam: pool %s: the attachment (container %s, %s) already holds %s, not the requested %s: %w",
					cfg.Pool, short(req.ContainerID), req.IfName, addr, w, ErrTaken))
			}
			out.Addresses = append(out.Addresses, cfg.address(addr, name))
			continue
		}
		if err := a.admit(req); err != nil {
			return fail(err)
		}
		var obj *ipamv1.IPAllocation
		if w.IsValid() {
			obj, err = a.createRequested(ctx, cfg, req, w)
		} else {
			obj, err = a.createFree(ctx, cfg, req, i, a.owner(cfg, req.Attachment, nil))
		}
		if err != nil {
			return fail(err)
		}
		created = append(created, obj)
		p, _ := netip.ParsePrefix(obj.Spec.Address)
		out.Addresses = append(out.Addresses, cfg.address(p.Addr(), obj.Name))
	}
	return out, nil
}

// assignRequested maps each requested address to its range set. Errors
// (ErrOutOfRange): an address in no range, one never allocated, two in
// one range set.
func (c *Config) assignRequested(ips []netip.Addr) (map[int]netip.Addr, error) {
	wanted := map[int]netip.Addr{}
	for _, ip := range ips {
		i, r := c.rangeSetOf(ip)
		if i < 0 {
			return nil, fmt.Errorf("multinet-ipam: pool %s: requested address %s is in none of its ranges (%s): %w", c.Pool, ip, c.describeRanges(), ErrOutOfRange)
		}
		if why := c.allocatable(ip, r); why != "" {
			return nil, fmt.Errorf("multinet-ipam: pool %s: requested address %s is %s: %w", c.Pool, ip, why, ErrOutOfRange)
		}
		if prev, dup := wanted[i]; dup {
			return nil, fmt.Errorf("multinet-ipam: pool %s: requested addresses %s and %s are in one range set (one address per range set): %w", c.Pool, prev, ip, ErrOutOfRange)
		}
		wanted[i] = ip
	}
	return wanted, nil
}

func (c *Config) describeRanges() string {
	var parts []string
	for _, s := range c.RangeSets {
		for _, r := range s {
			parts = append(parts, r.Start.String()+"-"+r.End.String())
		}
	}
	return strings.Join(parts, ", ")
}

// address is the result entry of addr: its subnet's prefix length and gateway.
func (c *Config) address(addr netip.Addr, object string) Address {
	_, r, _ := c.subnetOf(addr)
	return Address{Prefix: netip.PrefixFrom(addr, r.Subnet.Bits()), Gateway: r.Gateway, Object: object}
}

// owner is the spec.owner of an allocation of att (claim-owned when claim
// is set).
func (a *Allocator) owner(cfg *Config, att Attachment, claim *ipamv1.ObjectReference) ipamv1.IPAllocationOwner {
	o := ipamv1.IPAllocationOwner{ContainerID: att.ContainerID, IfName: att.IfName, Network: cfg.Network, Node: a.Node, Claim: claim}
	if att.Pod != nil {
		o.Pod = &ipamv1.ObjectReference{Namespace: att.Pod.Namespace, Name: att.Pod.Name, UID: att.Pod.UID}
	}
	return o
}

// newObject is the IPAllocation of addr in cfg's pool held by owner.
func newObject(cfg *Config, addr netip.Addr, owner ipamv1.IPAllocationOwner) *ipamv1.IPAllocation {
	_, r, _ := cfg.subnetOf(addr)
	obj := &ipamv1.IPAllocation{
		ObjectMeta: metav1.ObjectMeta{Name: ObjectName(cfg.Pool, addr), Labels: map[string]string{}},
		Spec: ipamv1.IPAllocationSpec{
			Pool:    cfg.Pool,
			Address: netip.PrefixFrom(addr, r.Subnet.Bits()).String(),
			Owner:   owner,
		},
	}
	if owner.Claim != nil {
		obj.Labels[LabelClaimUID] = owner.Claim.UID
	} else {
		obj.Labels[LabelAttachment] = AttachmentKey(owner.ContainerID, owner.IfName)
	}
	return obj
}

// create creates obj; taken reports an AlreadyExists. A create whose
// outcome is unknown (the call timed out or the connection broke after
// the request was sent: the API server may have stored it) is settled by
// reading the object back: ours (the same owner) is created, another's is
// taken, none is created again; at most maxAmbiguousCreates times while
// ctx lasts.
func (a *Allocator) create(ctx context.Context, obj *ipamv1.IPAllocation) (created *ipamv1.IPAllocation, taken bool, err error) {
	for i := 0; ; i++ {
		created, err = a.createOnce(ctx, obj)
		if err == nil || !ambiguous(err) || ctx.Err() != nil || i == maxAmbiguousCreates {
			break
		}
		stored, gerr := a.get(ctx, obj.Name)
		if gerr == nil {
			created, err = stored, nil
			if !equality.Semantic.DeepEqual(stored.Spec.Owner, obj.Spec.Owner) {
				err = apierrors.NewAlreadyExists(ipamv1.Resource("ipallocations"), obj.Name)
			}
			break
		}
		if !apierrors.IsNotFound(gerr) {
			break
		}
	}
	if apierrors.IsAlreadyExists(err) {
		if a.OnConflict != nil {
			a.OnConflict()
		}
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("multinet-ipam: creating IPAllocation %s (%s of pool %s): %w", obj.Name, obj.Spec.Address, obj.Spec.Pool, err)
	}
	if a.Cache != nil {
		a.Cache.created(created)
	}
	return created, false, nil
}

// maxAmbiguousCreates bounds the creates repeated after an unknown outcome.
const maxAmbiguousCreates = 2

// createOnce is one Create request, bounded by CallTimeout.
func (a *Allocator) createOnce(ctx context.Context, obj *ipamv1.IPAllocation) (*ipamv1.IPAllocation, error) {
	cctx, cancel := a.call(ctx)
	defer cancel()
	return a.IPAM.IPAllocations().Create(cctx, obj, metav1.CreateOptions{})
}

// ambiguous reports whether err leaves unknown whether a write was stored:
// no answer from the API server (a timeout, a broken connection), or its
// own timeout status. An answer with any other status is definite.
func ambiguous(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	return true
}

// createRequested allocates the requested address w (ErrTaken when another
// holds it).
func (a *Allocator) createRequested(ctx context.Context, cfg *Config, req Request, w netip.Addr) (*ipamv1.IPAllocation, error) {
	if cfg.LegacyPool != "" {
		// held under the pool's key before tenancy (never the attachment's
		// own: Allocate reuses those)
		legacy, err := a.get(ctx, ObjectName(cfg.LegacyPool, w))
		if err == nil {
			return nil, fmt.Errorf("multinet-ipam: pool %s: requested address %s is held by %s: %w", cfg.Pool, w, describeOwner(legacy.Spec.Owner), ErrTaken)
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	obj, taken, err := a.create(ctx, newObject(cfg, w, a.owner(cfg, req.Attachment, nil)))
	if err != nil || !taken {
		return obj, err
	}
	holder, err := a.get(ctx, ObjectName(cfg.Pool, w))
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: pool %s: requested address %s is taken: %w", cfg.Pool, w, errors.Join(ErrTaken, err))
	}
	return nil, fmt.Errorf("multinet-ipam: pool %s: requested address %s is held by %s: %w", cfg.Pool, w, describeOwner(holder.Spec.Owner), ErrTaken)
}

func describeSet(s RangeSet) string {
	var parts []string
	for _, r := range s {
		parts = append(parts, r.Start.String()+"-"+r.End.String())
	}
	return strings.Join(parts, ", ")
}

// walkOrder is where (start) and how (stride) the search of a range set
// walks for the attachment: a hash of the container ID, interface name and
// range set, so that allocators on many nodes do not all race for the
// set's lowest free address nor probe the same run of addresses; the same
// attachment always walks the same way.
func walkOrder(containerID, ifName string, set int) (start, stride uint64) {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", containerID, ifName, set)))
	return binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])
}

// heldAllocations are the allocations the attachment holds already (an
// ADD repeated without DEL), for Allocate. When the Cache has synced and
// knows of none of cfg's pool (ByAttachment: the informer and this
// process's own creates), the attachment holds none and no request is
// sent: only this node's multinetd allocates for its attachments (a pod of
// another node is refused), so an allocation the Cache does not show is
// one a previous multinetd process created before this one's informer
// synced from a consistent list, which has it. When the Cache shows one
// (it may have been released meanwhile) or has not synced, the API server
// is asked (attachmentAllocations). docs/decisions/ipam.md.
func (a *Allocator) heldAllocations(ctx context.Context, cfg *Config, containerID, ifName string) ([]ipamv1.IPAllocation, error) {
	if a.Cache != nil && a.Cache.HasSynced() && !slices.ContainsFunc(a.Cache.ByAttachment(containerID, ifName),
		func(o *ipamv1.IPAllocation) bool { return cfg.inPool(o.Spec.Pool) }) {
		return nil, nil
	}
	return a.attachmentAllocations(ctx, containerID, ifName)
}

// attachmentAllocations lists the attachment-owned allocations of
// (containerID, ifName), of any pool, from the API server.
func (a *Allocator) attachmentAllocations(ctx context.Context, containerID, ifName string) ([]ipamv1.IPAllocation, error) {
	cctx, cancel := a.call(ctx)
	defer cancel()
	sel := labels.SelectorFromSet(labels.Set{LabelAttachment: AttachmentKey(containerID, ifName)}).String()
	list, err := a.IPAM.IPAllocations().List(cctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: listing the allocations of container %s %s: %w", short(containerID), ifName, err)
	}
	var out []ipamv1.IPAllocation
	for _, o := range list.Items {
		if o.Spec.Owner.Claim == nil && o.Spec.Owner.ContainerID == containerID && o.Spec.Owner.IfName == ifName {
			out = append(out, o)
		}
	}
	return out, nil
}

func (a *Allocator) get(ctx context.Context, name string) (*ipamv1.IPAllocation, error) {
	cctx, cancel := a.call(ctx)
	defer cancel()
	obj, err := a.IPAM.IPAllocations().Get(cctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: reading IPAllocation %s: %w", name, err)
	}
	return obj, nil
}

// release deletes the allocation name (exactly that object: UID
// precondition) and reports whether it did; one already gone, or replaced
// by another object of the name (the address released and allocated
// again), is no error.
func (a *Allocator) release(ctx context.Context, name string, uid types.UID) (bool, error) {
	cctx, cancel := a.call(ctx)
	defer cancel()
	err := a.IPAM.IPAllocations().Delete(cctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if a.Cache != nil && (err == nil || apierrors.IsNotFound(err)) {
		a.Cache.forget(name, uid)
		a.Cache.deleted(name, uid)
	}
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	}
	return false, fmt.Errorf("multinet-ipam: releasing IPAllocation %s: %w", name, err)
}

// rollback releases what a failed Allocate created (best effort, with a
// context of its own: the caller's may be what ended).
func (a *Allocator) rollback(created []*ipamv1.IPAllocation) {
	if len(created) == 0 {
		return
	}
	ctx, cancel := a.call(context.Background())
	defer cancel()
	for _, o := range created {
		_, _ = a.release(ctx, o.Name, o.UID)
	}
}

// describeOwner names an allocation's holder for error messages.
func describeOwner(o ipamv1.IPAllocationOwner) string {
	var b strings.Builder
	if o.Claim != nil {
		fmt.Fprintf(&b, "IPAMClaim %s/%s", o.Claim.Namespace, o.Claim.Name)
		return b.String()
	}
	if o.Pod != nil {
		fmt.Fprintf(&b, "pod %s/%s ", o.Pod.Namespace, o.Pod.Name)
	}
	fmt.Fprintf(&b, "(container %s, %s, node %s)", short(o.ContainerID), o.IfName, o.Node)
	return b.String()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
