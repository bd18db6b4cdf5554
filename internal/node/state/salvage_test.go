package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Salvage reads the attachments that decode before the first error of a
// corrupt record, says whether the list was read whole, and trusts nothing
// of a record naming another container.
func TestSalvage(t *testing.T) {
	r := &Record{Version: RecordVersion, ContainerID: "c1", Netns: "/ns", PodNamespace: "ns1", PodName: "p", CNIArgs: "K8S_POD_NAME=p",
		Attachments: []Attachment{
			{Network: "def", IfName: "eth0", ConfList: json.RawMessage(`{"name":"def","cniVersion":"1.0.0","plugins":[{"type":"bridge"}]}`), Phase: PhaseAdded},
			{Network: "ns1/a", IfName: "net1", ConfList: json.RawMessage(`{"name":"a","cniVersion":"1.0.0","plugins":[{"type":"bridge"}]}`), Phase: PhaseAdded},
		}}
	full, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Index(string(full), `"ifName":"net1"`)
	for _, tt := range []struct {
		name      string
		data      string
		id        string
		wantIfs   int
		wantWhole bool
	}{
		{"whole", string(full), "c1", 2, true},
		{"garbage after the list", string(full[:strings.Index(string(full), `,"complete"`)]) + `,"complete":tru`, "c1", 2, true},
		{"cut in the second attachment", string(full[:cut]), "c1", 1, false},
		{"garbage", "\x00\x01", "c1", 0, false},
		{"empty", "", "c1", 0, false},
		{"another container", string(full), "c2", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, whole := Salvage([]byte(tt.data), tt.id)
			if len(got.Attachments) != tt.wantIfs || whole != tt.wantWhole {
				t.Errorf("Salvage = %d attachments, whole %v; want %d, %v", len(got.Attachments), whole, tt.wantIfs, tt.wantWhole)
			}
			if got.ContainerID != tt.id {
				t.Errorf("ContainerID = %q", got.ContainerID)
			}
			if tt.wantIfs > 0 && (got.CNIArgs != r.CNIArgs || got.PodName != "p" || got.Netns != "/ns") {
				t.Errorf("top-level fields not recovered: %+v", got)
			}
		})
	}
}

// SetAside keeps a corrupt record's bytes under a name List does not return.
func TestSetAside(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "c1.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := s.ReadRaw("c1")
	if err != nil || string(raw) != "garbage" {
		t.Fatalf("ReadRaw = %q, %v", raw, err)
	}
	aside, err := s.SetAside("c1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(aside); err != nil || string(b) != "garbage" {
		t.Errorf("aside %s = %q, %v", aside, b, err)
	}
	if ids, err := s.List(); err != nil || len(ids) != 0 {
		t.Errorf("List after SetAside = %q, %v", ids, err)
	}
	if _, err := s.SetAside("c1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second SetAside = %v, want ErrNotFound", err)
	}
}
