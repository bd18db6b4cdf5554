package attach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// corruptAside returns the corrupt records of id kept aside.
func (e *env) corruptAside(id string) []string {
	e.t.Helper()
	m, err := filepath.Glob(filepath.Join(e.store.Dir(), id+".json.corrupt-*"))
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// An ADD retried over a corrupt record (a crash while it was written, a bad
// disk) tears down what the earlier ADD made before it starts: the
// attachments libcni's cache and the pod's selection name. Before, ADD
// overwrote the record and the earlier attachments leaked (here the retried
// delegates even failed on the interfaces and leases still there).
func TestAddOverCorruptRecord(t *testing.T) {
	e := newEnv(t, nil)
	pod, id := e.addThree()
	cnitest.WriteFile(t, e.store.Dir(), id+".json", []byte(`{"containerID":`))

	if _, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod)); err != nil {
		t.Fatalf("ADD over a corrupt record: %v", err)
	}
	if got := ifNames(e.exec.of("DEL")); len(got) != 4 {
		t.Errorf("DELs before the new ADD = %q, want the earlier ADD's four attachments", got)
	}
	for _, n := range []string{e.defaultNet, "net-a", "net-b", "net-c"} {
		if got := e.leases(n); len(got) != 1 {
			t.Errorf("leases of %s = %q, want the new ADD's only", n, got)
		}
	}
	if len(e.corruptAside(id)) != 1 {
		t.Errorf("corrupt record not kept aside: %q", e.corruptAside(id))
	}
	if got := e.events.of("Warning", kube.ReasonCorruptRecord); len(got) != 1 {
		t.Errorf("CorruptAttachmentRecord events = %+v, want 1", got)
	}
	if rec, err := e.store.Load(id); err != nil || !rec.Complete || len(rec.Attachments) != 4 {
		t.Errorf("record after the ADD: %+v, %v", rec, err)
	}
}

// DEL with a corrupt record while the API server is down: what libcni's
// cache and the record's readable part name is torn down (before: eth0
// only, and net1..net3 leaked); as the pod's selection cannot be read, DEL
// fails with an error and an Event saying so, the record is kept (marked
// partial) for the retry, which succeeds once the API server answers.
func TestDelCorruptRecordAPIDown(t *testing.T) {
	for _, tt := range []struct {
		name string
		// corrupt returns the corrupt record's bytes from the real one.
		corrupt func(real []byte) []byte
		// dropCache removes libcni's cache (the record is all there is).
		dropCache bool
		wantDels  []string
	}{
		{name: "garbage", corrupt: func([]byte) []byte { return []byte(`{"containerID":`) }, wantDels: []string{"net3", "net2", "net1", "eth0"}},
		{name: "truncated, no libcni cache", dropCache: true, corrupt: func(real []byte) []byte {
			// cut inside the third attachment: eth0 and net1 are readable
			i := strings.Index(string(real), `"ifName":"net2"`)
			return real[:i]
		}, wantDels: []string{"net1", "eth0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			pod, id := e.addThree()
			real, err := os.ReadFile(filepath.Join(e.store.Dir(), id+".json"))
			if err != nil {
				t.Fatal(err)
			}
			cnitest.WriteFile(t, e.store.Dir(), id+".json", tt.corrupt(real))
			if tt.dropCache {
				if err := os.RemoveAll(e.eng.opts.CacheDir); err != nil {
					t.Fatal(err)
				}
			}
			e.pods.setErr(errors.New("API server down"))

			err = e.eng.Del(context.Background(), e.req(api.CmdDel, id, pod))
			if err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("DEL = %v, want an error saying the record is corrupt and the rest unknown", err)
			}
			if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, tt.wantDels) {
				t.Errorf("delegate DELs = %q, want %q", got, tt.wantDels)
			}
			e.wantLeases(e.defaultNet, 0)
			e.wantLeases("net-a", 0)
			if got := e.events.of("Warning", kube.ReasonCorruptRecord); len(got) != 1 {
				t.Errorf("CorruptAttachmentRecord events = %+v, want 1", got)
			}
			if len(e.corruptAside(id)) != 1 {
				t.Errorf("corrupt record not kept aside: %q", e.corruptAside(id))
			}
			rec, err := e.store.Load(id)
			if err != nil || !rec.Partial {
				t.Fatalf("record after the DEL: %+v, %v; want one marked partial", rec, err)
			}

			// The API server is back: the retry tears down the pod's
			// selection and succeeds.
			e.pods.setErr(nil)
			e.exec.reset()
			e.del(id, pod)
			if got := ifNames(e.exec.of("DEL")); len(got) != 4 {
				t.Errorf("retried DEL ran %q, want the pod's four networks", got)
			}
			e.wantNoLeases()
			if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("record after the retried DEL: %v, want ErrNotFound", err)
			}
		})
	}
}

// GC of a gone container whose record is corrupt tears down what libcni's
// cache names instead of only deleting the record (before: net1..net3
// leaked), keeps the corrupt bytes aside and reports it: an Event on the
// pod libcni's cached CNI_ARGS name, the metric.
func TestGCCorruptRecordOfGoneContainer(t *testing.T) {
	obs := &recordObs{}
	e := newEnv(t, func(o *envOptions) { o.Observer = obs })
	_, id := e.addThree()
	cnitest.WriteFile(t, e.store.Dir(), id+".json", []byte("\x00\x00garbage"))
	if err := e.eng.GC(context.Background(), e.gcReq()); err != nil {
		t.Fatalf("GC: %v", err)
	}
	e.wantNoLeases()
	if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after GC: %v, want ErrNotFound", err)
	}
	if len(e.corruptAside(id)) != 1 {
		t.Errorf("corrupt record not kept aside: %q", e.corruptAside(id))
	}
	// the pod, named by the CNI_ARGS libcni cached at ADD, gets the Event
	if got := e.events.of("Warning", kube.ReasonCorruptRecord); len(got) != 1 {
		t.Errorf("CorruptAttachmentRecord events = %+v, want 1", got)
	}
	if !slices.Equal(obs.corrupt, []string{"GC recovered"}) {
		t.Errorf("RecordObserver calls = %q, want GC recovered", obs.corrupt)
	}
}

// recordObs is an Observer that records CorruptRecord calls.
type recordObs struct {
	mu      sync.Mutex
	corrupt []string
}

func (*recordObs) DelegateDone(string, string, time.Duration, error) {}

func (r *recordObs) CorruptRecord(op, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.corrupt = append(r.corrupt, op+" "+outcome)
}

// GC runs the delegates' GC on every network multinetd has attached on the
// node, not only those of live records: a lease whose container lost its
// record is released, one of a live record is kept.
func TestGCReclaimsNetworksWithoutRecords(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	e.bridgeNAD("net-b")
	kept, lost := e.podWithNetworks("net-a"), e.podWithNetworks("net-b")
	keptID, lostID := "ctr-kept-"+cnitest.UniqueName(""), "ctr-lost-"+cnitest.UniqueName("")
	e.add(keptID, kept)
	lostNS := cnitest.NewNS(t)
	req := e.req(api.CmdAdd, lostID, lost)
	req.Netns = lostNS.Path()
	if _, err := e.eng.Add(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(lostID); err != nil { // the record is lost
		t.Fatal(err)
	}
	e.exec.reset()

	if err := e.eng.GC(context.Background(), e.gcReq(keptID)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	e.wantLeases("net-b", 0)
	if got := e.leases("net-a"); len(got) != 1 || !strings.Contains(got[0], keptID) {
		t.Errorf("leases of net-a = %q, want the kept container's", got)
	}
	if got := e.leases(e.defaultNet); len(got) != 1 || !strings.Contains(got[0], keptID) {
		t.Errorf("leases of the default network = %q, want the kept container's", got)
	}
	for _, c := range e.exec.of("DEL") {
		if c.ContainerID == keptID {
			t.Errorf("GC ran DEL on the kept container's %s", c.IfName)
		}
	}
}

// A container the runtime lists as valid keeps its attachments through GC
// even when no record names them (an ADD that began after GC listed the
// records, or a record lost while the pod runs): libcni's cache of a valid
// container is valid.
func TestGCKeepsValidContainerWithoutRecord(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-b")
	pod := e.podWithNetworks("net-b")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	if err := e.store.Delete(id); err != nil {
		t.Fatal(err)
	}
	e.exec.reset()
	if err := e.eng.GC(context.Background(), e.gcReq(id)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if calls := e.exec.of("DEL"); len(calls) != 0 {
		t.Errorf("GC ran DEL on a valid container: %q", ifNames(calls))
	}
	e.wantLeases("net-b", 1)
	e.wantLeases(e.defaultNet, 1)
}
