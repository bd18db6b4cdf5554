package netconf

import (
	"sync"

	"github.com/containernetworking/cni/libcni"
)

// DefaultMemoEntries bounds a Resolver's memo when MaxEntries is 0.
const DefaultMemoEntries = 4096

// Resolver is Resolve for the CNI hot path: it remembers the list resolved
// from each NetworkAttachmentDefinition's spec.config, so a NAD whose
// spec.config is unchanged since the last call costs a map lookup and a
// string comparison instead of a parse. On-disk configs are not memoized here
// (ConfDir caches them by modification time) and neither are errors. It is
// safe for concurrent use.
type Resolver struct {
	dir ConfigSource
	max int

	mu   sync.RWMutex
	memo map[string]memoEntry // by "namespace/name"
}

type memoEntry struct {
	config string
	list   *libcni.NetworkConfigList
}

// NewResolver returns a Resolver that looks up NADs without spec.config in
// dir (which may be nil) and remembers at most maxEntries NADs
// (DefaultMemoEntries when 0); past that the memo is emptied and refilled.
func NewResolver(dir ConfigSource, maxEntries int) *Resolver {
	if maxEntries <= 0 {
		maxEntries = DefaultMemoEntries
	}
	return &Resolver{dir: dir, max: maxEntries, memo: map[string]memoEntry{}}
}

// Resolve is the package-level Resolve (spec §3.4.1, §3.4.2) with the memo.
// The returned list is shared and read-only.
func (r *Resolver) Resolve(nadNamespace, nadName, specConfig string) (*libcni.NetworkConfigList, error) {
	if specConfig == "" {
		return Resolve(nadNamespace, nadName, "", r.dir)
	}
	key := nadNamespace + "/" + nadName
	r.mu.RLock()
	e, ok := r.memo[key]
	r.mu.RUnlock()
	if ok && e.config == specConfig {
		return e.list, nil
	}
	list, err := Resolve(nadNamespace, nadName, specConfig, r.dir)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if _, exists := r.memo[key]; !exists && len(r.memo) >= r.max {
		clear(r.memo)
	}
	r.memo[key] = memoEntry{config: specConfig, list: list}
	r.mu.Unlock()
	return list, nil
}

// Forget drops the memo of one NAD (call it when the NAD is deleted).
func (r *Resolver) Forget(nadNamespace, nadName string) {
	r.mu.Lock()
	delete(r.memo, nadNamespace+"/"+nadName)
	r.mu.Unlock()
}
