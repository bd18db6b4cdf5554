package ipam

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Errors of the tenancy rules; test with errors.Is.
var (
	// ErrPoolNotAllowed: the network's namespace may not allocate from
	// the pool its configuration names (another namespace's pool, or a
	// shared pool that does not list it).
	ErrPoolNotAllowed = errors.New("pool not allowed")
	// ErrQuota: the namespace holds as many addresses as its limit.
	ErrQuota = errors.New("namespace address limit reached")
)

// DefaultMaxAllocationsPerNamespace is Tenancy.MaxPerNamespace's default
// in multinetd's configuration (ipamMaxAllocationsPerNamespace):
// docs/decisions/ipam-tenancy.md says why 1024.
const DefaultMaxAllocationsPerNamespace = 1024

// SharedPool is a pool the cluster admin shares with namespaces other
// than its owner's (multinetd's ipamSharedPools):
//
//	{"pool": "team-a/blue", "allowedNamespaces": ["team-b"]}   // team-a's pool, team-b may use it
//	{"pool": "blue", "allowedNamespaces": ["*"]}               // a cluster pool every namespace may use
type SharedPool struct {
	// Pool is a cluster pool's name ("blue": named by the NADs of the
	// admin namespaces) or a namespace's pool ("team-a/blue").
	Pool string `json:"pool"`
	// AllowedNamespaces may allocate from the pool besides its owner;
	// "*" is every namespace.
	AllowedNamespaces []string `json:"allowedNamespaces"`
}

// Tenancy is who may allocate from which pool, and how many addresses a
// namespace may hold (docs/decisions/ipam-tenancy.md). The zero value
// and nil are today's model without tenancy: every pool is the cluster's,
// no limit.
//
// A pool named by the IPAM configuration of a network whose
// NetworkAttachmentDefinition is in namespace N:
//   - N an admin namespace (AdminNamespaces): "blue" is the cluster pool
//     "blue" (the key of every allocation before tenancy), "team-a/blue"
//     is team-a's pool;
//   - N a tenant namespace: "N/blue" or "blue" is N's own pool, keyed
//     "N/blue" (allocations made under the old key "blue" are still seen:
//     Config.LegacyPool); "team-a/blue" is team-a's and "blue", when
//     SharedPools declares the cluster pool "blue", is the cluster's: each
//     only when its SharedPool lists N (else ErrPoolNotAllowed).
type Tenancy struct {
	// AdminNamespaces are the namespaces whose NADs the cluster admin
	// owns: their unqualified pool names are cluster pools, they may name
	// any pool, and their pods are not counted against a limit.
	AdminNamespaces []string
	// SharedPools are the pools the admin shares.
	SharedPools []SharedPool
	// MaxPerNamespace bounds the addresses the pods and IPAMClaims of one
	// tenant namespace hold (IPAllocations of any pool); <= 0: no limit.
	MaxPerNamespace int
	// NamespaceMax overrides MaxPerNamespace for the named namespaces
	// (<= 0: no limit).
	NamespaceMax map[string]int
}

// Check validates the declarations. Errors name the entry.
func (t *Tenancy) Check() error {
	if t == nil {
		return nil
	}
	var errs []error
	for i, sp := range t.SharedPools {
		if ns, name, qualified := splitPool(sp.Pool); sp.Pool == "" || (qualified && (name == "" || len(validation.IsDNS1123Label(ns)) > 0)) {
			errs = append(errs, fmt.Errorf("ipamSharedPools[%d].pool %q: want a pool name or namespace/pool", i, sp.Pool))
		}
		if len(sp.AllowedNamespaces) == 0 {
			errs = append(errs, fmt.Errorf("ipamSharedPools[%d] (%s): allowedNamespaces is empty", i, sp.Pool))
		}
		for j, ns := range sp.AllowedNamespaces {
			if ns != "*" && len(validation.IsDNS1123Label(ns)) > 0 {
				errs = append(errs, fmt.Errorf("ipamSharedPools[%d].allowedNamespaces[%d] %q: not a namespace name or \"*\"", i, j, ns))
			}
		}
	}
	return errors.Join(errs...)
}

// splitPool splits "ns/name" (qualified) from "name".
func splitPool(pool string) (ns, name string, qualified bool) {
	ns, name, qualified = strings.Cut(pool, "/")
	if !qualified {
		return "", pool, false
	}
	return ns, name, true
}

func (t *Tenancy) admin(ns string) bool {
	return ns == "" || slices.Contains(t.AdminNamespaces, ns)
}

// shared returns the declaration of pool, or nil.
func (t *Tenancy) shared(pool string) *SharedPool {
	for i := range t.SharedPools {
		if t.SharedPools[i].Pool == pool {
			return &t.SharedPools[i]
		}
	}
	return nil
}

func (sp *SharedPool) allows(ns string) bool {
	return slices.Contains(sp.AllowedNamespaces, ns) || slices.Contains(sp.AllowedNamespaces, "*")
}

// Resolve returns cfg with Pool set to the key of the pool that the
// network of namespace networkNS (its NetworkAttachmentDefinition's; ""
// for a network of the node's own configuration, which is the admin's)
// names, and LegacyPool to the key its allocations had before tenancy
// when that differs. A config already resolved is returned as it is.
// Errors: ErrPoolNotAllowed (naming the pool, its owner and networkNS),
// *ConfigError for a malformed namespace/pool name.
func (t *Tenancy) Resolve(cfg *Config, networkNS string) (*Config, error) {
	if cfg.resolved {
		return cfg, nil
	}
	c := *cfg
	c.resolved = true
	if t == nil {
		return &c, nil
	}
	owner, name, qualified := splitPool(cfg.Pool)
	if qualified && (name == "" || len(validation.IsDNS1123Label(owner)) > 0) {
		return nil, &ConfigError{Field: "ipam.pool", Msg: fmt.Sprintf("%q: want a pool name, or namespace/pool for a namespace's pool", cfg.Pool)}
	}
	admin := t.admin(networkNS)
	switch {
	case qualified && (admin || owner == networkNS):
		// an admin may name any pool; a namespace its own
	case qualified:
		if sp := t.shared(cfg.Pool); sp == nil || !sp.allows(networkNS) {
			return nil, notAllowed(cfg.Pool, "namespace "+owner, networkNS)
		}
	case admin:
		// a cluster pool: today's key
	default:
		if sp := t.shared(cfg.Pool); sp != nil {
			if !sp.allows(networkNS) {
				return nil, notAllowed(cfg.Pool, "the cluster (a shared pool of ipamSharedPools)", networkNS)
			}
			break
		}
		c.Pool = networkNS + "/" + name
		c.LegacyPool = name
	}
	if len(c.Pool) > MaxPoolLength {
		return nil, &ConfigError{Field: "ipam.pool", Msg: fmt.Sprintf("%q: %d characters with its namespace, at most %d", c.Pool, len(c.Pool), MaxPoolLength)}
	}
	return &c, nil
}

func notAllowed(pool, owner, ns string) error {
	return fmt.Errorf("multinet-ipam: pool %q belongs to %s; the network's namespace %q may not allocate from it (the cluster admin shares a pool by listing namespaces in multinetd's ipamSharedPools, docs/multinet-ipam.md \"Pools and namespaces\"): %w",
		pool, owner, ns, ErrPoolNotAllowed)
}

// limit is the most addresses namespace ns may hold; <= 0: no limit.
func (t *Tenancy) limit(ns string) int {
	if t == nil || ns == "" || t.admin(ns) {
		return 0
	}
	if n, ok := t.NamespaceMax[ns]; ok {
		return n
	}
	return t.MaxPerNamespace
}

// chargedNamespace is the namespace an allocation of req counts against:
// the pod's (an IPAMClaim is in the pod's namespace too).
func chargedNamespace(req Request) string {
	if req.Pod == nil {
		return ""
	}
	return req.Pod.Namespace
}

// admit refuses one more allocation for req when its namespace holds as
// many as its limit, counted from the Cache (the informer and this
// process's own creates: no request). Without a synced Cache nothing is
// refused (multinetd just started; docs/decisions/ipam-tenancy.md).
func (a *Allocator) admit(req Request) error {
	ns := chargedNamespace(req)
	max := a.Tenancy.limit(ns)
	if max <= 0 || a.Cache == nil || !a.Cache.HasSynced() {
		return nil
	}
	if n := a.Cache.CountNamespace(ns); n >= max {
		return fmt.Errorf("multinet-ipam: namespace %q holds %d addresses, its limit is %d (multinetd's ipamMaxAllocationsPerNamespace or ipamNamespaceMaxAllocations): %w", ns, n, max, ErrQuota)
	}
	return nil
}
