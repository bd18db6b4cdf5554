package deviceplugin

import (
	"cmp"
	"maps"
	"slices"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
)

// preferred picks size device IDs out of available for one container
// (GetPreferredAllocation). Every ID of mustInclude comes first. The rest
// are chosen so that the allocation stays on one NUMA node and, within it,
// on as few parents (PFs) as possible:
//
//  1. target NUMA node: the most common node among mustInclude; without
//     one, the node that has the most candidates among those that can hold
//     the whole remainder, else the node with the most candidates;
//  2. candidates are ranked healthy first, then on the target node, then by
//     parent: parents already in the allocation first, then parents with
//     more candidates on the same node, then by name; ties by ID.
//
// IDs unknown to the pool rank last. When mustInclude is longer than size
// it is returned as is; when available is too short, all of it is.
func preferred(devs map[string]pool.Device, available, mustInclude []string, size int) []string {
	// size comes from the request: never allocate by it (a huge
	// allocation_size must not cost more than the IDs it names).
	chosen := make([]string, 0, min(max(size, 0), len(mustInclude)+len(available)))
	in := map[string]bool{}
	for _, id := range mustInclude {
		if !in[id] {
			in[id] = true
			chosen = append(chosen, id)
		}
	}
	need := size - len(chosen)
	if need <= 0 {
		return chosen
	}
	var cands []pool.Device
	for _, id := range available {
		if in[id] {
			continue
		}
		in[id] = true
		d, ok := devs[id]
		if !ok {
			d = pool.Device{ID: id, NUMANode: pool.NoNUMA}
		}
		cands = append(cands, d)
	}

	target := targetNUMA(devs, chosen, cands, need)
	chosenParents := map[string]int{}
	for _, id := range chosen {
		if d, ok := devs[id]; ok && d.Parent != "" {
			chosenParents[d.Parent]++
		}
	}
	type group struct {
		numa   int
		parent string
	}
	groupSize := map[group]int{}
	for _, d := range cands {
		groupSize[group{d.NUMANode, d.Parent}]++
	}
	rank := func(d pool.Device) []int {
		_, known := devs[d.ID]
		return []int{
			b2i(!known), b2i(!d.Healthy),
			b2i(target != pool.NoNUMA && d.NUMANode != target),
			-chosenParents[d.Parent],
			-groupSize[group{d.NUMANode, d.Parent}],
		}
	}
	slices.SortStableFunc(cands, func(a, b pool.Device) int {
		if c := slices.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Parent, b.Parent), cmp.Compare(a.ID, b.ID))
	})
	for _, d := range cands[:min(need, len(cands))] {
		chosen = append(chosen, d.ID)
	}
	return chosen
}

func targetNUMA(devs map[string]pool.Device, chosen []string, cands []pool.Device, need int) int {
	count := map[int]int{}
	for _, id := range chosen {
		if d, ok := devs[id]; ok && d.NUMANode != pool.NoNUMA {
			count[d.NUMANode]++
		}
	}
	if len(count) > 0 {
		return mostCommon(count, 0)
	}
	for _, d := range cands {
		if _, ok := devs[d.ID]; ok && d.Healthy && d.NUMANode != pool.NoNUMA {
			count[d.NUMANode]++
		}
	}
	if len(count) == 0 {
		return pool.NoNUMA
	}
	return mostCommon(count, need)
}

// mostCommon returns the key with the largest count, preferring keys whose
// count reaches atLeast; ties go to the lowest key.
func mostCommon(count map[int]int, atLeast int) int {
	best, bestN, bestFits := pool.NoNUMA, -1, false
	for _, k := range slices.Sorted(maps.Keys(count)) {
		n := count[k]
		fits := n >= atLeast
		if (fits && !bestFits) || (fits == bestFits && n > bestN) {
			best, bestN, bestFits = k, n, fits
		}
	}
	return best
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
