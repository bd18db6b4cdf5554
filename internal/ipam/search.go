package ipam

import (
	"context"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
)

// listAfter is the number of create conflicts after which a search lists
// the pool (once) to learn which addresses are held, instead of finding
// them out one create at a time: its Cache lags, or it has none.
const listAfter = 8

// search is one search for a free address of a range set.
type search struct {
	a     *Allocator
	cfg   *Config
	owner ipamv1.IPAllocationOwner
	// held are addresses known to be held: found by a create conflict or
	// by a list of the pool during this search.
	held   map[netip.Addr]bool
	listed bool // held includes a list of the pool
	// cached are addresses skipped only because the Cache has them (it
	// may lag behind a release).
	cached    []netip.Addr
	conflicts int
}

// createFree allocates a free address of range set i for owner: it walks
// the set in the attachment's order (walkOrder), skipping the network,
// broadcast and gateway addresses, excluded prefixes, and addresses known
// to be held (the Cache, conflicts, a list of the pool), and creates the
// first IPAllocation it can. After listAfter conflicts it lists the pool
// once; MaxConflicts conflicts end it (ErrConflicts). When every address
// was skipped or taken, the addresses skipped only on the Cache's word are
// checked against a list of the pool and tried; then ErrExhausted.
func (a *Allocator) createFree(ctx context.Context, cfg *Config, req Request, i int, owner ipamv1.IPAllocationOwner) (*ipamv1.IPAllocation, error) {
	s := &search{a: a, cfg: cfg, owner: owner, held: map[netip.Addr]bool{}}
	if cfg.LegacyPool != "" && (a.Cache == nil || !a.Cache.HasSynced()) {
		// the addresses held under the pool's key before tenancy are
		// known from a list only (docs/decisions/ipam-tenancy.md)
		if err := s.list(ctx); err != nil {
			return nil, err
		}
	}
	set := cfg.RangeSets[i]
	start, stride := walkOrder(req.ContainerID, req.IfName, i)
	c := newCursor(set, start, stride)
	for {
		addr, r, ok := c.next()
		if !ok {
			break
		}
		if cfg.allocatable(addr, r) != "" || s.held[addr] {
			continue
		}
		if a.Cache != nil && (a.Cache.Held(ObjectName(cfg.Pool, addr)) || (cfg.LegacyPool != "" && a.Cache.Held(ObjectName(cfg.LegacyPool, addr)))) {
			s.cached = append(s.cached, addr)
			continue
		}
		if obj, err := s.try(ctx, addr); obj != nil || err != nil {
			return obj, err
		}
	}
	if len(s.cached) > 0 {
		if !s.listed {
			if err := s.list(ctx); err != nil {
				return nil, err
			}
		}
		for _, addr := range s.cached {
			if s.held[addr] {
				continue
			}
			if obj, err := s.try(ctx, addr); obj != nil || err != nil {
				return obj, err
			}
		}
	}
	return nil, fmt.Errorf("multinet-ipam: pool %s: range set %d (%s): %w", cfg.Pool, i, describeSet(set), ErrExhausted)
}

// try creates the allocation of addr: the object, or nil when the address
// was taken meanwhile; an error ends the search.
func (s *search) try(ctx context.Context, addr netip.Addr) (*ipamv1.IPAllocation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("multinet-ipam: pool %s: %w", s.cfg.Pool, err)
	}
	obj, taken, err := s.a.create(ctx, newObject(s.cfg, addr, s.owner))
	if err != nil || !taken {
		return obj, err
	}
	s.held[addr] = true
	s.conflicts++
	if s.conflicts >= s.a.maxConflicts() {
		return nil, fmt.Errorf("multinet-ipam: pool %s: %d addresses were taken by other allocators while this one tried them: %w", s.cfg.Pool, s.conflicts, ErrConflicts)
	}
	if s.conflicts == listAfter {
		if err := s.list(ctx); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// list adds the addresses of every IPAllocation of the pool (and of its
// key before tenancy, Config.LegacyPool) to held.
func (s *search) list(ctx context.Context) error {
	for _, pool := range []string{s.cfg.Pool, s.cfg.LegacyPool} {
		if pool == "" {
			continue
		}
		objs, err := s.a.listCached(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(FieldPool, pool).String()})
		if err != nil {
			return err
		}
		for _, o := range objs {
			if p, err := netip.ParsePrefix(o.Spec.Address); err == nil {
				s.held[p.Addr()] = true
			}
		}
	}
	s.listed = true
	return nil
}
