package state

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A record keeps the network-status an ADD publishes and whether it landed
// (format version 2), through Save and SaveBuffered.
func TestNetworkStatusRoundTrip(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []StatusState{StatusPending, StatusLanded, StatusWithdrawn} {
		in := sample("ctr-" + string(st))
		in.Complete = true
		in.NetworkStatus = &NetworkStatus{Value: "[\n  {\n    \"name\": \"cbr0\",\n    \"default\": true\n  }\n]", PodUID: "api-uid", State: st}
		for _, save := range []func(*Record) error{s.Save, s.SaveBuffered} {
			if err := save(in); err != nil {
				t.Fatal(err)
			}
			out, err := s.Load(in.ContainerID)
			if err != nil {
				t.Fatal(err)
			}
			if out.Version != 2 {
				t.Errorf("version %d, want 2 (the record has a field version 1 lacks)", out.Version)
			}
			if !reflect.DeepEqual(out.NetworkStatus, in.NetworkStatus) {
				t.Errorf("NetworkStatus = %+v, want %+v", out.NetworkStatus, in.NetworkStatus)
			}
			if out.Pending() != (st == StatusPending) {
				t.Errorf("state %q: Pending() = %v", st, out.Pending())
			}
		}
	}
	var none *Record
	if none.Pending() || (&Record{}).Pending() {
		t.Error("a nil record, or one without NetworkStatus, is pending")
	}
}

// A record written by a multinetd before version 2 still loads: no
// network-status to publish.
func TestLoadVersion1Record(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v1 := `{"version":1,"containerID":"old","netns":"/var/run/netns/x","podNamespace":"ns1","podName":"p","podUID":"uid-1",` +
		`"attachments":[{"network":"cbr0","default":true,"ifName":"eth0","confList":{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"bridge"}]},"phase":"added","result":{"cniVersion":"1.0.0"}}],` +
		`"complete":true,"updated":"2026-01-02T03:04:05.678Z"}`
	if err := os.WriteFile(filepath.Join(s.Dir(), "old.json"), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := s.Load("old")
	if err != nil {
		t.Fatalf("version 1 record: %v", err)
	}
	if r.Version != 1 || !r.Complete || len(r.Attachments) != 1 || r.NetworkStatus != nil || r.Pending() {
		t.Errorf("version 1 record loaded as %+v", r)
	}
	// Saved again it becomes version 2.
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	if r, err = s.Load("old"); err != nil || r.Version != RecordVersion {
		t.Errorf("re-saved: version %v, %v; want %d", r.Version, err, RecordVersion)
	}
}
