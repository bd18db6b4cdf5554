package policysync

import (
	"sort"
	"sync"

	"github.com/multinet/multinet/internal/node/state"
)

// sandbox is what the controller keeps of one local pod sandbox.
type sandbox struct {
	rec *state.Record
	// table: multinetd's table may be in the sandbox's netns (unknown after
	// a restart: true until removed once).
	table bool
	// rules is the number of rules of its table (metrics).
	rules int
	// digest is what this multinetd last wrote or found in its table
	// (nftpolicy.Digest; "" when not known, as after a restart).
	digest string
}

// sandboxes are the local pod sandboxes by container ID, and by pod.
type sandboxes struct {
	mu    sync.Mutex
	byID  map[string]*sandbox
	byPod map[string]map[string]bool // namespace/name -> container IDs
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// set keeps rec (a complete record) as its sandbox's; table is whether a
// table may already be in its netns when the sandbox was not known.
func (s *sandboxes) set(rec *state.Record, table bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID, s.byPod = map[string]*sandbox{}, map[string]map[string]bool{}
	}
	if sb, ok := s.byID[rec.ContainerID]; ok {
		sb.rec = rec
		return
	}
	s.byID[rec.ContainerID] = &sandbox{rec: rec, table: table}
	k := podKey(rec.PodNamespace, rec.PodName)
	if s.byPod[k] == nil {
		s.byPod[k] = map[string]bool{}
	}
	s.byPod[k][rec.ContainerID] = true
}

// forget drops container id.
func (s *sandboxes) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	k := podKey(sb.rec.PodNamespace, sb.rec.PodName)
	delete(s.byPod[k], id)
	if len(s.byPod[k]) == 0 {
		delete(s.byPod, k)
	}
}

// get returns a copy of container id's sandbox.
func (s *sandboxes) get(id string) (sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.byID[id]
	if !ok {
		return sandbox{}, false
	}
	return *sb, true
}

// update sets what id's table holds, when id is still known.
func (s *sandboxes) update(id string, table bool, rules int, digest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.byID[id]; ok {
		sb.table, sb.rules, sb.digest = table, rules, digest
	}
}

// ofPod returns the container IDs of pod namespace/name.
func (s *sandboxes) ofPod(namespace, name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.byPod[podKey(namespace, name)])
}

// where returns the container IDs of the pods for which
// keep(namespace, name) is true (nil keep: every pod), sorted.
func (s *sandboxes) where(keep func(namespace, name string) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, sb := range s.byID {
		if keep == nil || keep(sb.rec.PodNamespace, sb.rec.PodName) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// totals are the sandboxes with a table and the rules of all tables.
func (s *sandboxes) totals() (tables, rules int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range s.byID {
		if sb.table {
			tables++
			rules += sb.rules
		}
	}
	return tables, rules
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
