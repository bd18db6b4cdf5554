package attach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// age makes the record of container id look written d ago.
func (e *env) age(id string, d time.Duration) {
	e.t.Helper()
	old := time.Now().Add(-d)
	if err := os.Chtimes(filepath.Join(e.store.Dir(), id+".json"), old, old); err != nil {
		e.t.Fatal(err)
	}
}

func listed(ids ...string) func(string) bool {
	return func(id string) bool { return slices.Contains(ids, id) }
}

// Reap tears down the attachments of a sandbox the runtime no longer lists
// (its DEL never reached multinetd: the leak the chaos suite found) and
// removes its record; a listed sandbox is untouched.
func TestReapTearsDownSandboxesTheRuntimeNoLongerHas(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	gone, kept := e.podWithNetworks("net-a"), e.podWithNetworks("net-a")
	goneID, keptID := "ctr-gone-"+cnitest.UniqueName(""), "ctr-kept-"+cnitest.UniqueName("")
	e.add(goneID, gone)
	req := e.req(api.CmdAdd, keptID, kept)
	req.Netns = cnitest.NewNS(t).Path()
	if _, err := e.eng.Add(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	e.age(goneID, time.Hour)
	e.age(keptID, time.Hour)
	e.exec.reset()

	res, err := e.eng.Reap(context.Background(), listed(keptID), time.Minute)
	if err != nil {
		t.Fatalf("Reap: %v", err)
	}
	if !slices.Equal(res.Reaped, []string{goneID}) || res.Young != 0 || res.Busy != 0 {
		t.Errorf("Reap = %+v, want %s reaped only", res, goneID)
	}
	if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, []string{"net1", "eth0"}) {
		t.Errorf("Reap's DELs = %q, want net1, eth0 of the gone sandbox", got)
	}
	for _, c := range e.exec.of("DEL") {
		if c.ContainerID != goneID {
			t.Errorf("Reap ran DEL on %s %s, a listed sandbox", c.ContainerID, c.IfName)
		}
	}
	for _, n := range []string{e.defaultNet, "net-a"} {
		if got := e.leases(n); len(got) != 1 || !strings.Contains(got[0], keptID) {
			t.Errorf("leases of %s after Reap = %q, want the kept sandbox's only", n, got)
		}
	}
	if _, err := e.store.Load(goneID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record of the gone sandbox: %v, want ErrNotFound", err)
	}
	if rec, err := e.store.Load(keptID); err != nil || len(rec.Attachments) != 2 {
		t.Errorf("record of the kept sandbox: %v, %v", rec, err)
	}
}

// A record written less than minAge ago may be an ADD whose sandbox the
// runtime has not listed yet, and a container with an operation in progress
// is in the middle of one: Reap leaves both.
func TestReapLeavesYoungAndBusyRecords(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	young, busy := "ctr-young-"+cnitest.UniqueName(""), "ctr-busy-"+cnitest.UniqueName("")
	e.add(young, e.podWithNetworks("net-a"))
	req := e.req(api.CmdAdd, busy, e.podWithNetworks("net-a"))
	req.Netns = cnitest.NewNS(t).Path()
	if _, err := e.eng.Add(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	e.age(busy, time.Hour)
	unlock, err := e.eng.locks.Lock(context.Background(), busy)
	if err != nil {
		t.Fatal(err)
	}
	e.exec.reset()
	res, err := e.eng.Reap(context.Background(), listed(), time.Minute)
	unlock()
	if err != nil {
		t.Fatalf("Reap: %v", err)
	}
	if len(res.Reaped) != 0 || res.Young != 1 || res.Busy != 1 {
		t.Errorf("Reap = %+v, want 1 young and 1 busy, none reaped", res)
	}
	if calls := e.exec.of("DEL"); len(calls) != 0 {
		t.Errorf("Reap ran DEL: %+v", calls)
	}
	e.wantLeases("net-a", 2)

	// Once old enough and free, both go.
	e.age(young, time.Hour)
	res, err = e.eng.Reap(context.Background(), listed(), time.Minute)
	if err != nil || len(res.Reaped) != 2 {
		t.Fatalf("second Reap = %+v, %v; want both reaped", res, err)
	}
	e.wantLeases("net-a", 0)
	e.wantLeases(e.defaultNet, 0)
}

// A corrupt record of a gone sandbox: what libcni's cache names is torn
// down, as GC does.
func TestReapCorruptRecord(t *testing.T) {
	e := newEnv(t, nil)
	_, id := e.addThree()
	cnitest.WriteFile(t, e.store.Dir(), id+".json", []byte("\x00garbage"))
	e.age(id, time.Hour)
	res, err := e.eng.Reap(context.Background(), listed(), time.Minute)
	if err != nil || !slices.Equal(res.Reaped, []string{id}) {
		t.Fatalf("Reap = %+v, %v; want %s reaped", res, err, id)
	}
	e.wantNoLeases()
	if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after Reap: %v, want ErrNotFound", err)
	}
}

// Before multinetd served any request it knows no CNI_PATH (without
// cniBinDirs): Reap does nothing rather than fail every DEL.
func TestReapWaitsForACNIPath(t *testing.T) {
	e := newEnv(t, nil)
	_, id := e.addThree()
	e.age(id, time.Hour)
	fresh, err := New(e.eng.opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fresh.Reap(context.Background(), listed(), time.Minute)
	if err != nil || len(res.Reaped) != 0 {
		t.Errorf("Reap before any request = %+v, %v; want nothing done", res, err)
	}
	if _, err := e.store.Load(id); err != nil {
		t.Errorf("record after Reap: %v, want it kept", err)
	}
}
