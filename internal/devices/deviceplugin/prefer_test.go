package deviceplugin

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
)

func TestPreferred(t *testing.T) {
	// NUMA 0: PF a (a1, a2), PF b (b1, b2, b3); NUMA 1: PF c (c1, c2); x1 unhealthy on NUMA 0; n1 no NUMA.
	devs := map[string]pool.Device{}
	for _, d := range []pool.Device{
		{ID: "a1", Healthy: true, NUMANode: 0, Parent: "a"}, {ID: "a2", Healthy: true, NUMANode: 0, Parent: "a"},
		{ID: "b1", Healthy: true, NUMANode: 0, Parent: "b"}, {ID: "b2", Healthy: true, NUMANode: 0, Parent: "b"},
		{ID: "b3", Healthy: true, NUMANode: 0, Parent: "b"},
		{ID: "c1", Healthy: true, NUMANode: 1, Parent: "c"}, {ID: "c2", Healthy: true, NUMANode: 1, Parent: "c"},
		{ID: "x1", Healthy: false, NUMANode: 0, Parent: "x"},
		{ID: "n1", Healthy: true, NUMANode: pool.NoNUMA},
	} {
		devs[d.ID] = d
	}
	all := []string{"c2", "a2", "b3", "x1", "c1", "n1", "a1", "b2", "b1"}
	tests := []struct {
		name            string
		available, must []string
		size            int
		want            []string
	}{
		{"NUMA node with most devices, then the biggest parent", all, nil, 2, []string{"b1", "b2"}},
		{"must-include decides NUMA and parent", all, []string{"a1"}, 2, []string{"a1", "a2"}},
		{"same parent first, then same NUMA", all, []string{"a2"}, 3, []string{"a2", "a1", "b1"}},
		{"must-include on NUMA 1", all, []string{"c2"}, 3, []string{"c2", "c1", "b1"}},
		{"node that can hold the request wins", []string{"a1", "c1", "c2"}, nil, 2, []string{"c1", "c2"}},
		{"unhealthy and unknown last", []string{"x1", "zz", "a1"}, nil, 3, []string{"a1", "x1", "zz"}},
		{"no NUMA known: by parent then ID", []string{"n1", "zz"}, nil, 1, []string{"n1"}},
		{"must-include longer than size kept", all, []string{"c1", "c2", "a1"}, 2, []string{"c1", "c2", "a1"}},
		{"duplicates ignored", []string{"a1", "a1", "a2"}, []string{"a1", "a1"}, 2, []string{"a1", "a2"}},
		{"available too short", []string{"a1"}, nil, 3, []string{"a1"}},
		{"size zero", all, nil, 0, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := preferred(devs, tc.available, tc.must, tc.size); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("preferred = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreferredHugeSize: an absurd allocation_size (a malformed request; it
// once made the plugin allocate 16 GiB) returns what is available without
// allocating by the size.
func TestPreferredHugeSize(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := preferred(nil, []string{"b", "a"}, nil, 1<<24)
	runtime.ReadMemStats(&after)
	if len(got) != 2 {
		t.Errorf("preferred = %v, want both available IDs", got)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Errorf("preferred allocated %d bytes for 2 IDs", d)
	}
}
