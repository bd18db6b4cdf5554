package ipam

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	"github.com/multinet/multinet/internal/node/kube"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	claimclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1alpha1"
)

// Release releases the addresses the attachment (containerID, ifName)
// holds, of any pool (CNI DEL), that this node allocated (mine).
// Claim-owned addresses stay (§8). Releasing what is not held is no error.
// It returns the number released.
func (a *Allocator) Release(ctx context.Context, containerID, ifName string) (int, error) {
	held, err := a.attachmentAllocations(ctx, containerID, ifName)
	if err != nil {
		return 0, err
	}
	return a.releaseAll(ctx, a.mine(held))
}

// mine keeps the allocations of a.Node (every one when Node is empty: the
// cross-node cleanup, multinet-ipam-cleanup). A node daemon may release
// only its own node's allocations: the node-scoped authority policy
// refuses it any other (docs/security.md "Node-scoped authority").
func (a *Allocator) mine(objs []ipamv1.IPAllocation) []ipamv1.IPAllocation {
	if a.Node == "" {
		return objs
	}
	var out []ipamv1.IPAllocation
	for _, o := range objs {
		if o.Spec.Owner.Node == a.Node {
			out = append(out, o)
		}
	}
	return out
}

func (a *Allocator) releaseAll(ctx context.Context, objs []ipamv1.IPAllocation) (int, error) {
	var errs []error
	n := 0
	for _, o := range objs {
		done, err := a.release(ctx, o.Name, o.UID)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// ReleaseClaim releases the addresses of the IPAMClaim with metadata.uid
// uid (after the claim was deleted) that this node allocated (mine; every
// node's when Allocator.Node is empty). It returns the number released.
func (a *Allocator) ReleaseClaim(ctx context.Context, uid string) (int, error) {
	cctx, cancel := a.call(ctx)
	defer cancel()
	sel := labels.SelectorFromSet(labels.Set{LabelClaimUID: uid}).String()
	list, err := a.IPAM.IPAllocations().List(cctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return 0, fmt.Errorf("multinet-ipam: listing the allocations of IPAMClaim %s: %w", uid, err)
	}
	var objs []ipamv1.IPAllocation
	for _, o := range list.Items {
		if o.Spec.Owner.Claim != nil && o.Spec.Owner.Claim.UID == uid {
			objs = append(objs, o)
		}
	}
	return a.releaseAll(ctx, a.mine(objs))
}

// GCAttachment is an attachment CNI GC keeps (cni.dev/valid-attachments).
type GCAttachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

// GC releases the attachment-owned addresses of cfg's pool and network
// that this node (Allocator.Node) allocated for attachments not in valid
// (CNI GC, cni.dev/valid-attachments), when older than minAge (an ADD in
// flight is not in the runtime's list yet). Claim-owned addresses stay. It
// returns the number released. A GC request names no pod, so the network's
// namespace is unknown: an unqualified pool matches that pool of every
// namespace (gcPool); the network name and the valid list still decide.
func (a *Allocator) GC(ctx context.Context, cfg *Config, valid []GCAttachment, minAge time.Duration) (int, error) {
	keep := map[GCAttachment]bool{}
	for _, v := range valid {
		keep[v] = true
	}
	sel := fields.OneTermEqualSelector(FieldNode, a.Node)
	if cfg.resolved {
		sel = fields.AndSelectors(sel, fields.OneTermEqualSelector(FieldPool, cfg.Pool))
	}
	objs, err := a.listCached(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return 0, err
	}
	now := time.Now()
	var stale []ipamv1.IPAllocation
	for _, o := range objs {
		ow := o.Spec.Owner
		if ow.Claim != nil || ow.Network != cfg.Network || ow.Node != a.Node || !gcPool(cfg, o.Spec.Pool) {
			continue
		}
		if keep[GCAttachment{ContainerID: ow.ContainerID, IfName: ow.IfName}] || now.Sub(o.CreationTimestamp.Time) < minAge {
			continue
		}
		stale = append(stale, o)
	}
	return a.releaseAll(ctx, stale)
}

// listCached lists IPAllocations from the API server's watch cache
// (resourceVersion "0": no etcd read, possibly a moment behind). For
// reads that only pick candidates: a create stays the arbiter of an
// allocation, and a delete carries the object's UID as precondition.
func (a *Allocator) listCached(ctx context.Context, opts metav1.ListOptions) ([]ipamv1.IPAllocation, error) {
	opts.ResourceVersion = "0"
	return a.list(ctx, opts)
}

// list lists IPAllocations page by page.
func (a *Allocator) list(ctx context.Context, opts metav1.ListOptions) ([]ipamv1.IPAllocation, error) {
	var out []ipamv1.IPAllocation
	opts.Limit = 500
	for {
		cctx, cancel := a.call(ctx)
		page, err := a.IPAM.IPAllocations().List(cctx, opts)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("multinet-ipam: listing IPAllocations (%s): %w", opts.FieldSelector, err)
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// Owners says whether the holders of allocations still exist. Each method
// returns false only when the object is known to be gone (NotFound, or
// another object under the name: a different UID).
type Owners interface {
	PodExists(ctx context.Context, namespace, name, uid string) (bool, error)
	ClaimExists(ctx context.Context, namespace, name, uid string) (bool, error)
}

// ReconcileOptions configure Reconcile.
type ReconcileOptions struct {
	// Owners checks pods and claims. Required.
	Owners Owners
	// MinAge spares allocations younger than this (default 0).
	MinAge time.Duration
	// Node restricts the pass to the allocations of one node ("" = all:
	// only multinet-ipam-cleanup may release other nodes' allocations).
	Node string
}

// ReconcileResult counts what Reconcile did.
type ReconcileResult struct {
	Checked       int // allocations looked at
	ReleasedPod   int // released: their pod is gone
	ReleasedClaim int // released: their IPAMClaim is gone
	Failed        int // left: their owner could not be checked or their release failed (the error says which)
}

// Reconcile releases allocations whose holder is gone: attachment-owned
// ones whose pod (namespace, name, UID) no longer exists (a DEL that never
// came: the node died, the runtime forgot the sandbox), and claim-owned
// ones whose IPAMClaim (namespace, name, UID) no longer exists (a cluster-
// scoped IPAllocation cannot carry an ownerReference to a namespaced
// IPAMClaim that the garbage collector would honour; docs/decisions/ipam.md).
// Allocations without a pod reference are left alone. Meant to run
// periodically: multinetd over its own node's allocations,
// multinet-ipam-cleanup over every node's (internal/ipam/ipamd); never as a CronJob. Owner checks are cached
// for the pass.
func (a *Allocator) Reconcile(ctx context.Context, opts ReconcileOptions) (ReconcileResult, error) {
	var res ReconcileResult
	lo := metav1.ListOptions{}
	if opts.Node != "" {
		lo.FieldSelector = fields.OneTermEqualSelector(FieldNode, opts.Node).String()
	}
	objs, err := a.listCached(ctx, lo)
	if err != nil {
		return res, err
	}
	type key struct{ kind, ns, name, uid string }
	seen := map[key]bool{}
	exists := func(k key) (bool, error) {
		if v, ok := seen[k]; ok {
			return v, nil
		}
		var ok bool
		var err error
		if k.kind == "claim" {
			ok, err = opts.Owners.ClaimExists(ctx, k.ns, k.name, k.uid)
		} else {
			ok, err = opts.Owners.PodExists(ctx, k.ns, k.name, k.uid)
		}
		if err == nil {
			seen[k] = ok
		}
		return ok, err
	}
	now := time.Now()
	var errs []error
	for _, o := range objs {
		ow := o.Spec.Owner
		if now.Sub(o.CreationTimestamp.Time) < opts.MinAge {
			continue
		}
		var k key
		switch {
		case ow.Claim != nil:
			k = key{"claim", ow.Claim.Namespace, ow.Claim.Name, ow.Claim.UID}
		case ow.Pod != nil:
			k = key{"pod", ow.Pod.Namespace, ow.Pod.Name, ow.Pod.UID}
		default:
			continue
		}
		res.Checked++
		ok, err := exists(k)
		if err != nil {
			res.Failed++
			errs = append(errs, err)
			continue
		}
		if ok {
			continue
		}
		done, err := a.release(ctx, o.Name, o.UID)
		if err != nil {
			res.Failed++
			errs = append(errs, err)
		}
		if !done {
			continue
		}
		if k.kind == "claim" {
			res.ReleasedClaim++
		} else {
			res.ReleasedPod++
		}
	}
	return res, errors.Join(errs...)
}

// LiveOwners checks owners with a GET each (no cache: an informer's lag
// must not make a live pod look gone).
type LiveOwners struct {
	Pods   corev1client.PodsGetter
	Claims claimclient.IPAMClaimsGetter
}

// PodExists GETs the pod; a static pod's mirror counts by its
// kubernetes.io/config.mirror UID (kube.IsRuntimePod).
func (l LiveOwners) PodExists(ctx context.Context, namespace, name, uid string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	pod, err := l.Pods.Pods(namespace).Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("multinet-ipam: reading pod %s/%s: %w", namespace, name, err)
	}
	return kube.IsRuntimePod(pod, uid), nil
}

// ClaimExists GETs the IPAMClaim.
func (l LiveOwners) ClaimExists(ctx context.Context, namespace, name, uid string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	claim, err := l.Claims.IPAMClaims(namespace).Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("multinet-ipam: reading IPAMClaim %s/%s: %w", namespace, name, err)
	}
	return uid == "" || string(claim.UID) == uid, nil
}

// gcPool reports whether an allocation of pool is one of cfg's for GC: the
// resolved key (or its key before tenancy), or, unresolved, the pool or an
// unqualified pool's name in any namespace.
func gcPool(cfg *Config, pool string) bool {
	if cfg.resolved || cfg.inPool(pool) {
		return cfg.inPool(pool)
	}
	_, name, qualified := splitPool(pool)
	_, own, ownQualified := splitPool(cfg.Pool)
	return qualified && !ownQualified && name == own
}
