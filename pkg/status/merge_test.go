package status

import (
	"reflect"
	"testing"
)

func TestMerge(t *testing.T) {
	existing := []NetworkStatus{
		{Name: "cbr0", Interface: "eth0", Default: true},
		{Name: "ns/a", Interface: "net1", IPs: []string{"10.0.0.1"}},
	}
	orig := []NetworkStatus{existing[0], existing[1]}
	tests := []struct {
		name   string
		update []NetworkStatus
		want   []NetworkStatus
	}{
		{"§5.1 no update", nil, existing},
		{"§5.1 an IP added to an attachment: replaced in place",
			[]NetworkStatus{{Name: "ns/a", Interface: "net1", IPs: []string{"10.0.0.1", "10.0.0.2"}}},
			[]NetworkStatus{existing[0], {Name: "ns/a", Interface: "net1", IPs: []string{"10.0.0.1", "10.0.0.2"}}}},
		{"§5.1 §4.2.2 hot-plugged attachment of the same network on another interface: appended",
			[]NetworkStatus{{Name: "ns/a", Interface: "net2"}, {Name: "ns/b", Interface: "net3"}},
			[]NetworkStatus{existing[0], existing[1], {Name: "ns/a", Interface: "net2"}, {Name: "ns/b", Interface: "net3"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Merge(existing, tt.update)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Merge =\n%#v\nwant\n%#v", got, tt.want)
			}
			if !reflect.DeepEqual(existing, orig) {
				t.Errorf("Merge modified existing: %#v", existing)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	existing := []NetworkStatus{
		{Name: "cbr0", Interface: "eth0", Default: true},
		{Name: "ns/a", Interface: "net1"},
		{Name: "ns/a", Interface: "net2"},
	}
	got := Remove(existing, "ns/a", "net1")
	want := []NetworkStatus{existing[0], existing[2]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Remove =\n%#v\nwant\n%#v", got, want)
	}
	if len(existing) != 3 || existing[1].Interface != "net1" {
		t.Errorf("Remove modified existing: %#v", existing)
	}
	if got := Remove(existing, "ns/a", "net9"); !reflect.DeepEqual(got, existing) {
		t.Errorf("Remove of an absent attachment changed the list: %#v", got)
	}
}
